#include "ipc/arena_reads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "ipc/shared_arena.h"

namespace joader {
namespace {

constexpr uint64_t kPage = ArenaReads::kPage;

TEST(ArenaReadsTest, ReadsEveryItemInPlaceWhereFirstReadsAreCheap) {
  ArenaReads reads(64 * kPage, 0);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(reads.copy(3 * kPage, 5 * kPage));
}

TEST(ArenaReadsTest, CopiesAnItemUntilEachOfItsPagesWasReadCopyReadsTimes) {
  ArenaReads reads(64 * kPage, 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(reads.copy(2 * kPage + 100, kPage)) << "read " << i;  // pages 2 and 3
  EXPECT_FALSE(reads.copy(2 * kPage + 100, kPage));
  EXPECT_FALSE(reads.copy(2 * kPage, 2 * kPage));  // the same two pages, whole
}

TEST(ArenaReadsTest, AnItemWithOneNewPageIsCopiedAndCountsOnlyThePagesStillNew) {
  ArenaReads reads(64 * kPage, 2);
  EXPECT_TRUE(reads.copy(0, kPage));
  EXPECT_TRUE(reads.copy(0, kPage));  // page 0 read twice: in place from now on
  EXPECT_TRUE(reads.copy(0, 2 * kPage));  // page 1 is new
  EXPECT_TRUE(reads.copy(kPage, kPage));  // page 1's second read
  EXPECT_FALSE(reads.copy(0, 2 * kPage));
}

TEST(ArenaReadsTest, AnItemEndingAtAPageBoundaryDoesNotCountTheNextPage) {
  ArenaReads reads(4 * kPage, 1);
  EXPECT_TRUE(reads.copy(0, kPage));
  EXPECT_TRUE(reads.copy(kPage, kPage));  // page 1 was not counted by the first item
  EXPECT_FALSE(reads.copy(kPage - 1, 2));  // the last byte of page 0 and the first of page 1
}

TEST(ArenaReadsTest, ReadsEmptyItemsAndRangesOutsideTheArenaInPlaceWithoutCountingThem) {
  ArenaReads reads(4 * kPage, 1);
  EXPECT_FALSE(reads.copy(4 * kPage, kPage));
  EXPECT_FALSE(reads.copy(0, 0));
}

// What a client process does: an ArenaView copies items with pread exactly as they lie in the
// arena, and refuses ranges outside it.
TEST(ArenaReadsTest, AViewCopiesTheArenasBytesAndRefusesRangesOutsideIt) {
  SharedArena arena(uint64_t{1} << 20);
  std::iota(arena.data(), arena.data() + arena.size(), uint8_t{0});
  ArenaView view(arena.name(), arena.size(), getuid());
  std::vector<uint8_t> out(3 * kPage + 17);
  view.copy(5 * kPage + 3, out.size(), out.data());
  EXPECT_EQ(std::memcmp(out.data(), arena.data() + 5 * kPage + 3, out.size()), 0);
  EXPECT_THROW(view.copy(arena.size() - 10, 11, out.data()), std::runtime_error);
  EXPECT_GE(view.first_read_micros(), 0.0);
}

}  // namespace
}  // namespace joader
