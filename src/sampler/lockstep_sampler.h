// LockstepSampler: all jobs walk one shared random order of the universe (the CoorDL /
// TensorSocket family), for comparison only. The head of the order advances past an item only
// once every job that still needs it this epoch takes it in the same round, so jobs block on the
// slowest one; items no job needs are skipped. A job that joins or wraps its epoch mid-order takes
// the rest of the current order and continues in the next one, so each epoch is still exact
// (every id once) but, unlike DSA, not a uniform permutation when jobs differ.
#pragma once

#include "sampler/sampler.h"

namespace joader {

class LockstepSampler : public Sampler {
 public:
  LockstepSampler(uint32_t universe, uint64_t seed);

 protected:
  void decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) override;

 private:
  std::vector<ItemId> order_;
  uint32_t head_ = 0;
};

}  // namespace joader
