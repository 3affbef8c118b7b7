// The cache size a daemon takes when none is given (`joader serve` without --cache-size, and so
// the daemon the first loader starts): sized from the machine, so that a sweep of large photos
// needs no setting (docs/DAEMON.md, "Memory").
//
// The rule: a quarter of the machine's RAM (or of the memory limit of the daemon's cgroup, when
// lower: a container's), at most 64 GiB, and at most half of the space free on /dev/shm (the arena
// lives there and is reserved whole at start), rounded down to a multiple of 64 MiB, and at least
// 64 MiB (a smaller /dev/shm then fails at start with the figure). A quarter leaves the training
// processes, their models and the page cache the rest; the arena is committed memory. The cap
// keeps a start on a large host to seconds (the arena is reserved and touched at start).
#pragma once

#include <cstdint>
#include <string>

namespace joader {

// The rule on given figures (bytes).
uint64_t default_cache_bytes(uint64_t ram_bytes, uint64_t shm_free_bytes);

struct MachineMemory {
  uint64_t ram_bytes = 0;       // physical memory (sysconf), or the cgroup's limit when lower
  bool limited = false;         // ram_bytes is the cgroup's limit
  uint64_t shm_free_bytes = 0;  // free on /dev/shm (statvfs); 0 if it cannot be read
};
MachineMemory machine_memory();

// The rule on this machine, and why, for the start line: "a quarter of 23.4 GiB of RAM".
uint64_t default_cache_bytes(std::string* why);

}  // namespace joader
