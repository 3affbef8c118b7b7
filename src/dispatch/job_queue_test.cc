#include "dispatch/job_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace joader {
namespace {

struct Item : QueueEntry {
  explicit Item(ItemId id) { item = id; }
};

constexpr uint32_t kDataset = 3;

CacheKey key(ItemId item) { return cache_key(kDataset, item); }

TEST(JobQueue, DecisionsEnterTheWindowWhileItHasRoomThenJoinThePlanWithTheirDueTimes) {
  NextUses uses;
  JobQueue<Item> q(kDataset, uses);
  Item* first = q.decide(Item(10), true, 100);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->state, QueueEntry::kLoading);
  EXPECT_EQ(q.decide(Item(11), false, 200), nullptr);
  EXPECT_EQ(q.window_size(), 1u);
  EXPECT_EQ(q.planned(), 1u);
  EXPECT_EQ(q[1].state, QueueEntry::kPlanned);
  EXPECT_EQ(uses.next_use(key(11)), 200u);
  EXPECT_EQ(uses.next_use(key(10)), NextUses::kNever) << "an entry in the window is not a planned use";
  q.clear();
}

TEST(JobQueue, ADecisionWithRoomJoinsThePlanWhileThePlanIsNotEmptySoThatThePlanEntersInOrder) {
  NextUses uses;
  JobQueue<Item> q(kDataset, uses);
  q.decide(Item(1), false, 100);
  EXPECT_EQ(q.decide(Item(2), true, 110), nullptr);
  EXPECT_EQ(q.planned(), 2u);
  EXPECT_EQ(q.promote().item, 1u);
  EXPECT_EQ(q.promote().item, 2u);
  EXPECT_EQ(q.planned(), 0u);
  EXPECT_EQ(uses.planned(), 0u) << "promoted entries leave NextUses";
  EXPECT_EQ(q[0].state, QueueEntry::kLoading);
  q.clear();
}

TEST(JobQueue, DemotedEntriesReturnTheirPinsAndLoadsAndArePlannedAgain) {
  NextUses uses;
  JobQueue<Item> q(kDataset, uses);
  for (ItemId x : {1, 2, 3}) q.decide(Item(x), true, 0);
  q[0].state = QueueEntry::kReady;  // the caller's hit
  q[0].pinned = true;
  q[1].state = QueueEntry::kReady;
  q[1].pinned = true;
  // q[2] is still loading
  const auto left = q.demote(1, 500);
  EXPECT_EQ(left.unpin, std::vector<CacheKey>{key(2)});
  ASSERT_EQ(left.loading.size(), 1u);
  EXPECT_EQ(left.loading[0]->item, 3u);
  EXPECT_EQ(q.window_size(), 1u);
  EXPECT_EQ(q.planned(), 2u);
  EXPECT_FALSE(q[1].pinned);
  EXPECT_EQ(uses.next_use(key(2)), 500u);
  EXPECT_EQ(uses.next_use(key(3)), 500u);
  EXPECT_TRUE(q[0].pinned) << "entries before `first` stay as they were";
  q.clear();
}

TEST(JobQueue, TakeConsumesTheOldestEntriesAndKeepsTheRest) {
  NextUses uses;
  JobQueue<Item> q(kDataset, uses);
  for (ItemId x : {1, 2, 3}) q.decide(Item(x), true, 0);
  q.decide(Item(4), false, 40);
  const std::vector<Item> taken = q.take(2);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].item, 1u);
  EXPECT_EQ(taken[1].item, 2u);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].item, 3u);
  EXPECT_EQ(q.planned(), 1u);
  q.clear();
}

TEST(JobQueue, ClearReturnsThePinsAndTakesThePlanOutOfNextUses) {
  NextUses uses;
  JobQueue<Item> q(kDataset, uses);
  q.decide(Item(1), true, 0);
  q[0].state = QueueEntry::kReady;
  q[0].pinned = true;
  q.decide(Item(2), true, 0);  // loading
  q.decide(Item(3), false, 30);
  q.decide(Item(1), false, 60);  // the same item planned again (the next epoch)
  EXPECT_EQ(uses.planned(), 2u);
  EXPECT_EQ(q.clear(), std::vector<CacheKey>{key(1)});
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.planned(), 0u);
  EXPECT_EQ(uses.planned(), 0u);
  EXPECT_EQ(uses.next_use(key(1)), NextUses::kNever);
}

}  // namespace
}  // namespace joader
