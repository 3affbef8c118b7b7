#include "server/default_cache.h"

#include <gtest/gtest.h>

namespace joader {
namespace {

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

TEST(DefaultCache, IsAQuarterOfRamRoundedDownTo64MiB) {
  EXPECT_EQ(default_cache_bytes(24 * GiB, 24 * GiB), 6 * GiB);
  EXPECT_EQ(default_cache_bytes(23 * GiB + 500 * MiB, 100 * GiB), 5 * GiB + 832 * MiB);
}

TEST(DefaultCache, IsAtMostHalfOfTheFreeSharedMemory) {
  EXPECT_EQ(default_cache_bytes(64 * GiB, 8 * GiB), 4 * GiB) << "a small /dev/shm";
  EXPECT_EQ(default_cache_bytes(64 * GiB, 0), 16 * GiB) << "/dev/shm unreadable: RAM alone";
}

TEST(DefaultCache, IsAtMost64GiB) {
  EXPECT_EQ(default_cache_bytes(1024 * GiB, 1024 * GiB), 64 * GiB) << "a start on a large host takes seconds";
}

TEST(DefaultCache, IsNeverBelow64MiB) {
  EXPECT_EQ(default_cache_bytes(128 * MiB, 64 * MiB), 64 * MiB) << "a container's 64 MiB /dev/shm fails at start, "
                                                                   "with the figure, rather than running starved";
}

TEST(DefaultCache, OnThisMachineIsWithinTheRule) {
  std::string why;
  const uint64_t bytes = default_cache_bytes(&why);
  const MachineMemory m = machine_memory();
  EXPECT_GE(bytes, 64 * MiB);
  EXPECT_LE(bytes, std::max(64 * MiB, m.ram_bytes / 4));
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace joader
