// Exactness: whatever the sampler, the subsets' overlap, the jobs' speeds and their joins and
// leaves, every job receives each id of its subset exactly once per epoch.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "sampler/sampler.h"

namespace joader {
namespace {

std::vector<ItemId> ids(ItemId lo, ItemId hi) {
  std::vector<ItemId> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  return v;
}

struct Tracked {
  JobSlot slot;
  std::vector<ItemId> subset;
  std::vector<std::vector<ItemId>> epochs;  // items received, per epoch
  bool left = false;
};

// Drives a sampler with a random request pattern: each job asks with its own probability (its
// speed); jobs join late and, optionally, one leaves mid-epoch. Then checks every epoch.
class ExactnessTest : public ::testing::TestWithParam<std::string> {
 protected:
  void run(uint32_t universe, const std::vector<std::vector<ItemId>>& subsets, uint32_t epochs,
           bool leave_mid_epoch) {
    auto sampler = make_sampler(GetParam(), universe, /*seed=*/42);
    Rng rng(9);
    std::vector<Tracked> jobs;
    std::vector<double> speed;
    std::vector<Decision> out;
    std::vector<JobSlot> ready;
    const size_t n = subsets.size();
    for (uint64_t round = 0; round < 2'000'000; ++round) {
      // Job k joins at round 37·k; the last one leaves after 60 % of its first epoch.
      if (jobs.size() < n && round == 37 * jobs.size()) {
        const auto& sub = subsets[jobs.size()];
        jobs.push_back({sampler->add_job(sub, epochs), sub, {{}}});
        speed.push_back(0.3 + 0.7 * double(jobs.size()) / double(n));
      }
      if (leave_mid_epoch && jobs.size() == n && !jobs.back().left &&
          jobs.back().epochs[0].size() * 10 >= jobs.back().subset.size() * 6) {
        sampler->remove_job(jobs.back().slot);
        jobs.back().left = true;
      }
      ready.clear();
      bool all_done = jobs.size() == n;
      for (size_t k = 0; k < jobs.size(); ++k) {
        if (jobs[k].left || sampler->finished(jobs[k].slot)) continue;
        all_done = false;
        if (rng.uniform(1000) < speed[k] * 1000) ready.push_back(jobs[k].slot);
      }
      if (all_done) break;
      sampler->round(ready, out);
      for (const Decision& d : out) {
        auto it = std::find_if(jobs.begin(), jobs.end(), [&](const Tracked& t) { return !t.left && t.slot == d.job; });
        ASSERT_NE(it, jobs.end());
        if (d.epoch == it->epochs.size()) it->epochs.emplace_back();
        ASSERT_EQ(d.epoch + 1, it->epochs.size()) << "epochs must follow each other";
        it->epochs.back().push_back(d.item);
      }
    }
    for (const Tracked& t : jobs) {
      std::vector<ItemId> want = t.subset;
      std::sort(want.begin(), want.end());
      if (!t.left) {
        ASSERT_EQ(t.epochs.size(), epochs);
      }
      for (size_t e = 0; e < t.epochs.size(); ++e) {
        std::vector<ItemId> got = t.epochs[e];
        std::sort(got.begin(), got.end());
        const bool complete = !t.left || e + 1 < t.epochs.size();
        if (complete) {
          ASSERT_EQ(got, want) << "job slot " << t.slot << " epoch " << e;
        } else {
          ASSERT_TRUE(std::adjacent_find(got.begin(), got.end()) == got.end()) << "duplicate in partial epoch";
          ASSERT_TRUE(std::includes(want.begin(), want.end(), got.begin(), got.end()));
        }
      }
    }
  }
};

TEST_P(ExactnessTest, IdenticalSubsets) { run(500, {ids(0, 500), ids(0, 500), ids(0, 500)}, 3, false); }

TEST_P(ExactnessTest, DisjointSubsets) { run(600, {ids(0, 200), ids(200, 400), ids(400, 600)}, 3, false); }

TEST_P(ExactnessTest, NestedSubsets) { run(400, {ids(0, 100), ids(0, 200), ids(0, 300), ids(0, 400)}, 3, false); }

TEST_P(ExactnessTest, PartlyOverlappingSubsets) {
  run(700, {ids(0, 300), ids(150, 450), ids(300, 700), ids(100, 600)}, 3, false);
}

TEST_P(ExactnessTest, ScatteredSubsetsWithALeaverMidEpoch) {
  std::vector<std::vector<ItemId>> subsets(5);
  for (ItemId x = 0; x < 1000; ++x) {
    for (size_t k = 0; k < subsets.size(); ++k) {
      if ((x * 2654435761u >> (k + 3)) % 3 != 0) subsets[k].push_back(x);
    }
  }
  run(1000, subsets, 2, true);
}

TEST_P(ExactnessTest, TinySubsetsOfOneAndTwoItems) { run(3, {{2}, {0, 2}, {1}, {0, 1, 2}}, 50, true); }

INSTANTIATE_TEST_SUITE_P(AllSamplers, ExactnessTest, ::testing::Values("dsa", "independent", "lockstep"),
                         [](const auto& info) { return info.param; });

TEST(DsaSampler, JobsWithIdenticalRemainingSetsAlwaysShareTheirItem) {
  auto s = make_sampler("dsa", 1000, 5);
  std::vector<JobSlot> jobs;
  for (int k = 0; k < 8; ++k) jobs.push_back(s->add_job(ids(0, 1000), 2));
  std::vector<Decision> out;
  for (int r = 0; r < 2000; ++r) {
    s->round(jobs, out);
    ASSERT_EQ(out.size(), jobs.size());
    for (const Decision& d : out) ASSERT_EQ(d.item, out[0].item);
  }
}

TEST(DsaSampler, ReusesTheParentsItemAsOftenAsTheMaximalCoupling) {
  // R_p = [0, 600), R_i = [0, 1000): P(X_i = X_p) = |R_p ∩ R_i| / |R_i| = 0.6 in the first round.
  int shared = 0;
  const int trials = 20000;
  std::vector<Decision> out;
  for (int t = 0; t < trials; ++t) {
    auto s = make_sampler("dsa", 1000, 1000 + t);
    const JobSlot p = s->add_job(ids(0, 600));
    const JobSlot i = s->add_job(ids(0, 1000));
    const std::array<JobSlot, 2> both{i, p};
    s->round(both, out);
    shared += out[0].item == out[1].item;
  }
  // Binomial(20000, 0.6): sd ≈ 69; 5 sd either side (false failure rate < 1e-6).
  EXPECT_NEAR(shared, 12000, 350);
}

TEST(LockstepSampler, BlocksWhileAJobThatNeedsTheNextItemIsNotReady) {
  auto s = make_sampler("lockstep", 10, 3);
  const JobSlot a = s->add_job(ids(0, 10));
  const JobSlot b = s->add_job(ids(0, 10));
  std::vector<Decision> out;
  const std::array<JobSlot, 1> only_a{a};
  s->round(only_a, out);
  EXPECT_TRUE(out.empty());
  const std::array<JobSlot, 2> both{a, b};
  s->round(both, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].item, out[1].item);
}

TEST_P(ExactnessTest, AnOrderedJobGetsItsSubsetInItsOrderEveryEpochAndAResumedEpochSkipsWhatItConsumed) {
  auto s = make_sampler(GetParam(), 10, 5);
  const std::vector<ItemId> order = {7, 2, 9, 0, 4};
  const std::vector<ItemId> consumed = {9, 7};
  const JobSlot random = s->add_job(ids(0, 10));
  const JobSlot ordered = s->add_job(order, 3, 0, {}, true);
  const JobSlot resumed = s->add_job(order, 2, 1, consumed, true);
  std::map<JobSlot, std::vector<ItemId>> got;
  std::vector<Decision> out;
  for (int round = 0; round < 40; ++round) {
    s->round(std::vector<JobSlot>{random, ordered, resumed}, out);
    for (const Decision& d : out) got[d.job].push_back(d.item);
  }
  EXPECT_EQ(got[ordered], (std::vector<ItemId>{7, 2, 9, 0, 4, 7, 2, 9, 0, 4, 7, 2, 9, 0, 4}));
  EXPECT_EQ(got[resumed], (std::vector<ItemId>{2, 0, 4}));  // the rest of epoch 1, then done
  EXPECT_TRUE(s->finished(ordered) && s->finished(resumed));
  if (GetParam() != "lockstep") {  // lockstep may hold a job back; the others decide every round
    ASSERT_EQ(got[random].size(), 40u);
    for (int e = 0; e < 4; ++e) {
      std::vector<ItemId> epoch(got[random].begin() + 10 * e, got[random].begin() + 10 * (e + 1));
      std::sort(epoch.begin(), epoch.end());
      EXPECT_EQ(epoch, ids(0, 10));
    }
  }
}

TEST(Sampler, UnknownNameIsAClearError) {
  EXPECT_THROW(make_sampler("random", 10, 1), SamplerError);
}

}  // namespace
}  // namespace joader
