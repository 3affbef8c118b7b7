#include "cache/cache.h"
#include "cache/next_uses.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

namespace joader {
namespace {

// Dataset 0 of the cache is `sets`: keys are item ids.
PolicyContext signatures_of(const RemainingSets& sets) {
  PolicyContext ctx;
  ctx.signature = [&sets](CacheKey k) { return sets.signature(key_item(k)); };
  return ctx;
}

std::unique_ptr<Cache> cache_with(const std::string& policy, uint64_t capacity, const PolicyContext& ctx = {}) {
  return std::make_unique<Cache>(capacity, make_policy(policy, ctx));
}

TEST(LruPolicy, EvictsTheLeastRecentlyUsedItem) {
  auto c = cache_with("lru", 3);
  c->insert(1, 1);
  c->insert(2, 1);
  c->insert(3, 1);
  c->touch(1);
  c->insert(4, 1);
  EXPECT_FALSE(c->contains(2));
  EXPECT_TRUE(c->contains(1));
  EXPECT_EQ(c->evictions(), 1u);
}

TEST(FifoPolicy, EvictsTheOldestInsertionWhateverItsUse) {
  auto c = cache_with("fifo", 3);
  c->insert(1, 1);
  c->insert(2, 1);
  c->insert(3, 1);
  c->touch(1);
  c->insert(4, 1);
  EXPECT_FALSE(c->contains(1));
  EXPECT_TRUE(c->contains(2));
}

TEST(RefCntPolicy, EvictsTheItemWithFewestFutureReferencesTiesLru) {
  RemainingSets sets(10);
  sets.add_job({1, 2, 3});
  sets.add_job({2, 3});
  // future references: 1 → 1, 2 → 2, 3 → 2, 4 → 0, 5 → 0
  Cache c(4, make_policy("refcnt", signatures_of(sets)));
  sets.set_observer(c.observer_for(0));
  for (ItemId x : {4, 2, 1, 5}) c.insert(x, 1);
  c.insert(3, 1);  // over capacity: 4 and 5 have 0 refs, 4 is older
  EXPECT_FALSE(c.contains(4));
  c.insert(6, 1);  // 6 and 5 have 0 refs; 5 is older
  EXPECT_FALSE(c.contains(5));
  c.insert(7, 1);  // 6 and 7 have 0 refs; 6 is older
  EXPECT_FALSE(c.contains(6));
  EXPECT_TRUE(c.contains(7));
  EXPECT_TRUE(c.contains(1) && c.contains(2) && c.contains(3));
}

TEST(RefCntPolicy, FollowsSignatureChanges) {
  RemainingSets sets(10);
  const JobSlot a = sets.add_job({1, 2});
  Cache c(2, make_policy("refcnt", signatures_of(sets)));
  sets.set_observer(c.observer_for(0));
  c.insert(1, 1);
  c.insert(2, 1);
  sets.remove(a, 2);  // 2 is no longer needed: it becomes the victim although it is newer
  c.insert(3, 1);     // 3 has no references either, and is newer than 2
  EXPECT_TRUE(c.contains(1));
  EXPECT_FALSE(c.contains(2));
}

TEST(Cache, PinnedItemsAreNeverEvictedAndAFullyPinnedCacheRefusesInserts) {
  auto c = cache_with("lru", 2);
  c->insert(1, 1);
  c->insert(2, 1);
  c->pin(1);
  c->pin(2);
  EXPECT_FALSE(c->insert(3, 1));
  EXPECT_FALSE(c->contains(3));
  EXPECT_EQ(c->used(), 2u);
  EXPECT_EQ(c->pinned_units(), 2u);
  c->unpin(1);
  EXPECT_TRUE(c->insert(3, 1));
  EXPECT_FALSE(c->contains(1));
  EXPECT_TRUE(c->contains(2));
}

TEST(Cache, AnItemLargerThanTheCapacityIsRefusedWithoutEvictingAnything) {
  auto c = cache_with("lru", 100);
  c->insert(1, 60);
  EXPECT_FALSE(c->insert(2, 101));
  EXPECT_TRUE(c->contains(1));
  EXPECT_TRUE(c->insert(3, 40));
  EXPECT_EQ(c->used(), 100u);
  EXPECT_TRUE(c->insert(4, 50));  // evicts 1 (LRU), not 3
  EXPECT_FALSE(c->contains(1));
  EXPECT_EQ(c->used(), 90u);
}

TEST(BeladyPolicy, EvictsTheItemUsedFarthestInTheFuture) {
  std::map<CacheKey, uint64_t> next = {{1, 10}, {2, 30}, {3, 20}, {4, 5}};
  PolicyContext ctx;
  ctx.next_use = [&next](CacheKey k) { return next.at(k); };
  Cache c(3, make_policy("belady", ctx));
  for (ItemId x : {1, 2, 3, 4}) c.insert(x, 1);
  EXPECT_FALSE(c.contains(2));
}

TEST(RatePolicy, EvictsTheItemWithTheLowestExpectedRequestRate) {
  RemainingSets sets(100);
  std::vector<ItemId> big, small;
  for (ItemId x = 0; x < 90; ++x) big.push_back(x);
  for (ItemId x = 90; x < 100; ++x) small.push_back(x);
  const JobSlot jb = sets.add_job(big);    // rate per item 1/90
  const JobSlot js = sets.add_job(small);  // rate per item 1/10: asked much sooner
  PolicyContext ctx = signatures_of(sets);
  ctx.request_rate = [&sets](uint32_t, uint64_t sig) {  // every job at speed 1
    double rate = 0;
    for (JobSlot j = 0; j < kMaxJobs; ++j) rate += (sig >> j & 1) ? 1.0 / sets.size(j) : 0.0;
    return rate;
  };
  Cache c(2, make_policy("rate", ctx));
  sets.set_observer(c.observer_for(0));
  c.insert(95, 1);
  c.insert(5, 1);
  c.insert(96, 1);  // RefCnt would tie 5 / 95 / 96 (one reference each); rate evicts 5
  EXPECT_FALSE(c.contains(5));
  EXPECT_TRUE(c.contains(95));
  (void)jb;
  (void)js;
}

TEST(NextUses, TellsTheEarliestPlannedUseAndWhenItChanges) {
  NextUses uses;
  std::vector<CacheKey> changed;
  uses.set_listener([&changed](CacheKey k) { changed.push_back(k); });
  EXPECT_EQ(uses.next_use(7), NextUses::kNever);
  uses.add(7, 50);
  uses.add(7, 20);  // a second job plans it sooner
  uses.add(7, 90);  // later than the earliest: nothing changes
  EXPECT_EQ(uses.next_use(7), 20u);
  EXPECT_EQ(changed, (std::vector<CacheKey>{7, 7}));
  uses.remove(7, 90);
  EXPECT_EQ(changed.size(), 2u);
  uses.remove(7, 20);  // the sooner use entered its job's window
  EXPECT_EQ(uses.next_use(7), 50u);
  uses.remove(7, 50);
  EXPECT_EQ(uses.next_use(7), NextUses::kNever);
  EXPECT_EQ(changed.size(), 4u);
  EXPECT_EQ(uses.planned(), 0u);
  EXPECT_THROW(uses.remove(7, 50), std::logic_error);
}

TEST(PlannedPolicy, EvictsWhatNoPlanNeedsByRefCntThenThePlannedItemNeededLast) {
  RemainingSets sets(10);
  sets.add_job({0, 1, 2, 3, 4, 5});
  sets.add_job({0, 1, 2});
  NextUses uses;
  PolicyContext ctx = signatures_of(sets);
  ctx.next_use = [&uses](CacheKey k) { return uses.next_use(k); };
  Cache c(4, make_policy("planned", ctx));
  sets.set_observer(c.observer_for(0));
  uses.set_listener([&c](CacheKey k) { c.rank_changed(k); });
  uses.add(4, 300);
  uses.add(5, 100);
  for (ItemId x : {0, 4, 5, 3}) c.insert(x, 1);  // 0: two references; 3: one; 4, 5: planned
  c.insert(6, 1);  // no plan, no reference: the victim is itself
  EXPECT_FALSE(c.contains(6));
  c.insert(1, 1);  // evicts 3, the unplanned item of fewest references, before 0
  EXPECT_FALSE(c.contains(3));
  EXPECT_TRUE(c.contains(0));
  c.insert(2, 1);  // evicts 0 (two references, but no plan), not a planned item
  EXPECT_FALSE(c.contains(0));
  uses.add(1, 200);
  uses.add(2, 50);
  c.insert(8, 1);  // needed by no one: it goes at once, before any planned item
  EXPECT_FALSE(c.contains(8));
  uses.add(9, 10);
  c.insert(9, 1);  // everything is planned: 4, needed last (300), goes
  EXPECT_FALSE(c.contains(4));
  uses.remove(5, 100);  // 5 entered its window and was consumed: no plan holds it any more
  uses.add(7, 20);
  c.insert(7, 1);
  EXPECT_FALSE(c.contains(5));
  for (ItemId x : {1, 2, 7, 9}) EXPECT_TRUE(c.contains(x)) << x;
}

TEST(RefCntPolicy, AmongItemsOfEqualCountThoseThatReloadCheaplyGoFirstButNeverBeforeAFewerCount) {
  RemainingSets sets(10);
  sets.add_job({1, 2, 3, 4});
  sets.add_job({1, 2});
  // references: 1, 2 → 2; 3, 4 → 1; 5, 6 → 0. On disk (cheap to reload): 2, 4.
  const std::set<CacheKey> on_disk = {2, 4};
  PolicyContext ctx = signatures_of(sets);
  ctx.reloads_cheaply = [&on_disk](CacheKey k) { return on_disk.count(k) != 0; };
  Cache c(4, make_policy("refcnt", ctx));
  sets.set_observer(c.observer_for(0));
  for (ItemId x : {3, 1, 4, 2}) c.insert(x, 1);
  c.insert(5, 1);  // no references: it goes itself, before any cheap item with references
  EXPECT_FALSE(c.contains(5));
  c.insert(6, 1);
  EXPECT_FALSE(c.contains(6));
  sets.add_job({7});
  c.insert(7, 1);  // one reference each for 3, 4 and 7: 4 is on disk, though 3 is older
  EXPECT_FALSE(c.contains(4));
  EXPECT_TRUE(c.contains(3));
  sets.add_job({8});
  c.insert(8, 1);  // 3 and 7 (one reference, both dear): the least recently used, 3
  EXPECT_FALSE(c.contains(3));
  EXPECT_TRUE(c.contains(1) && c.contains(2) && c.contains(7) && c.contains(8));
}

TEST(PlannedPolicy, AmongUnplannedItemsOfEqualCountAndPlannedItemsOfEqualDueTimeTheCheapGoFirst) {
  RemainingSets sets(10);
  sets.add_job({0, 1, 2, 3, 4, 5});
  NextUses uses;
  const std::set<CacheKey> on_disk = {1, 4};
  PolicyContext ctx = signatures_of(sets);
  ctx.next_use = [&uses](CacheKey k) { return uses.next_use(k); };
  ctx.reloads_cheaply = [&on_disk](CacheKey k) { return on_disk.count(k) != 0; };
  Cache c(4, make_policy("planned", ctx));
  sets.set_observer(c.observer_for(0));
  uses.set_listener([&c](CacheKey k) { c.rank_changed(k); });
  uses.add(2, 100);
  uses.add(3, 500);
  uses.add(4, 100);
  for (ItemId x : {0, 1, 2, 3}) c.insert(x, 1);  // 0, 1 unplanned, one reference each; 1 on disk
  c.insert(4, 1);  // evicts 1 (cheap), not the older 0
  EXPECT_FALSE(c.contains(1));
  c.insert(5, 1);  // evicts 0: unplanned goes before any planned item, cheap or not
  EXPECT_FALSE(c.contains(0));
  uses.add(5, 100);
  c.rank_changed(5);
  c.insert(6, 1);  // 6 has no reference: itself
  uses.add(7, 50);
  sets.add_job({7});
  c.insert(7, 1);  // planned: 3 (due 500) goes first, whatever is cheap
  EXPECT_FALSE(c.contains(3));
  uses.add(8, 10);
  sets.add_job({8});
  c.insert(8, 1);  // 2, 4, 5 are due at 100: 4, on disk, goes though 2 is older
  EXPECT_FALSE(c.contains(4));
  EXPECT_TRUE(c.contains(2) && c.contains(5) && c.contains(7) && c.contains(8));
}

TEST(Policy, UnknownNameOrMissingContextIsAClearError) {
  EXPECT_THROW(make_policy("mru", {}), std::invalid_argument);
  EXPECT_THROW(make_policy("refcnt", {}), std::invalid_argument);
  EXPECT_THROW(make_policy("belady", {}), std::invalid_argument);
  EXPECT_THROW(make_policy("planned", {}), std::invalid_argument);
}

}  // namespace
}  // namespace joader
