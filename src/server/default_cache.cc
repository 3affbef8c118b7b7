#include "server/default_cache.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <string>

#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

namespace joader {

namespace {
constexpr uint64_t kStep = 64ull << 20;
constexpr uint64_t kCap = 64ull << 30;

// The memory limit of this process's cgroup (v2 memory.max, else v1 memory.limit_in_bytes); 0: none.
uint64_t cgroup_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max") continue;
    try {
      const uint64_t limit = std::stoull(word);
      if (limit < (1ull << 60)) return limit;  // v1 says "no limit" with a number near 2^63
    } catch (const std::exception&) {
    }
  }
  return 0;
}

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30)); }
}  // namespace

uint64_t default_cache_bytes(uint64_t ram_bytes, uint64_t shm_free_bytes) {
  uint64_t bytes = std::min(ram_bytes / 4, kCap);
  if (shm_free_bytes != 0) bytes = std::min(bytes, shm_free_bytes / 2);
  return std::max(kStep, bytes / kStep * kStep);
}

MachineMemory machine_memory() {
  MachineMemory m;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) m.ram_bytes = uint64_t(pages) * uint64_t(page);
  if (const uint64_t limit = cgroup_limit(); limit != 0 && limit < m.ram_bytes) {
    m.ram_bytes = limit;
    m.limited = true;
  }
  struct statvfs shm{};
  if (statvfs("/dev/shm", &shm) == 0) m.shm_free_bytes = uint64_t(shm.f_bavail) * shm.f_frsize;
  return m;
}

uint64_t default_cache_bytes(std::string* why) {
  const MachineMemory m = machine_memory();
  const uint64_t bytes = default_cache_bytes(m.ram_bytes, m.shm_free_bytes);
  if (why != nullptr) {
    if (m.shm_free_bytes != 0 && m.shm_free_bytes / 2 < std::min(m.ram_bytes / 4, kCap)) {
      *why = fmt::format("half of the {} free on /dev/shm", gib(m.shm_free_bytes));
    } else if (m.ram_bytes / 4 > kCap) {
      *why = fmt::format("the most it takes by default, of {} of RAM", gib(m.ram_bytes));
    } else {
      *why = fmt::format("a quarter of {} of {}", gib(m.ram_bytes), m.limited ? "memory (this cgroup's limit)" : "RAM");
    }
  }
  return bytes;
}

}  // namespace joader
