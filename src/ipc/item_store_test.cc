// The item store alone: cached items, their arena blocks and pins kept consistent, whatever way an
// item leaves.
#include "ipc/item_store.h"

#include <gtest/gtest.h>

namespace joader {
namespace {

constexpr uint64_t kBlock = ArenaAllocator::kAlign;

ItemStore fifo_store(uint64_t blocks) { return ItemStore(blocks * kBlock, make_policy("fifo", {})); }

void expect_consistent(const ItemStore& store) { EXPECT_EQ(store.broken_invariant(), ""); }

TEST(ItemStore, PlacingEvictsUnpinnedItemsInThePolicysOrderAndFreesTheirBlocks) {
  ItemStore store = fifo_store(4);
  for (ItemId i = 0; i < 4; ++i) {
    ASSERT_NE(store.place(cache_key(0, i), kBlock), nullptr);
    store.unpin(cache_key(0, i));  // written: evictable
  }
  EXPECT_EQ(store.used(), 4 * kBlock);
  const Placement* p = store.place(cache_key(0, 4), 2 * kBlock);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(store.contains(cache_key(0, 0)));  // first in, first out
  EXPECT_FALSE(store.contains(cache_key(0, 1)));
  EXPECT_TRUE(store.contains(cache_key(0, 2)));
  EXPECT_EQ(p->extents, (std::vector<Extent>{{0, 2 * kBlock}}));  // the two freed blocks, merged
  EXPECT_EQ(store.evictions(), 2u);
  EXPECT_EQ(store.items(), 3u);
  EXPECT_EQ(store.blocks(), 3u);
  EXPECT_EQ(store.pinned_bytes(), 2 * kBlock);  // the new item, until its bytes are written
  expect_consistent(store);
}

TEST(ItemStore, APlacementThatWouldNeedPinnedItemsFailsAndMovesNoneOfThem) {
  ItemStore store = fifo_store(4);
  for (ItemId i = 0; i < 4; ++i) ASSERT_NE(store.place(cache_key(0, i), kBlock), nullptr);
  store.unpin(cache_key(0, 3));
  EXPECT_EQ(store.place(cache_key(0, 9), 2 * kBlock), nullptr);  // one block could be freed, not two
  // make_room evicted the one unpinned item on the way: nothing pinned moved.
  for (ItemId i = 0; i < 3; ++i) EXPECT_TRUE(store.contains(cache_key(0, i)));
  EXPECT_FALSE(store.contains(cache_key(0, 9)));
  expect_consistent(store);
}

TEST(ItemStore, WithoutEvictingAnItemIsPlacedOnlyInFreeBytes) {
  ItemStore store = fifo_store(2);
  ASSERT_NE(store.place_if_free(cache_key(0, 0), kBlock), nullptr);
  store.unpin(cache_key(0, 0));
  ASSERT_NE(store.place_if_free(cache_key(0, 1), kBlock), nullptr);
  store.unpin(cache_key(0, 1));
  EXPECT_EQ(store.place_if_free(cache_key(0, 2), kBlock), nullptr);
  EXPECT_EQ(store.evictions(), 0u);
  EXPECT_EQ(store.items(), 2u);
  expect_consistent(store);
}

TEST(ItemStore, DiscardingFreesAnItemPinnedOrNotAndADatasetsUnpinnedItemsGoTogether) {
  ItemStore store = fifo_store(8);
  for (ItemId i = 0; i < 3; ++i) ASSERT_NE(store.place(cache_key(1, i), kBlock), nullptr);
  ASSERT_NE(store.place(cache_key(2, 0), kBlock), nullptr);
  store.unpin(cache_key(1, 0));
  store.unpin(cache_key(1, 1));
  store.discard(cache_key(1, 2));  // pinned: a load that failed
  EXPECT_FALSE(store.contains(cache_key(1, 2)));
  store.discard(cache_key(1, 2));  // already gone: nothing happens
  store.unpin(cache_key(2, 0));
  store.pin(cache_key(1, 1));      // a job holds this one
  store.discard_unpinned(1);
  EXPECT_FALSE(store.contains(cache_key(1, 0)));
  EXPECT_TRUE(store.contains(cache_key(1, 1)));
  EXPECT_TRUE(store.contains(cache_key(2, 0)));  // another dataset's
  EXPECT_EQ(store.items(), 2u);
  EXPECT_EQ(store.used(), 2 * kBlock);
  EXPECT_EQ(store.evictions(), 0u);  // discarded, not evicted
  expect_consistent(store);
}

// Ten one-block items, the odd ones gone: five free blocks, none adjacent. An item of five blocks
// fits in bytes but in no block: the store evicts the oldest items (blocks 0, 2 and 4, which merge
// with the free ones between them) until a block holds it whole, rather than split it.
TEST(ItemStore, AnItemGoesWholeIntoTheBlockThatAFewMoreEvictionsFree) {
  ItemStore store = fifo_store(10);
  for (ItemId i = 0; i < 10; ++i) ASSERT_NE(store.place(cache_key(0, i), kBlock), nullptr);
  for (ItemId i = 1; i < 10; i += 2) store.discard(cache_key(0, i));
  for (ItemId i = 0; i < 10; i += 2) store.unpin(cache_key(0, i));
  const Placement* p = store.place(cache_key(0, 99), 5 * kBlock);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->extents, (std::vector<Extent>{{0, 5 * kBlock}}));
  EXPECT_EQ(store.evictions(), 3u);
  EXPECT_EQ(store.split_items(), 0u);
  EXPECT_TRUE(store.contains(cache_key(0, 6)));
  expect_consistent(store);
}

// Ten items of three blocks, each followed by a pinned item of one: no two free blocks ever merge.
// An item of four blocks takes two evictions to fit in bytes; then the extra evictions, which free
// blocks of three, stop at four times its size (18 >= 16 blocks, 6 evictions), not at eight, and
// it is split in two.
TEST(ItemStore, EvictionsThatFreeNoBlockForAnItemStopAtFourTimesItsSize) {
  ItemStore store = fifo_store(40);
  for (ItemId i = 0; i < 10; ++i) {
    ASSERT_NE(store.place(cache_key(0, i), 3 * kBlock), nullptr);
    store.unpin(cache_key(0, i));
    ASSERT_NE(store.place(cache_key(1, i), kBlock), nullptr);  // stays pinned
  }
  const Placement* p = store.place(cache_key(0, 99), 4 * kBlock);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->extents.size(), 2u);
  EXPECT_EQ(store.evictions(), 2u + 6u);
  EXPECT_TRUE(store.contains(cache_key(0, 8)));
  expect_consistent(store);
}

// Forty one-block items, the odd ones gone; the evictable ones in an order that never frees two
// neighbours (blocks 0, 4, ..., 36, then 2, 6, ...). Each eviction makes a free block of at most
// three: kExtraEvictions of them free no block of 13, and the item is split in at most four
// (4 x 3 < 13 takes three evictions more, the last of which frees a block of six) — and in
// thirteen, the free blocks as they are, only when nothing can be evicted.
TEST(ItemStore, AnItemTakesAtMostFourBlocksWhileAnotherCanBeEvicted) {
  for (const bool others_pinned : {false, true}) {
    SCOPED_TRACE(others_pinned ? "every other item pinned" : "other items evictable");
    ItemStore store(40 * kBlock, make_policy("lru", {}));
    for (ItemId i = 0; i < 40; ++i) ASSERT_NE(store.place(cache_key(0, i), kBlock), nullptr);
    for (ItemId i = 1; i < 40; i += 2) store.discard(cache_key(0, i));
    if (!others_pinned) {
      for (ItemId i = 0; i < 40; i += 2) store.unpin(cache_key(0, i));
      for (ItemId first : {0, 2}) {
        for (ItemId i = first; i < 40; i += 4) store.touch(cache_key(0, i));  // the eviction order
      }
    }
    const Placement* p = store.place(cache_key(0, 99), 13 * kBlock);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->extents.size(), others_pinned ? 13u : 4u);
    EXPECT_EQ(store.evictions(), others_pinned ? 0u : ItemStore::kExtraEvictions + 3);
    EXPECT_EQ(store.split_items(), 1u);
    uint64_t bytes = 0;
    for (const Extent& e : p->extents) bytes += e.length;
    EXPECT_EQ(bytes, 13 * kBlock);
    expect_consistent(store);
  }
}

}  // namespace
}  // namespace joader
