#include "server/default_cache.h"

#include <algorithm>

#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

namespace joader {

namespace {
constexpr uint64_t kStep = 64ull << 20;

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30)); }
}  // namespace

uint64_t default_cache_bytes(uint64_t ram_bytes, uint64_t shm_free_bytes) {
  uint64_t bytes = ram_bytes / 4;
  if (shm_free_bytes != 0) bytes = std::min(bytes, shm_free_bytes / 2);
  return std::max(kStep, bytes / kStep * kStep);
}

MachineMemory machine_memory() {
  MachineMemory m;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) m.ram_bytes = uint64_t(pages) * uint64_t(page);
  struct statvfs shm{};
  if (statvfs("/dev/shm", &shm) == 0) m.shm_free_bytes = uint64_t(shm.f_bavail) * shm.f_frsize;
  return m;
}

uint64_t default_cache_bytes(std::string* why) {
  const MachineMemory m = machine_memory();
  const uint64_t bytes = default_cache_bytes(m.ram_bytes, m.shm_free_bytes);
  if (why != nullptr) {
    *why = m.shm_free_bytes != 0 && m.shm_free_bytes / 2 < m.ram_bytes / 4
               ? fmt::format("half of the {} free on /dev/shm", gib(m.shm_free_bytes))
               : fmt::format("a quarter of {} of RAM", gib(m.ram_bytes));
  }
  return bytes;
}

}  // namespace joader
