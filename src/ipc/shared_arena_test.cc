#include "ipc/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <thread>

namespace joader {
namespace {

// A client maps only its daemon's own arena: an object of another uid, or one that other users
// may write, could hold anybody's bytes under the daemon's name.
TEST(SharedArenaTest, AViewRefusesAnArenaOfAnotherUidOrOneOthersMayWrite) {
  SharedArena arena(uint64_t{1} << 20);
  EXPECT_NO_THROW(ArenaView(arena.name(), arena.size(), getuid()));
  try {
    ArenaView view(arena.name(), arena.size(), getuid() + 1);
    ADD_FAILURE() << "mapped an arena of another uid";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not to the daemon's uid " + std::to_string(getuid() + 1)), std::string::npos)
        << e.what();
  }
  const int fd = shm_open(arena.name().c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0666), 0);
  close(fd);
  EXPECT_THROW(ArenaView(arena.name(), arena.size(), getuid()), std::runtime_error);
}

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
