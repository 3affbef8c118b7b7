#include "sampler/remaining_sets.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

namespace joader {
namespace {

std::vector<ItemId> iota_ids(ItemId lo, ItemId hi) {
  std::vector<ItemId> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  return v;
}

// Recomputes |R_a ∩ R_b| from the signatures and compares with the maintained matrix.
void expect_matrix_matches_signatures(const RemainingSets& s) {
  for (JobSlot a = 0; a < kMaxJobs; ++a) {
    if (!s.active(a)) continue;
    for (JobSlot b = 0; b < kMaxJobs; ++b) {
      if (!s.active(b)) continue;
      uint32_t count = 0;
      for (ItemId x = 0; x < s.universe(); ++x) count += s.contains(a, x) && s.contains(b, x);
      ASSERT_EQ(s.intersection(a, b), count) << "jobs " << a << ", " << b;
    }
  }
}

TEST(RemainingSets, NewJobHasItsWholeSubsetRemaining) {
  RemainingSets s(10);
  const JobSlot a = s.add_job({1, 3, 5});
  EXPECT_EQ(s.size(a), 3u);
  EXPECT_TRUE(s.contains(a, 3));
  EXPECT_FALSE(s.contains(a, 4));
  EXPECT_EQ(s.signature(5), uint64_t{1} << a);
}

TEST(RemainingSets, IntersectionMatrixFollowsRemovalsRefillsAndLeaves) {
  RemainingSets s(40);
  Rng rng(7);
  const JobSlot a = s.add_job(iota_ids(0, 30));
  const JobSlot b = s.add_job(iota_ids(10, 40));
  const JobSlot c = s.add_job(iota_ids(5, 15));
  expect_matrix_matches_signatures(s);
  for (int step = 0; step < 200; ++step) {
    const JobSlot j = std::array{a, b, c}[rng.uniform(3)];
    if (!s.active(j)) continue;
    uint32_t index;
    s.remove(j, s.draw(j, rng, &index), step % 2 ? index : RemainingSets::kNoIndex);
    if (s.size(j) == 0) s.refill(j);
    expect_matrix_matches_signatures(s);
  }
  s.remove_job(b);
  expect_matrix_matches_signatures(s);
  for (ItemId x = 0; x < 40; ++x) EXPECT_FALSE(s.contains(b, x));
}

TEST(RemainingSets, DrawsComeFromTheRemainingSetEvenWithStaleEntries) {
  RemainingSets s(1000);
  Rng rng(1);
  const JobSlot a = s.add_job(iota_ids(0, 1000));
  // Remove by value (no index): leaves stale entries behind.
  for (ItemId x = 0; x < 900; ++x) s.remove(a, x);
  std::set<ItemId> seen;
  for (int i = 0; i < 2000; ++i) {
    uint32_t index;
    const ItemId x = s.draw(a, rng, &index);
    ASSERT_TRUE(s.contains(a, x));
    ASSERT_EQ(s.subset(a)[index], x);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 100u);  // all 100 remaining items are reachable
}

TEST(RemainingSets, DrawExcludingNeverReturnsAnItemOfTheExcludedJob) {
  RemainingSets s(5000);
  Rng rng(3);
  const JobSlot big = s.add_job(iota_ids(0, 5000));
  const JobSlot other = s.add_job(iota_ids(0, 4998));  // R_big \ R_other = {4998, 4999}
  std::set<ItemId> seen;
  for (int i = 0; i < 400; ++i) {  // exercises the capped rejection and the exact fallback
    uint32_t index;
    const ItemId x = s.draw_excluding(big, other, rng, &index);
    ASSERT_TRUE(x == 4998 || x == 4999) << x;
    ASSERT_EQ(s.subset(big)[index], x);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(RemainingSets, RejectsBadSubsetsWithClearMessages) {
  RemainingSets s(10);
  EXPECT_THROW(s.add_job({}), SamplerError);
  try {
    s.add_job({1, 10});
    FAIL();
  } catch (const SamplerError& e) {
    EXPECT_STREQ(e.what(), "item id 10 is outside the dataset (10 items)");
  }
  try {
    s.add_job({1, 2, 1});
    FAIL();
  } catch (const SamplerError& e) {
    EXPECT_STREQ(e.what(), "item id 1 appears twice in the subset");
    EXPECT_EQ(e.code(), SamplerError::kInvalid);
  }
  EXPECT_EQ(s.active_mask(), 0u);  // failed joins leave nothing behind
}

TEST(RemainingSets, SixtyFifthJobIsRejectedAndAFreedSlotIsReused) {
  RemainingSets s(4);
  for (int i = 0; i < kMaxJobs; ++i) s.add_job({0, 1});
  try {
    s.add_job({0});
    FAIL();
  } catch (const SamplerError& e) {
    EXPECT_EQ(e.code(), SamplerError::kFull);  // the daemon answers RESOURCE_EXHAUSTED, not a bad request
  }
  s.remove_job(17);
  EXPECT_EQ(s.add_job({2}), 17);
  EXPECT_EQ(std::popcount(s.signature(0)), kMaxJobs - 1);
}

TEST(RemainingSets, MemoryIsEightBytesPerItemPlusFourPerJobSubsetItem) {
  RemainingSets s(100000);
  s.add_job(iota_ids(0, 100000));
  s.add_job(iota_ids(0, 50000));
  const size_t expected = 8 * 100000 + 4 * 150000 + sizeof(uint32_t) * kMaxJobs * kMaxJobs;
  EXPECT_EQ(s.memory_bytes(), expected);
}

}  // namespace
}  // namespace joader
