#include "dispatch/dispatcher.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

namespace joader {
namespace {

using Key = Dispatcher::JobKey;

// Jobs that join start deciding at once: most tests are about what follows a start; the
// gathering has tests of its own ("Starting together").
DispatcherOptions at_once(DispatcherOptions o = {}) {
  o.join_gather = 0;
  return o;
}

Dispatcher::JobConfig config(JobSlot slot, uint32_t batch = 16, uint32_t prefetch = 4, uint64_t item_bytes = 1,
                             uint32_t group = 0) {
  return {group, slot, batch, prefetch, item_bytes, 0, 0};
}

// The owner's item sizes, each job's queue oldest first: Dispatcher::ItemBytes over them.
using Queues = std::map<Key, std::vector<uint64_t>>;
Dispatcher::ItemBytes oldest_of(Queues& queues) {
  return [&queues](Key k, uint64_t items) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < items; ++i) sum += queues[k].at(i);
    return sum;
  };
}

// Consumers on a virtual clock: each acknowledges one batch every `period` seconds (± `jitter`,
// uniform) when its queue holds a whole batch, else it waits for one. The driver steps time by
// `dt` and forms every due round; it records each round's slots.
struct Consumer {
  Consumer(Key k, uint32_t b, double p, double j) : key(k), batch(b), period(p), jitter(j) {}
  Key key;
  uint32_t batch;
  double period, jitter;
  double next = 0;
  uint64_t consumed = 0;
};

struct Driver {
  explicit Driver(Dispatcher& dispatcher) : d(dispatcher) {}
  Dispatcher& d;
  std::vector<Consumer> consumers;
  std::map<JobSlot, Key> key_of;
  std::vector<std::vector<JobSlot>> rounds;
  std::mt19937_64 rng{7};

  void step(double t) {
    for (Consumer& c : consumers) {
      if (t >= c.next && d.queued(c.key) >= c.batch) {
        d.acknowledged(c.key, c.batch);
        c.consumed += c.batch;
        c.next = t + c.period + std::uniform_real_distribution<double>(-c.jitter, c.jitter)(rng);
      }
    }
    while (auto r = d.next_round(t)) {
      for (JobSlot s : r->slots) d.decided(key_of.at(s), 1);
      rounds.push_back(r->slots);
    }
  }
  void run(double from, double to, double dt = 1e-4) {
    for (double t = from; t < to; t += dt) step(t);
  }
  // n jobs of dataset 0 (slots and keys 0..n-1) joining at time 0, with no consumers.
  void add_jobs(JobSlot n, uint32_t batch, uint32_t prefetch, uint64_t item_bytes = 1) {
    for (JobSlot s = 0; s < n; ++s) {
      d.add_job(s, config(s, batch, prefetch, item_bytes), 0.0);
      key_of[s] = s;
    }
  }
  // n jobs of dataset 0 (slots and keys 0..n-1, batches of 16), each acknowledging a batch every
  // period ± jitter seconds.
  void add_equal_jobs(JobSlot n, double period, double jitter) {
    add_jobs(n, 16, 4);
    for (JobSlot s = 0; s < n; ++s) consumers.emplace_back(Key(s), 16, period, jitter);
  }
  // The share of the items decided in the recorded rounds that were decided in rounds of n jobs.
  double share_in_rounds_of(size_t n) const {
    size_t together = 0, items = 0;
    for (const auto& r : rounds) {
      items += r.size();
      together += r.size() == n ? n : 0;
    }
    return double(together) / double(items);
  }
};

TEST(Dispatcher, EqualSpeedJobsWithJitterLandInTheSameRounds) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_equal_jobs(3, 0.004, 0.002);
  drv.run(0.0, 0.5);  // warm-up: rates measured
  drv.rounds.clear();
  drv.run(0.5, 3.0);
  // All three jobs consume 4000 items/s with ±50 % jitter per batch, their queues mostly full:
  // still, most items are decided in rounds of all three (92 % measured; before a full queue
  // stopped banking a batch of credit, 57 %).
  ASSERT_GT(drv.rounds.size(), 1000u);
  EXPECT_GT(drv.share_in_rounds_of(3), 0.85);
  for (Key k = 0; k < 3; ++k) EXPECT_NEAR(d.rate(k), 4000, 400) << "job " << k;
}

// Three equal jobs limited by shared loads: a batch becomes ready for all three every 20 ms, and
// their acknowledgements arrive 3 and 6 ms apart (a slow daemon's round trips). Their queues sit
// at their horizons. Returns the share of items decided in rounds of all three.
double share_of_staggered_jobs(bool waiting_on_loads) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_equal_jobs(3, 0.020, 0.0);
  for (Key k = 0; k < 3; ++k) {
    drv.consumers[k].next = 0.003 * double(k);
    d.set_waiting(k, waiting_on_loads);
  }
  drv.run(0.0, 0.5);
  drv.rounds.clear();
  drv.run(0.5, 3.0);
  for (Key k = 0; k < 3; ++k) {
    EXPECT_NEAR(d.rate(k), 800, 80) << "job " << k;
    EXPECT_LE(d.queued(k), 4u * 16 + 16) << "job " << k << " overran its horizon by more than a batch";
  }
  return drv.share_in_rounds_of(3);
}

TEST(Dispatcher, JobsWaitingOnLoadsJoinEveryRoundEvenWithFullQueues) {
  // Measured: 1.0 waiting on loads; 0.70 when a full queue may not join (the first job to
  // acknowledge decides its next items alone), which is what the rule is for.
  EXPECT_GT(share_of_staggered_jobs(true), 0.99);
  EXPECT_LT(share_of_staggered_jobs(false), 0.9);
}

TEST(Dispatcher, AFullJobWaitingOnLoadsJoinsUpToABatchBeyondItsHorizonButNeverMakesARoundDue) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_jobs(2, 8, 2);
  drv.consumers.emplace_back(0, 8, 0.002, 0.0);  // job 1 never consumes: its queue is full
  drv.run(0.0, 1.0);
  ASSERT_EQ(d.queued(1), 16u);
  d.set_waiting(1, true);
  drv.run(1.0, 2.0);
  EXPECT_EQ(d.queued(1), 24u) << "it joined its peer's rounds up to one batch (8) beyond its horizon (16)";
  // Alone, it never makes a round due, however much credit it has.
  d.remove_job(0);
  for (double t = 2.0; t < 3.0; t += 0.001) EXPECT_FALSE(d.next_round(t)) << "at " << t;
  EXPECT_EQ(d.next_due(3.0), Dispatcher::kNever);
  EXPECT_EQ(d.queued(1), 24u);
}

TEST(Dispatcher, AStalledJobsShownRateFallsTowardsZeroWhileItsPacingRateIsKept) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_equal_jobs(1, 0.004, 0.0);  // 16 items every 4 ms: 4000 items/s
  drv.run(0.0, 1.0);
  ASSERT_NEAR(d.rate(0), 4000, 400);
  EXPECT_NEAR(d.shown_rate(0, 1.0), d.rate(0), 1e-9) << "a job that keeps consuming shows its rate";
  // It stops consuming at t = 1: its pace is kept (for when it comes back), what is shown falls.
  EXPECT_NEAR(d.shown_rate(0, 2.0), 16.0, 1.0);
  EXPECT_NEAR(d.shown_rate(0, 17.0), 1.0, 0.1);
  EXPECT_NEAR(d.rate(0), 4000, 400);
}

TEST(Dispatcher, AStalledJobStopsDecidingAndItsPeersGoOn) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_jobs(2, 8, 2);
  drv.consumers.emplace_back(0, 8, 0.002, 0.0);  // job 1 never consumes
  drv.run(0.0, 1.0);
  EXPECT_EQ(d.queued(1), 16u) << "the stalled job holds exactly its prefetch (2 batches of 8)";
  EXPECT_TRUE(d.full(1));
  EXPECT_GT(drv.consumers[0].consumed, 3000u);
  // Only job 0's consumption can make a round due: without it, nothing ever is.
  d.remove_job(0);
  EXPECT_FALSE(d.next_round(1.0));
  EXPECT_EQ(d.next_due(1.0), Dispatcher::kNever);
}

TEST(Dispatcher, JobsJoiningWithinAGatheringStartInTheSameRounds) {
  // Default options: a gathering of 20 ms. Four jobs join 1 ms apart, as a launcher's do.
  Dispatcher d(UINT64_MAX, 0.0);
  ASSERT_DOUBLE_EQ(DispatcherOptions{}.join_gather, 0.02);
  for (JobSlot s = 0; s < 4; ++s) d.add_job(s, config(s, 16, 4), 0.001 * s);
  for (double t = 0.003; t < 0.0195; t += 0.001) {
    EXPECT_FALSE(d.next_round(t)) << "no job decides before the gathering ends, at " << t;
    EXPECT_DOUBLE_EQ(d.next_due(t), 0.02) << "the owner is woken when it ends";
  }
  int rounds = 0;
  while (auto r = d.next_round(0.02)) {
    EXPECT_EQ(r->slots, (std::vector<JobSlot>{0, 1, 2, 3})) << "round " << rounds;
    for (Key k = 0; k < 4; ++k) d.decided(k, 1);
    ++rounds;
  }
  EXPECT_EQ(rounds, 16) << "their first batches are decided together";

  // One that joins later opens a gathering of its own.
  d.add_job(4, config(4, 16, 4), 0.5);
  EXPECT_FALSE(d.next_round(0.51));
  EXPECT_DOUBLE_EQ(d.next_due(0.51), 0.52);
  auto r = d.next_round(0.52);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::count(r->slots.begin(), r->slots.end(), 4), 1);

  // Without a gathering, the first job to join decides its first batch alone.
  Dispatcher at_once_d(UINT64_MAX, 0.0, at_once());
  at_once_d.add_job(0, config(0, 16, 4), 0.0);
  r = at_once_d.next_round(0.0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->slots, std::vector<JobSlot>{0});
}

TEST(Dispatcher, AJobJoiningRunningPeersStartsAtOnce) {
  Dispatcher d(UINT64_MAX, 0.0);  // default options: a gathering for jobs that start together
  Driver drv(d);
  drv.add_equal_jobs(2, 0.008, 0.0);
  drv.run(0.0, 1.0);
  ASSERT_GT(d.rate(0), 0.0) << "its peers run";
  d.add_job(2, config(2, 16, 4), 1.0);
  drv.key_of[2] = 2;
  auto r = d.next_round(1.001);  // the next round interval
  ASSERT_TRUE(r) << "it is short of a batch: due at once, no gathering";
  EXPECT_EQ(std::count(r->slots.begin(), r->slots.end(), 2), 1);
}

TEST(Dispatcher, AJobBelowOneBatchCatchesUpToItAtOnce) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  d.add_job(1, config(0, 8, 4), 0.0);
  int rounds = 0;
  while (auto r = d.next_round(0.0)) {
    ASSERT_EQ(r->slots, std::vector<JobSlot>{0});
    d.decided(1, 1);
    ++rounds;
  }
  EXPECT_EQ(rounds, 8) << "a job below one batch gets credit for the rest of it, with no rate yet";
  EXPECT_EQ(d.next_due(0.0), Dispatcher::kNever) << "no rate and no peer: nothing to earn until an event";
  d.acknowledged(1, 8);
  EXPECT_EQ(d.next_due(0.0), 0.0) << "below one batch again: the acknowledgement makes a round due at once";
}

TEST(Dispatcher, AJobJoiningMidwayEarnsAtItsPeersMedianRateAndALeaverFreesItsReservation) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  Driver drv(d);
  drv.add_jobs(2, 16, 4, 10);
  for (JobSlot s = 0; s < 2; ++s) drv.consumers.emplace_back(Key(s), 16, 0.008, 0.0);  // 2000 items/s each
  drv.run(0.0, 1.0);
  d.add_job(2, config(2, 16, 4, 10), 1.0);
  drv.key_of[2] = 2;
  drv.rounds.clear();
  drv.run(1.0, 1.02);  // 20 ms: the newcomer has no rate of its own yet, nor acknowledged anything
  EXPECT_EQ(d.rate(2), 0.0);
  EXPECT_GT(d.queued(2), 16u) << "beyond its catch-up batch, it earned at the median rate";
  size_t with_newcomer = 0;
  for (const auto& r : drv.rounds) with_newcomer += std::count(r.begin(), r.end(), 2);
  EXPECT_EQ(with_newcomer, d.queued(2));

  const uint64_t before = d.reserved_bytes();
  const uint64_t newcomer = (d.queued(2) + 15) / 16 * 16 * 10;
  d.remove_job(2);
  EXPECT_EQ(d.reserved_bytes(), before - newcomer);
  drv.key_of.erase(2);
  drv.rounds.clear();
  drv.run(1.02, 1.5);
  for (const auto& r : drv.rounds) EXPECT_EQ(std::count(r.begin(), r.end(), 2), 0);
  EXPECT_GT(drv.rounds.size(), 100u) << "the others go on";
}

// Decides every round due at `t`; returns how many items each job got.
std::map<Key, int> decide_all(Dispatcher& d, double t, const std::map<JobSlot, Key>& key_of) {
  std::map<Key, int> got;
  while (auto r = d.next_round(t)) {
    for (JobSlot s : r->slots) {
      d.decided(key_of.at(s), 1);
      ++got[key_of.at(s)];
    }
  }
  return got;
}

TEST(Dispatcher, JobsWithNoPaceYetFollowEveryRoundOfTheirGroup) {
  // Two jobs, neither of which has acknowledged two batches (so neither has a rate, and neither
  // earns credit). Job 0 consumes its first batch first: its catch-up round takes job 1 too,
  // whose consumer is presumably as fast (they started together), so that both queues hold the
  // same items.
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 0}, {1, 1}};
  for (JobSlot s = 0; s < 2; ++s) d.add_job(s, config(s, 16, 4), 0.0);
  EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{0, 16}, {1, 16}}));
  d.acknowledged(0, 16, 0.01);
  EXPECT_EQ(decide_all(d, 0.01, key_of), (std::map<Key, int>{{0, 16}, {1, 16}}));
  EXPECT_EQ(d.queued(1), 32u);
  EXPECT_GE(d.credit(1), 0.0) << "following owes nothing";
  // Followers stop at their horizon: job 0 alone consuming fills job 1's window, no more.
  for (int b = 0; b < 5; ++b) {
    d.acknowledged(0, 16, 0.011 + 0.001 * b);
    decide_all(d, 0.011 + 0.001 * b, key_of);
  }
  EXPECT_EQ(d.queued(1), 64u);
  EXPECT_TRUE(d.full(1));
}

TEST(Dispatcher, JobsStartingBatchesInOneRoundAreAdmittedAgainstEachOther) {
  // Batches of one 100-byte item, room for three. Two jobs hold one each and both become due at
  // once, each wanting to start another: only one may. Checking each against the reservations of
  // the start of the round let both start, over-committing the arena (the stall of issue 10).
  Dispatcher d(300, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 1, 4, 100), 0.0);
  d.add_job(2, config(1, 1, 4, 100), 0.0);
  for (int i = 0; i < 2; ++i) {  // two batches each acknowledged at t = 0 (their first rates at 0.05)
    EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{1, 1}, {2, 1}}));
    d.acknowledged(1, 1);
    d.acknowledged(2, 1);
  }
  EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{1, 1}, {2, 1}})) << "catch-up";
  EXPECT_EQ(d.reserved_bytes(), 200u);
  const auto got = decide_all(d, 0.05, key_of);  // both have a whole item of credit now
  EXPECT_EQ(got.size(), 1u) << "only one job may start the last free batch";
  EXPECT_EQ(d.reserved_bytes(), 300u);
}

TEST(Dispatcher, AJobWaitingForRoomWaitsForAnEventAndThenGetsTheRoom) {
  Dispatcher d(400, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 4, 3, 100), 0.0);
  EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{1, 4}}));
  d.add_job(2, config(1, 4, 3, 100), 0.0);
  EXPECT_TRUE(decide_all(d, 0.0, key_of).empty()) << "the arena is reserved by job 1's batch";
  EXPECT_EQ(d.next_due(0.0), 1.0) << "waiting for room is waiting for an event, or for the holder to be idle";
  d.remove_job(1);  // it leaves: its batch is free
  EXPECT_EQ(d.next_due(0.0), 0.0);
  EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{2, 4}}));
  EXPECT_EQ(d.reserved_bytes(), 400u);
}

TEST(Dispatcher, ABatchReservesItsBoundUntilDecidedThenItsItemsOwnSizesSoOneHugeItemCostsOnlyItself) {
  // Items of 10 bytes and one of 1000, batches of 4, windows of 3 batches: a batch not yet decided
  // may take 1030 bytes (its four largest items), a decided one what its items take. The owner's
  // queues: job 1's first item is the huge one.
  Dispatcher d(2300, 0.0, at_once());
  Queues queues;
  d.set_item_bytes(oldest_of(queues));
  for (Key k : {1, 2}) {
    Dispatcher::JobConfig c = config(JobSlot(k - 1), 4, 3, 10);
    c.batch_bound = 1030;
    d.add_job(k, c, 0.0);
  }
  auto decide = [&](Key k, uint64_t size) {
    queues[k].push_back(size);
    d.decided(k, 1);
  };
  decide(1, 1000);
  EXPECT_EQ(d.reserved_bytes(), 1030u) << "a batch partly decided reserves its bound";
  for (int i = 0; i < 3; ++i) decide(1, 10);
  EXPECT_EQ(d.reserved_bytes(), 1030u) << "decided: its own sizes, here the bound's";
  for (int i = 0; i < 4; ++i) decide(2, 10);
  EXPECT_EQ(d.reserved_bytes(), 1030u + 40u);
  for (int i = 0; i < 8; ++i) decide(2, 10);
  EXPECT_EQ(d.reserved_bytes(), 1030u + 120u) << "three small batches: 120 bytes, not three bounds";
  queues[1].erase(queues[1].begin(), queues[1].begin() + 4);
  d.acknowledged(1, 4);  // job 1 consumed its batch
  EXPECT_EQ(d.reserved_bytes(), 120u);
  d.remove_job(2);  // a leaver frees what it reserved
  EXPECT_EQ(d.reserved_bytes(), 0u);
}

TEST(Dispatcher, PlanItemsLargerThanTheRoomLeftShrinkTheWindowThatAnAcknowledgementBringsThemInto) {
  // Job 1's window is 2 batches of 2; its plan (beyond the window) holds two items of 500 bytes.
  Dispatcher d(1000, 0.0, at_once());
  Queues queues = {{1, {10, 10, 10, 10, 500, 500}}, {2, {200, 200}}};
  d.set_item_bytes(oldest_of(queues));
  Dispatcher::JobConfig c = config(0, 2, 2, 10);
  c.batch_bound = 600;
  d.add_job(1, c, 0.0);
  d.decided(1, 6);
  EXPECT_EQ(d.reserved_bytes(), 40u);
  d.add_job(2, config(1, 2, 1, 200), 0.0);
  d.decided(2, 2);
  EXPECT_EQ(d.reserved_bytes(), 440u);
  queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
  d.acknowledged(1, 2);  // the first plan batch (1000 bytes) would enter the window: no room
  EXPECT_EQ(d.window(1), 2u) << "shrunk to one batch";
  EXPECT_EQ(d.take_window_changes(), std::vector<Key>{1});
  EXPECT_EQ(d.reserved_bytes(), 420u);
  EXPECT_LE(d.reserved_bytes(), d.capacity());
}

// In a dispatcher of 1000 bytes over `queues`: job 1 (batches of 2, a window of 2) acknowledges
// its two batches of 10-byte items at 0.1 and 0.2, which brings its plan batches of 980 bytes into
// its window beside job 2's 400 (decided, not delivered).
void block_job_by_its_plan_items(Dispatcher& d, Queues& queues) {
  queues = {{1, {10, 10, 10, 10, 490, 490, 490, 490}}, {2, {200, 200}}};
  d.set_item_bytes(oldest_of(queues));
  Dispatcher::JobConfig c = config(0, 2, 2, 10);
  c.batch_bound = 980;
  d.add_job(1, c, 0.0);
  d.decided(1, 8);
  d.add_job(2, config(1, 2, 1, 200), 0.0);
  d.decided(2, 2);
  for (double t : {0.1, 0.2}) {
    queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
    d.acknowledged(1, 2, t);
  }
}

TEST(Dispatcher, AJobWhosePlanItemsFindNoRoomWaitsBlockedAndGrowsOnceRoomIsFreed) {
  Dispatcher d(1000, 0.0, at_once());
  Queues queues;
  block_job_by_its_plan_items(d, queues);
  EXPECT_EQ(d.window(1), 0u) << "not even one batch of 980 bytes fits beside job 2's 400";
  EXPECT_EQ(d.reserved_bytes(), 400u);
  EXPECT_FALSE(d.next_round(0.3)) << "blocked: it waits for room, and no job starts a batch before it";
  EXPECT_EQ(d.window(1), 0u);
  d.next_round(5.0);
  EXPECT_EQ(d.window(1), 0u) << "still blocked 5 s later: its consumer waits, it does not pass for idle";
  EXPECT_TRUE(d.starving().empty());
  queues[2].clear();
  d.acknowledged(2, 2, 5.0);  // job 2 consumed: room
  d.next_round(5.0);
  EXPECT_EQ(d.window(1), 2u) << "grown by the batch that fits";
  EXPECT_EQ(d.reserved_bytes(), 980u);
  EXPECT_TRUE(d.starving().empty());
}

TEST(Dispatcher, ABlockedJobThatNoRoomReachesIsReportedAsStarving) {
  Dispatcher d(1000, 0.0, at_once());
  Queues queues = {{1, {10, 10, 490, 490}}, {2, {200, 200}}};
  d.set_item_bytes(oldest_of(queues));
  Dispatcher::JobConfig c = config(0, 2, 1, 10);
  c.batch_bound = 980;
  d.add_job(1, c, 0.0);
  d.decided(1, 4);
  d.add_job(2, config(1, 2, 1, 200), 0.0);
  d.decided(2, 2);
  d.delivered(2, 2);  // job 2's consumer holds its batch and never comes back
  queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
  d.acknowledged(1, 2, 0.1);
  ASSERT_EQ(d.window(1), 0u);
  d.next_round(0.1);  // the owner forms rounds after each acknowledgement
  d.next_round(9.0);
  EXPECT_TRUE(d.starving().empty());
  d.next_round(10.2);
  EXPECT_EQ(d.starving(), std::vector<Key>{1}) << "10 s blocked while nobody consumes: its owner says why";
}

// Found on paper by a review, then here: a job whose window an acknowledgement shrank to nothing
// while its consumer held all it had decided was not flagged blocked, and only the grow-back of
// jobs that acknowledged within idle_after could give its window back. Its consumer, with nothing
// to consume, acknowledges nothing: once the room came more than idle_after later, the job waited
// for good, neither served nor reported. Without a plan the job decides nothing beyond its empty
// window and, short of a batch, starves as any job does: that case was served before the fix too,
// and is here so that it stays served.
TEST(Dispatcher, AJobShrunkToNothingWhileItsConsumerHeldAllItDecidedIsServedOnceRoomComesHoweverLate) {
  for (const bool plan : {true, false}) {
    SCOPED_TRACE(plan ? "with a plan" : "without a plan");
    DispatcherOptions o = at_once();
    if (plan) o.fixed_horizon = 0.05;
    Dispatcher d(1000, 0.0, o);
    const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
    Queues queues = {{1, std::vector<uint64_t>(400, 100)}, {2, {100, 100, 450, 450}}};
    queues[2].resize(400, 100);  // what job 2 decides later: 100 bytes each
    d.set_item_bytes(oldest_of(queues));
    d.add_job(2, config(1, 2, 1, 100), 0.0);
    d.decided(2, 4);
    d.add_job(1, config(0, 2, 2, 100), 0.0);
    // Job 1's consumer takes what its window holds and consumes a batch every 10 ms.
    uint64_t held = 0;
    const auto consume = [&](double t) {
      queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
      d.acknowledged(1, 2, t);
      held -= 2;
    };
    const auto take = [&] {
      const uint64_t ready = std::min(d.queued(1), d.window(1));
      if (ready > held) d.delivered(1, ready - held), held = ready;
    };
    double t = 0;
    for (; t < 0.2; t += 0.01) {
      decide_all(d, t, key_of);
      take();
      if (held >= 2) consume(t);
    }
    decide_all(d, t, key_of);
    take();
    ASSERT_EQ(held, 4u) << "its consumer holds its whole window";
    ASSERT_EQ(d.queued(1), 4u);
    d.set_shrinkable(2, false);  // job 2 keeps its window: skipped entries pending
    queues[2].erase(queues[2].begin(), queues[2].begin() + 2);
    d.acknowledged(2, 2, t);  // its plan batch of 900 bytes enters its window: an excess
    ASSERT_GT(d.reserved_bytes(), d.capacity());
    consume(t);
    EXPECT_EQ(d.window(1), 0u) << "shrunk as far as it goes, with all it decided at its consumer";
    for (const double end = t + 0.05; t < end; t += 0.01) decide_all(d, t, key_of);
    consume(t);  // its consumer has consumed all it had, and now waits
    for (const double end = t + 2.0; t < end; t += 0.1) decide_all(d, t, key_of);
    if (plan) {
      EXPECT_GT(d.queued(1), 0u) << "it decided plan items beyond its empty window";
      EXPECT_EQ(d.window(1), 0u) << "no room yet";
    } else {
      EXPECT_EQ(d.queued(1), 0u) << "no room yet: it decides nothing";
    }
    queues[2].erase(queues[2].begin(), queues[2].begin() + 2);
    d.acknowledged(2, 2, t);
    d.set_shrinkable(2, true);  // job 2's skipped entries were passed over: the excess is gone
    ASSERT_LE(d.reserved_bytes(), d.capacity());
    decide_all(d, t, key_of);
    EXPECT_GE(d.window(1), 2u) << "2 s after its consumer's last acknowledgement, a batch of room for it";
    take();
    EXPECT_EQ(held, 2u);
    consume(t + 0.01);
    decide_all(d, t + 0.01, key_of);
    EXPECT_EQ(d.window(1), 4u) << "consuming again, its window grows back";
    EXPECT_TRUE(d.starving().empty());
  }
}

// The same shrink, while the job's consumer still holds a batch of all it decided: the job waits
// for nothing (a long step, or its sampler has finished), so it is never reported for want of
// room, however long nobody consumes.
TEST(Dispatcher, AJobShrunkToNothingWhoseConsumerIsBusyWithAllItDecidedIsNotReportedAsStarving) {
  for (const bool finished : {false, true}) {
    SCOPED_TRACE(finished ? "its sampler has finished" : "its consumer is in a long step");
    Dispatcher d(1000, 0.0, at_once());
    Queues queues = {{1, {100, 100, 100, 100}}, {2, {100, 100, 450, 450}}};
    d.set_item_bytes(oldest_of(queues));
    d.add_job(1, config(0, 2, 2, 100), 0.0);
    d.decided(1, 4);
    d.delivered(1, 4);
    if (finished) d.stop_job(1);
    d.add_job(2, config(1, 2, 1, 100), 0.0);
    d.decided(2, 4);
    d.set_shrinkable(2, false);
    queues[2].erase(queues[2].begin(), queues[2].begin() + 2);
    d.acknowledged(2, 2, 0.1);
    queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
    d.acknowledged(1, 2, 0.1);
    ASSERT_EQ(d.window(1), 0u);
    d.next_round(0.1);
    d.next_round(11.0);
    EXPECT_TRUE(d.starving().empty());
  }
}

// A blocked job that fails (reported for want of room, or a load error) waits for nothing: its
// decided items will never be delivered. Counted as starving, it kept shrinking idle jobs' windows
// and holding every job to one batch until its client closed it, and was reported again.
// In a dispatcher of 1000 bytes over `queues`: job 1 (batches of 2, a window of 1) blocked at 0.1,
// its next batch of 980 bytes not fitting beside job 2's 200; job 2 (batches of 1, a window of 2)
// with one batch at its consumer and one ready.
void block_job_beside_a_window_of_two(Dispatcher& d, Queues& queues) {
  queues = {{1, {10, 10, 490, 490}}, {2, {100, 100}}};
  d.set_item_bytes(oldest_of(queues));
  Dispatcher::JobConfig c = config(0, 2, 1, 10);
  c.batch_bound = 980;
  d.add_job(1, c, 0.0);
  d.decided(1, 4);
  d.add_job(2, config(1, 1, 2, 100), 0.0);
  d.decided(2, 2);
  d.delivered(2, 1);
  queues[1].erase(queues[1].begin(), queues[1].begin() + 2);
  d.acknowledged(1, 2, 0.1);
}

TEST(Dispatcher, AFailedJobTakesNoRoomFromOthersAndIsNotReportedAsStarving) {
  for (const bool failed : {false, true}) {
    SCOPED_TRACE(failed ? "the blocked job failed" : "the blocked job runs");
    Dispatcher d(1000, 0.0, at_once());
    Queues queues;
    block_job_beside_a_window_of_two(d, queues);  // job 2 idle from here on
    ASSERT_EQ(d.window(1), 0u) << "980 bytes do not fit beside job 2's 200: blocked";
    if (failed) d.fail_job(1);
    d.next_round(0.1);
    d.next_round(1.5);
    d.take_window_changes();
    EXPECT_EQ(d.window(2), failed ? 2u : 1u) << "job 2, idle for 1.5 s, gives up its ready batch only for a live job";
    d.next_round(11.0);
    EXPECT_EQ(d.starving(), failed ? std::vector<Key>{} : std::vector<Key>{1});
  }
}

// Nor does its window grow back when room comes, though it acknowledged within idle_after: its
// items would be reserved for nobody.
TEST(Dispatcher, AFailedJobsShrunkWindowDoesNotGrowBackWhenRoomComes) {
  Dispatcher d(1000, 0.0, at_once());
  Queues queues;
  block_job_by_its_plan_items(d, queues);
  ASSERT_EQ(d.window(1), 0u);
  d.fail_job(1);
  queues[2].clear();
  d.acknowledged(2, 2, 0.3);  // room for job 1's batch of 980 bytes
  d.next_round(0.3);
  EXPECT_EQ(d.window(1), 0u);
  EXPECT_EQ(d.reserved_bytes(), 0u);
}

// A job that starves while the only window it could take is one it may not shrink (a finished
// job's) waits for an event or for the moment it is reported, not for that window's idleness:
// counted as reclaimable, the window made a round due at every pass, a wake-up every 100 µs.
TEST(Dispatcher, AStarvingJobBesideAWindowItMayNotShrinkSleepsUntilItIsReported) {
  Dispatcher d(1000, 0.0, at_once());
  Queues queues;
  block_job_beside_a_window_of_two(d, queues);
  d.stop_job(2);  // its sampler finished: its window stays for its consumer
  ASSERT_EQ(d.window(1), 0u);
  d.next_round(0.1);
  EXPECT_FALSE(d.next_round(1.5));
  EXPECT_EQ(d.window(2), 2u);
  EXPECT_DOUBLE_EQ(d.next_due(1.5), 10.1) << "when it is reported";
}

TEST(Dispatcher, AnIdleJobsWindowShrinksToWhatItsConsumerHoldsForAStarvingJobAndGrowsBackWhenItConsumes) {
  // Room for two batches of 4 items of 100 bytes. Job 1 (a notebook's open loader) holds both:
  // one delivered to its consumer, one ready behind it; then it goes quiet.
  Dispatcher d(800, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 4, 2, 100), 0.0);
  d.decided(1, 8);
  d.delivered(1, 4);
  EXPECT_EQ(d.reserved_bytes(), 800u);
  d.add_job(2, config(1, 4, 2, 100), 0.5);
  EXPECT_TRUE(decide_all(d, 0.5, key_of).empty()) << "no room while job 1 is not idle";
  EXPECT_EQ(d.next_due(0.5), 1.0) << "due when job 1 has been idle for idle_after";
  EXPECT_EQ(decide_all(d, 1.0, key_of), (std::map<Key, int>{{2, 4}}));
  EXPECT_EQ(d.window(1), 4u) << "shrunk to the batch its consumer holds";
  EXPECT_EQ(d.take_window_changes(), std::vector<Key>{1}) << "the owner unpins its second batch";
  EXPECT_EQ(d.queued(1), 8u) << "still decided";
  EXPECT_EQ(d.reserved_bytes(), 800u);
  EXPECT_TRUE(d.starving().empty());
  decide_all(d, 1.2, key_of);
  d.acknowledged(1, 4);  // its consumer is back
  d.acknowledged(2, 4);
  decide_all(d, 1.3, key_of);
  EXPECT_EQ(d.window(1), 8u) << "grown back as room allowed";
  EXPECT_EQ(d.take_window_changes(), std::vector<Key>{1});
}

TEST(Dispatcher, ARunningJobWhoseWindowCannotFillTakesTheRoomOfAnIdleWindow) {
  // Room for three batches of 4 items of 100 bytes. Job 1 (a val loader between two val passes)
  // holds two decided batches and consumes nothing; job 2 (the training loader) runs with one.
  Dispatcher d(1200, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 4, 2, 100), 0.0);
  d.decided(1, 8);
  d.add_job(2, config(1, 4, 2, 100), 0.0);
  EXPECT_EQ(decide_all(d, 0.0, key_of), (std::map<Key, int>{{2, 4}})) << "its first batch";
  d.acknowledged(2, 4, 0.5);
  decide_all(d, 0.5, key_of);
  EXPECT_EQ(d.window(1), 8u) << "job 1 is not idle yet";
  d.acknowledged(2, 4, 1.2);
  decide_all(d, 1.2, key_of);
  EXPECT_EQ(d.window(1), 4u) << "idle for 1 s: shrunk to the batch it may hold";
  EXPECT_EQ(d.take_window_changes(), std::vector<Key>{1});
  EXPECT_EQ(d.queued(1), 8u) << "its items stay decided";
  EXPECT_TRUE(d.starving().empty());
}

// Found by the daemon's invariant check under TSan (reservations 72 MB in a 48 MB arena): a
// window that grew back left its job's horizon at the shrunk size, and a job that is full and
// waits on loads joins rounds without reserving ("Supply"): it started a batch of its window
// that did not fit.
TEST(Dispatcher, AWindowGrownBackReservesEveryBatchItStartsEvenForAJobWaitingOnLoads) {
  Dispatcher d(850, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 4, 2, 100), 0.0);
  d.decided(1, 8);
  d.delivered(1, 4);
  d.add_job(2, config(1, 1, 2, 100), 0.5);
  EXPECT_EQ(decide_all(d, 1.0, key_of), (std::map<Key, int>{{2, 1}})) << "job 1's window shrank for it";
  ASSERT_EQ(d.window(1), 4u);
  decide_all(d, 1.1, key_of);
  d.acknowledged(1, 4, 1.2);  // job 1's consumer is back; its next batch waits on loads
  d.set_waiting(1, true);
  d.acknowledged(2, 1, 1.2);
  decide_all(d, 1.3, key_of);  // job 2 catches up; job 1 follows its round
  EXPECT_EQ(d.window(1), 8u) << "grown back";
  EXPECT_LE(d.reserved_bytes(), d.capacity());
  EXPECT_LE(d.queued(1), 4u) << "a second batch of 400 bytes does not fit beside job 2's";
  for (double t = 1.4; t < 3.0; t += 0.1) {
    decide_all(d, t, key_of);
    ASSERT_LE(d.reserved_bytes(), d.capacity()) << "at " << t;
  }
}

TEST(Dispatcher, AStarvingJobGetsTheRoomConsumersFreeFirstAndIsReportedOnlyIfNoneComes) {
  Dispatcher d(800, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}, {1, 2}};
  d.add_job(1, config(0, 4, 2, 100), 0.0);
  d.decided(1, 8);
  d.delivered(1, 8);  // both batches are with its consumer: nothing to reclaim
  d.add_job(2, config(1, 4, 2, 100), 0.0);
  EXPECT_TRUE(decide_all(d, 0.0, key_of).empty());
  EXPECT_EQ(d.next_due(0.0), 10.0) << "when it is to be reported";
  decide_all(d, 6.0, key_of);
  d.acknowledged(1, 4);  // job 1 consumes at 6 s: the room it frees goes to job 2, not back to job 1
  EXPECT_EQ(decide_all(d, 6.0, key_of), (std::map<Key, int>{{2, 4}}));
  EXPECT_TRUE(d.starving().empty());

  Dispatcher quiet(800, 0.0);
  quiet.add_job(1, config(0, 4, 2, 100), 0.0);
  quiet.decided(1, 8);
  quiet.delivered(1, 8);
  quiet.add_job(2, config(1, 4, 2, 100), 0.0);
  decide_all(quiet, 0.0, key_of);  // job 2 starts starving
  decide_all(quiet, 9.9, key_of);
  EXPECT_TRUE(quiet.starving().empty());
  decide_all(quiet, 10.0, key_of);
  EXPECT_EQ(quiet.starving(), std::vector<Key>{2}) << "10 s without room and without any consumption";
}

TEST(Dispatcher, NextDueIsWhenAJobWillHaveAWholeItemOfCredit) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  const std::map<JobSlot, Key> key_of = {{0, 1}};
  EXPECT_EQ(d.next_due(0.0), Dispatcher::kNever) << "no job: sleep until one joins";
  d.add_job(1, config(0, 10, 2), 0.0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(decide_all(d, 0.0, key_of).at(1), 10);
    d.acknowledged(1, 10);
  }
  // 20 items acknowledged over 0.05 s: 400 items/s, so 10 items of credit (one batch, the cap),
  // on top of the catch-up batch that costs none: the queue is full.
  EXPECT_EQ(decide_all(d, 0.05, key_of).at(1), 20);
  ASSERT_NEAR(d.rate(1), 400, 1e-9);
  d.acknowledged(1, 10);  // one batch left: neither short of one nor full, it waits for its credit
  const double due = d.next_due(0.05);
  EXPECT_NEAR(due, 0.05 + 1.0 / 400, 1e-9);
  EXPECT_FALSE(d.next_round(due - 1e-6)) << "not due a moment before";
  EXPECT_TRUE(d.next_round(due + 1e-9)) << "due at the time it said";
}

TEST(Dispatcher, StoppedJobsTakeNothingAndGroupsAreApart) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  d.add_job(1, config(0, 2, 1, 1, /*group=*/0), 0.0);
  d.add_job(2, config(0, 2, 1, 1, /*group=*/1), 0.0);
  d.stop_job(1);
  std::set<uint32_t> groups;
  while (auto r = d.next_round(0.0)) {
    groups.insert(r->group);
    EXPECT_EQ(r->slots, std::vector<JobSlot>{0});
    d.decided(2, 1);
  }
  EXPECT_EQ(groups, std::set<uint32_t>{1});
  EXPECT_EQ(d.queued(1), 0u);
  EXPECT_EQ(d.queued(2), 2u);
}

// Plans. Two jobs consuming 2000 and 1000 items/s in batches of 8, under a fixed horizon of 0.5 s.
DispatcherOptions plans(double horizon) {
  DispatcherOptions o;
  o.fixed_horizon = horizon;
  return o;
}

TEST(Dispatcher, JobsPlanTheSameTimeAheadWhateverTheirSpeedAndPlansReserveNoMemory) {
  Dispatcher d(UINT64_MAX, 0.0, at_once(plans(0.5)));
  Driver drv(d);
  drv.add_jobs(2, 8, 2, 100);
  drv.consumers.emplace_back(0, 8, 0.004, 0.0);
  drv.consumers.emplace_back(1, 8, 0.008, 0.0);
  drv.run(0.0, 2.0);
  EXPECT_NEAR(d.queued(0), 1000, 60) << "0.5 s at 2000 items/s";
  EXPECT_NEAR(d.queued(1), 500, 30) << "0.5 s at 1000 items/s";
  EXPECT_EQ(d.window(0), 16u);
  EXPECT_EQ(d.reserved_bytes(), 2u * 16 * 100) << "only the windows hold reservations";
}

// Three equal jobs (1333 items/s, ±1/3 per batch of 16) under a 0.1 s plan: the mean difference
// between the longest and the shortest queue over 2 s, and the share of items decided in rounds
// of all three.
std::pair<double, double> plan_spread(double settle) {
  DispatcherOptions o = plans(0.1);
  o.plan_settle = settle;
  Dispatcher d(UINT64_MAX, 0.0, at_once(o));
  Driver drv(d);
  drv.add_equal_jobs(3, 0.012, 0.004);
  drv.run(0.0, 1.0);
  drv.rounds.clear();
  double spread = 0;
  int samples = 0;
  for (double t = 1.0; t < 3.0; t += 1e-4, ++samples) {
    drv.step(t);
    const auto [lo, hi] = std::minmax({d.queued(0), d.queued(1), d.queued(2)});
    spread += double(hi - lo);
  }
  return {spread / samples, drv.share_in_rounds_of(3)};
}

TEST(Dispatcher, PlansOfEqualJitteredJobsArePulledToTheirHorizonAndTheJobsStillShareRounds) {
  // Credit at a job's pace keeps its queue where it is: with plans, the queues wander in the band
  // between the catch-up floor and the horizon (a window wide), and so do the times at which the
  // jobs consume what they decided together. Measured: mean spread 20.4 items unpulled, 13.5
  // with the default pull; 95 % and 92 % of the items decided in rounds of all three.
  const auto [pulled, pulled_together] = plan_spread(DispatcherOptions{}.plan_settle);
  const auto [loose, loose_together] = plan_spread(1e9);
  EXPECT_LT(pulled, 0.75 * loose) << pulled << " vs " << loose;
  EXPECT_GT(pulled_together, 0.85);
  EXPECT_GT(loose_together, 0.85);
}

// Three equal jobs whose acknowledgements come in bursts (a batch of 16 every 0 to 48 ms, as when
// they wait for loads), under 0.5 s plans: the share of the items decided in 4 s that were decided
// in rounds of all three.
double share_decided_together(const DispatcherOptions& o) {
  Dispatcher d(UINT64_MAX, 0.0, at_once(o));
  Driver drv(d);
  drv.add_equal_jobs(3, 0.024, 0.024);
  drv.run(0.0, 1.0);
  drv.rounds.clear();
  drv.run(1.0, 5.0);
  return drv.share_in_rounds_of(3);
}

TEST(Dispatcher, NoisyRateEstimatesDoNotMoveThePlansApart) {
  // Each job's 0.2 s rate samples swing with its bursts. A horizon that followed them would move
  // on its own, and a job whose horizon moves decides the difference alone (the others are at
  // theirs). The horizon follows a slow estimate, outside a 25 % band; with it following the
  // credit's estimate instead (the behaviour before), fewer items are decided together.
  // Measured (deterministic: the driver's generator is seeded): 0.589 against 0.513.
  DispatcherOptions steady = plans(0.5);
  DispatcherOptions following = plans(0.5);
  following.plan_smoothing = following.smoothing;
  following.plan_hysteresis = 0;
  const double kept = share_decided_together(steady), moved = share_decided_together(following);
  EXPECT_GT(kept, moved + 0.04) << kept << " vs " << moved;
  EXPECT_GT(kept, 0.55);
}

// Three jobs started together and waiting on loads, each consuming a batch of 16 every 8 ms (2000
// items/s), under 0.5 s plans; job 0's consumer takes its first five batches in a burst, one every
// 4 ms, then pauses for as long (loads finish in bursts, and a busy machine schedules consumers
// late). Returns the items decided in rounds of one job in 2 s.
uint64_t items_decided_alone_after_a_burst_at_start(const DispatcherOptions& o) {
  Dispatcher d(UINT64_MAX, 0.0, at_once(o));
  Driver drv(d);
  drv.add_equal_jobs(3, 0.008, 0.0);
  for (Key k = 0; k < 3; ++k) d.set_waiting(k, true);
  drv.consumers[0].period = 0.004;
  drv.run(0.0, 0.017);
  drv.consumers[0].period = 0.008;
  drv.consumers[0].next = 0.040;
  drv.run(0.017, 2.0);
  uint64_t alone = 0;
  for (const auto& r : drv.rounds) alone += r.size() == 1 ? 1 : 0;
  for (Key k = 0; k < 3; ++k) EXPECT_NEAR(d.queued(k), 1000, 80) << "job " << k << ": 0.5 s at 2000 items/s";
  return alone;
}

TEST(Dispatcher, AJobsFirstBurstDoesNotGiveItAPlanOfItsOwn) {
  // A first rate sample covers a few batches (20 ms here): job 0's is 1.7 times its peers'. A
  // plan set from it at once was that much longer than theirs, and job 0 filled the difference
  // alone: items its peers then met at random points of their epochs (the daemon's three jobs
  // faster than its loaders, beside a compile: L/D up to 0.39 where 0.333 is full sharing).
  // Plans now begin once a rate rests on plan_batches (8) batches, each sample weighted by the
  // time it covers. Measured (deterministic): 0 items alone; 802 with plans from the first sample.
  DispatcherOptions first_sample = plans(0.5);
  first_sample.plan_batches = 0;
  const uint64_t now = items_decided_alone_after_a_burst_at_start(plans(0.5));
  const uint64_t before = items_decided_alone_after_a_burst_at_start(first_sample);
  EXPECT_LT(now, 50u);
  EXPECT_GT(before, 200u);
}

TEST(Dispatcher, ALongFirstStepOfEveryJobDoesNotShortenTheirPlans) {
  // Two jobs whose training loops take their first two batches, then spend 5 s in their first
  // step (CUDA start-up, cudnn's autotuning), then consume 2000 items/s. As in the daemon, the
  // dispatcher runs only when a round is due or a job acknowledges: with both queues full, the
  // pause is one rate sample of 5 s. Weighted by its whole length it made the plan rate 716/s
  // and the queues 340 items; weighted as one sample (measured, deterministic): 1841/s, 905.
  Dispatcher d(UINT64_MAX, 0.0, at_once(plans(0.5)));
  Driver drv(d);
  drv.add_equal_jobs(2, 0.008, 0.0);
  double due = 0;
  for (double t = 0; t < 8.0; t += 1e-4) {
    bool acked = false;
    for (Consumer& c : drv.consumers) {
      if (t >= c.next && d.queued(c.key) >= c.batch) {
        d.acknowledged(c.key, c.batch);
        c.next = t + (++c.consumed == 2 ? 5.0 : c.period);
        acked = true;
      }
    }
    if (!acked && t < due) continue;
    while (auto r = d.next_round(t)) {
      for (JobSlot s : r->slots) d.decided(drv.key_of.at(s), 1);
    }
    due = d.next_due(t);
  }
  for (Key k = 0; k < 2; ++k) {
    EXPECT_GT(d.plan_rate(k), 1600) << "job " << k;
    EXPECT_GT(d.queued(k), 800u) << "job " << k << ": a plan of about 0.5 s at 2000 items/s";
  }
}

TEST(Dispatcher, AJobAloneOnItsDatasetPlansNothingAndAJoinerFillsItsPlanAtOnce) {
  Dispatcher d(UINT64_MAX, 0.0, at_once(plans(0.5)));
  Driver drv(d);
  d.add_job(0, config(0, 8, 2), 0.0);
  drv.key_of[0] = 0;
  drv.consumers.emplace_back(0, 8, 0.004, 0.0);
  drv.run(0.0, 1.0);
  EXPECT_LE(d.queued(0), 16u) << "alone: its window only";
  d.add_job(1, config(1, 8, 2), 1.01);
  drv.key_of[1] = 1;
  const std::map<Key, int> got = decide_all(d, 1.01, drv.key_of);
  // The joiner earns at its peer's pace (2000 items/s): its 0.5 s plan, less a window, at once
  // and without credit, in rounds of its own (its peer's queue is far from its new horizon, so
  // the peer decides in step with the joiner's plan, not with its position).
  EXPECT_GE(got.at(1), 950 - 16) << "0.5 s at its peer's measured pace, about 2000 items/s";
  EXPECT_LE(d.queued(1), 1000u);
  drv.consumers.emplace_back(1, 8, 0.004, 0.0);
  drv.run(1.01, 2.0);
  EXPECT_NEAR(d.queued(0), 1000, 60);
  EXPECT_NEAR(d.queued(1), 1000, 60);
}

TEST(Dispatcher, PlansGrowingTogetherDecideInTheOrderOfTheTimeTheyReachNotOfTheirPositions) {
  // Jobs 0 and 1 (2000 and 1000 items/s) share dataset 0; job 2 (4000 items/s) reads another.
  // Plans span one cache-full of 700 items (748 less the windows' 3 × 16): 0.1 s of the three
  // jobs' accesses. When job 2 leaves, the horizon grows to (748 − 32) / 3000 = 0.239 s and both
  // plans of dataset 0 fill at once: job 0 must
  // take two items for each of job 1's, so that what they decide in a shared round is consumed
  // at about the same moment.
  DispatcherOptions o;
  o.plan_span = 1;
  o.plan_cache = 748;
  Dispatcher d(UINT64_MAX, 0.0, at_once(o));
  Driver drv(d);
  d.add_job(0, config(0, 8, 2), 0.0);
  d.add_job(1, config(1, 8, 2), 0.0);
  d.add_job(2, config(0, 8, 2, 1, /*group=*/1), 0.0);
  drv.key_of = {{0, 0}, {1, 1}};
  std::map<JobSlot, Key> other = {{0, 2}};
  drv.consumers.emplace_back(0, 8, 0.004, 0.0);
  drv.consumers.emplace_back(1, 8, 0.008, 0.0);
  drv.consumers.emplace_back(2, 8, 0.002, 0.0);
  for (double t = 0; t < 2.0; t += 1e-4) {
    for (Consumer& c : drv.consumers) {
      if (t >= c.next && d.queued(c.key) >= c.batch) {
        d.acknowledged(c.key, c.batch);
        c.next = t + c.period;
      }
    }
    while (auto r = d.next_round(t)) {
      for (JobSlot s : r->slots) d.decided(r->group == 0 ? drv.key_of.at(s) : other.at(s), 1);
    }
  }
  EXPECT_NEAR(d.queued(0), 200, 20);
  EXPECT_NEAR(d.queued(1), 100, 10);
  d.remove_job(2);
  size_t shared = 0, rounds = 0;
  while (auto r = d.next_round(2.01)) {
    ++rounds;
    if (r->slots.size() == 2) {
      ++shared;
      // Seconds of consumption ahead of each job's new item, at the rates its plan follows: one
      // item's time of the slower job apart at most.
      EXPECT_NEAR(double(d.queued(0)) / d.plan_rate(0), double(d.queued(1)) / d.plan_rate(1),
                  1.0 / d.plan_rate(1) + 1e-9);
    }
    for (JobSlot s : r->slots) d.decided(drv.key_of.at(s), 1);
  }
  EXPECT_NEAR(d.queued(0), 477 - 16, 25) << "filled to a window below its new horizon";
  EXPECT_NEAR(d.queued(1), 239 - 16, 15);
  EXPECT_GT(shared, 100u);
  EXPECT_GT(rounds, shared + 100) << "job 0 alone in about every second round";
}

TEST(Dispatcher, RequestRateSumsRateOverRemainingSetSize) {
  Dispatcher d(UINT64_MAX, 0.0, at_once());
  RemainingSets sets(10);
  std::vector<ItemId> all(10), half = {0, 1, 2, 3, 4};
  for (ItemId i = 0; i < 10; ++i) all[i] = i;
  const JobSlot a = sets.add_job(all), b = sets.add_job(half);
  d.add_job(1, config(a, 1, 4), 0.0);
  d.add_job(2, config(b, 1, 4), 0.0);
  while (auto r = d.next_round(0.0)) {
    for (JobSlot s : r->slots) d.decided(s == a ? 1 : 2, 1);
  }
  d.acknowledged(1, 4);
  d.acknowledged(2, 2);
  d.next_round(0.1);  // rates: 40/s and 20/s
  ASSERT_NEAR(d.rate(1), 40, 1e-9);
  ASSERT_NEAR(d.rate(2), 20, 1e-9);
  EXPECT_NEAR(d.request_rate(0, sets.signature(0), sets), 40.0 / 10 + 20.0 / 5, 1e-9);
  EXPECT_NEAR(d.request_rate(0, sets.signature(9), sets), 40.0 / 10, 1e-9);
  EXPECT_EQ(d.request_rate(7, sets.signature(0), sets), 0.0) << "another group's jobs do not count";
}

}  // namespace
}  // namespace joader
