// ArenaReads: how a client process reads an item out of the daemon's arena — in place, through
// its own mapping, or copied with pread(2) — decided page by page from how often it has read them.
//
// Why. On some virtual machines the hypervisor keeps its own copy of every process's page table
// and fills it on the first access to each page, mapped ahead or not (shadow paging). There a new
// process's first read of each 4 KiB page of the arena costs a trap, many times what a second read
// costs, while pread copies an item at the same cost first time or not, well below the trap's,
// because the kernel reads the pages through its own mapping (bench/first_touch_bench.cc;
// docs/BENCHMARKS.md, "First touches"). Every job is a new process and reads every item of its
// first epoch from pages it never touched: four jobs paid that trap ~8000 times in a 2000-image
// first epoch. On bare metal, or a VM with nested paging, the first read of a page costs a minor
// fault for 16 pages at once, and copying would only add work.
//
// So a process measures what a first read costs when it maps the arena (ArenaView) and, where it is
// a trap (kTrapMicros or more per page), copies an item with pread while some page of it has been
// read fewer than `copy_reads` times, and reads it in place from then on: ski rental. Reading a
// page in place costs the trap once and little per read after it; a copy costs somewhat more every
// time, and the trap is worth about kCopyReads copies' extra. A page read at most kCopyReads = 4
// times in the process's life (a job of a few epochs, an evaluation pass, a dataset larger than
// the cache cycling through it) is cheapest copied; one read more often pays at most about one
// trap more than had it been read in place from the start, once, and then reads in place for good.
// (Copying only a page's first read was measured and rejected: it moves the trap into the second
// epoch, much slower there and slower over two epochs.) Where the first read is cheap, copy_reads
// is 0 and every item is read in place. Job::next copies whole items into the Batch; a
// BatchBuilder (src/client/batch_builder.h, used by the Python binding) instead copies each item
// as it writes it into the batch array (readable: straight into its slot, or through a buffer that stays in the core's cache; with
// reused batch arrays, four evaluation jobs' first epoch was faster), and only the box's rows for
// a pipeline starting with RandomResizedCrop (read_rows): a whole 560 KB image copied for a crop
// of a third of it made training jobs no faster, the rows faster. The figures: docs/BENCHMARKS.md,
// "First touches", "Per-item copies and reused batch arrays" and "Design measurements quoted from
// the code".
//
// Thread-safe: the jobs of one Client share their arena's view (one mapping, one ArenaReads) and
// may read from several threads. A page at the edge of two items is counted by both, so it may be
// read in place (and trap) after fewer than copy_reads reads of its own: one page per item at most.
// Counts are kept with relaxed atomics; two reads racing on one page may count once, which only
// delays the switch to reading in place.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace joader {

class ArenaReads {
 public:
  static constexpr uint64_t kPage = 4096;
  // A first read of a page costing this many µs or more is a trap worth avoiding: below what
  // ArenaView's probe measured in a new process on a VM that traps, above what it measured in the
  // process that wrote the pages (no trap; docs/BENCHMARKS.md, "First touches"); a minor fault on
  // bare metal maps 16 pages for ~1 µs.
  static constexpr double kTrapMicros = 0.75;
  // Reads of a page copied before it is read in place (see above: ~ the trap / a copy's extra).
  static constexpr uint8_t kCopyReads = 4;

  // For an arena of `size` bytes; copy_reads 0: every item is read in place.
  ArenaReads(uint64_t size, uint8_t copy_reads);

  uint8_t copy_reads() const { return copy_reads_; }

  // Whether the item at [offset, offset + length) should be copied: some page of it has been read
  // fewer than copy_reads() times. Counts this read for each of its pages. Offsets beyond the arena
  // are the caller's to refuse (they answer false).
  bool copy(uint64_t offset, uint64_t length);

 private:
  uint64_t pages_;
  uint8_t copy_reads_;
  std::unique_ptr<std::atomic<uint8_t>[]> reads_;  // per page, saturating at copy_reads_
};

}  // namespace joader
