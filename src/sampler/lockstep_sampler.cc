#include "sampler/lockstep_sampler.h"

#include <algorithm>
#include <bit>
#include <numeric>

namespace joader {

LockstepSampler::LockstepSampler(uint32_t universe, uint64_t seed)
    : Sampler(universe, seed), order_(universe) {
  std::iota(order_.begin(), order_.end(), ItemId{0});
  std::shuffle(order_.begin(), order_.end(), rng_.engine());
}

void LockstepSampler::decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) {
  uint64_t requesting = 0;
  for (JobSlot j : jobs) requesting |= uint64_t{1} << j;
  // Every active unfinished job has a non-empty R, so some item of the order is needed and the
  // skip loop ends within one pass of the order.
  for (;;) {
    if (head_ == order_.size()) {
      std::shuffle(order_.begin(), order_.end(), rng_.engine());
      head_ = 0;
    }
    const ItemId x = order_[head_];
    const uint64_t needers = sets_.signature(x);
    if (needers == 0) {
      ++head_;
      continue;
    }
    if ((needers & ~requesting) != 0) return;  // blocked on a job that is not ready
    for (uint64_t rest = needers; rest != 0; rest &= rest - 1) {
      out.push_back(Decision{std::countr_zero(rest), x});
    }
    ++head_;
    return;
  }
}

}  // namespace joader
