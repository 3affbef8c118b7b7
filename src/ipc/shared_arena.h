// The shared-memory arena: one POSIX shared-memory object per daemon, created 0600 (0640 for a
// shared daemon's group), mapped
// read-write by the daemon and read-only by its clients. Prepared items live here; clients read
// them in place through the offsets carried by batch descriptors.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "ipc/arena_reads.h"

namespace joader {

class SharedArena {
 public:
  // Creates and maps a new object named "/joader-<uid>-<pid>-<n>" of `size` bytes, 0600, or
  // 0640 owned by `group` when the daemon is shared with one. Throws std::runtime_error (with
  // errno text) on failure.
  explicit SharedArena(uint64_t size, std::optional<gid_t> group = std::nullopt);
  ~SharedArena();  // unmaps and unlinks
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }

  // Bytes of the arena this process has mapped in huge (2 MiB) pages: the ShmemPmdMapped of its
  // mapping in /proc/self/smaps (0 where that is unreadable). See "Huge pages" below. Read once
  // the populate thread has mapped every page (reading smaps walks the whole mapping, too slow for
  // every status call on a large arena: docs/BENCHMARKS.md, "Design measurements quoted from the
  // code"), live until then.
  uint64_t huge_page_bytes() const;

  // Whether the populate thread (below) has mapped and touched every page of the arena: until
  // then the first write to a page it has not reached costs a fault (and, on some virtual
  // machines, a trap into the hypervisor), inside the loads of the jobs that come first.
  bool ready() const { return populated_.load(std::memory_order_acquire); }

  // Unlinks arenas of this user left by daemons that no longer run (their pid is gone).
  // Returns how many were removed.
  static int remove_stale();

 private:
  // Maps every page of the arena into the daemon's page table and then reads one byte of each, in
  // 32 MiB steps, on a thread of its own started by the constructor (so that start-up does not
  // wait for it: mapping and touching a large arena takes seconds). Otherwise the first write to
  // each page of the arena faults, inside the first epoch: mapping them ahead made 4 identical
  // jobs' first epoch faster (bench/e2e b k=4; docs/BENCHMARKS.md, "Mapping the arena ahead"). The
  // touch is for virtual machines whose hypervisor keeps its own copy of each process's page
  // table and fills it on the first access to each page, mapped ahead or not: there that first
  // write costs many times a write to a touched page (bench/first_touch_bench.cc;
  // docs/BENCHMARKS.md, "First touches"; the populate thread's own times in "Design measurements
  // quoted from the code"); on bare metal it costs a read of one line per page. The
  // clients' read-only views are not populated or touched: a new process pays that first access
  // again on its own mapping, ahead or not, so doing it at registration would only move the cost
  // to the job's start, for every page of the arena rather than the ones it reads; where it is a
  // trap, clients copy items with pread instead (ArenaReads, src/ipc/arena_reads.h).
  void populate(const std::stop_token& stop);

  std::string name_;
  uint64_t size_;
  uint8_t* data_ = nullptr;
  uint64_t populated_huge_bytes_ = 0;  // written by the populate thread before populated_ is set
  std::atomic<bool> populated_{false};
  std::jthread populate_;
};

// Huge pages. Every item is written by the daemon and read by each job from memory none of them
// touched before; in 4 KiB pages, inside a first epoch, the code touching the arena ran several
// times slower than alone, and with 2 MiB pages 4 identical jobs' first epoch was faster
// (docs/BENCHMARKS.md, "Where the window's CPU goes, with the gather vectorised" and "Huge pages
// for the arena"). The arena is a POSIX shared-memory object on /dev/shm, which gets huge pages
// only where that tmpfs is mounted with huge=within_size or huge=always (or shmem_enabled is
// "force"): the machine owner's setting, not the daemon's (docs/DAEMON.md, "Huge pages"). The
// daemon and every view also ask for them (madvise MADV_HUGEPAGE) so that mappings take them whole
// where the kernel gives them; under huge=advise that comes too late for the arena, reserved by
// posix_fallocate before it is mapped.
// What decides the arena's page size: "huge=never" (tmpfs's default), "huge=within_size", ... from
// /dev/shm's mount options, "shmem_enabled=force" / "=deny" where that overrides them, or
// "unknown" where /dev/shm is not found.
std::string arena_page_setting();

// A read-only mapping of a daemon's arena, for clients, and how this process reads items from it
// (in place, or copied with pread: see src/ipc/arena_reads.h).
class ArenaView {
 public:
  // Maps the arena and measures what a first read of one of its pages costs this process (over
  // 64 pages at its end), which sets reads().copy_reads(): ArenaReads::kCopyReads where that is a
  // trap, 0 where it is not. The environment variable JOADER_ARENA_COPY_READS (0-255), where set,
  // decides instead (for measurements). Throws std::runtime_error unless the object belongs to
  // `owner` (the daemon's uid, read from its socket) and no other user may write it: a file
  // that someone else created under the daemon's name would feed this process their bytes.
  ArenaView(const std::string& name, uint64_t size, uid_t owner);
  ~ArenaView();
  ArenaView(const ArenaView&) = delete;
  ArenaView& operator=(const ArenaView&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // µs per page of this process's first reads, as measured at construction.
  double first_read_micros() const { return first_read_micros_; }
  ArenaReads& reads() { return reads_; }
  // Copies [offset, offset + n) of the arena to dst with pread(2), not through this process's
  // mapping. Throws std::runtime_error if that fails or the range is outside the arena.
  void copy(uint64_t offset, uint64_t n, uint8_t* dst) const;

 private:
  uint64_t size_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  double first_read_micros_ = 0;
  ArenaReads reads_;
};

}  // namespace joader
