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
  // the populate thread has mapped every page (reading smaps walks the whole mapping: ~30 ms for
  // 8 GiB, too much for every status call), live until then or where populating is unsupported.
  uint64_t huge_page_bytes() const;

  // Unlinks arenas of this user left by daemons that no longer run (their pid is gone).
  // Returns how many were removed.
  static int remove_stale();

 private:
  // Maps every page of the arena into the daemon's page table, in 32 MiB steps, on a thread of its
  // own started by the constructor (so that start-up does not wait for it; 512 MiB take ~0.2 s).
  // Otherwise the first write to each page of the arena faults, inside the first epoch: mapping
  // them ahead made 4 identical jobs' first epoch 1.13× faster (bench/e2e b k=4, 3 pairs; the
  // copy into the arena and the daemon's kernel time were 25 % of the CPU of that window). The
  // clients' read-only views are not populated: that would cost each job ~0.2 s per 512 MiB of
  // arena at start, seconds for large caches, and gained nothing beyond the daemon's populate.
  void populate(const std::stop_token& stop);

  std::string name_;
  uint64_t size_;
  uint8_t* data_ = nullptr;
  uint64_t populated_huge_bytes_ = 0;  // written by the populate thread before populated_ is set
  std::atomic<bool> populated_{false};
  std::jthread populate_;
};

// Huge pages. Every item is written by the daemon and read by each job from memory
// none of them touched before; in 4 KiB pages, inside a first epoch, the code touching the arena
// ran 5-16x slower than alone, and with 2 MiB pages 4 identical jobs' first epoch was ~1.4x
// faster (docs/BENCHMARKS.md, "Huge pages for the arena"). The arena is a POSIX shared-memory
// object on /dev/shm, which gets huge pages only where that tmpfs is mounted with
// huge=within_size or huge=always (or shmem_enabled is "force"): the machine owner's setting,
// not the daemon's (docs/DAEMON.md, "Huge pages"). The daemon and every view also ask for them
// (madvise MADV_HUGEPAGE) so that mappings take them whole where the kernel gives them; under
// huge=advise that comes too late for the arena, reserved by posix_fallocate before it is mapped.
// What decides the arena's page size: "huge=never" (tmpfs's default), "huge=within_size", ... from
// /dev/shm's mount options, "shmem_enabled=force" / "=deny" where that overrides them, or
// "unknown" where /dev/shm is not found.
std::string arena_page_setting();

// A read-only mapping of a daemon's arena, for clients.
class ArenaView {
 public:
  ArenaView(const std::string& name, uint64_t size);
  ~ArenaView();
  ArenaView(const ArenaView&) = delete;
  ArenaView& operator=(const ArenaView&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint64_t size_;
  const uint8_t* data_ = nullptr;
};

}  // namespace joader
