#include "ipc/shared_arena.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <thread>

namespace joader {
namespace {

TEST(SharedArenaTest, NamesWhatDecidesItsPageSize) {
  EXPECT_TRUE(std::regex_match(arena_page_setting(), std::regex("huge=[a-z_]+|shmem_enabled=(force|deny)|unknown")))
      << arena_page_setting();
}

// Written whole, an arena is in 2 MiB pages exactly where the machine's setting gives them: none
// under Debian's /dev/shm (huge=never), some under huge=within_size / always or a forced
// shmem_enabled. (Checked by hand under both mounts; a test run sees whichever the machine has.)
TEST(SharedArenaTest, CountsTheBytesMappedInHugePagesAsTheMachineGivesThem) {
  SharedArena arena(uint64_t{8} << 20);
  std::memset(arena.data(), 1, arena.size());
  const std::string setting = arena_page_setting();
  const uint64_t huge = arena.huge_page_bytes();
  EXPECT_LE(huge, arena.size());
  if (setting == "huge=never" || setting == "shmem_enabled=deny") {
    EXPECT_EQ(huge, 0u) << setting;
  }
  if (setting == "huge=within_size" || setting == "huge=always" || setting == "shmem_enabled=force") {
    EXPECT_GT(huge, 0u) << setting;
  }
}

// The arena is usable at once: items written while the background thread still maps and touches
// its pages keep their bytes (it only reads), and it reports ready once every page is done.
TEST(SharedArenaTest, BecomesReadyInTheBackgroundKeepingWhatWasWrittenMeanwhile) {
  SharedArena arena(uint64_t{64} << 20);
  for (uint64_t at = 0; at < arena.size(); at += 4096) arena.data()[at] = static_cast<uint8_t>(at / 4096 % 251 + 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!arena.ready() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(arena.ready());
  for (uint64_t at = 0; at < arena.size(); at += 4096) {
    ASSERT_EQ(arena.data()[at], static_cast<uint8_t>(at / 4096 % 251 + 1)) << "page " << at / 4096;
  }
}

}  // namespace
}  // namespace joader
