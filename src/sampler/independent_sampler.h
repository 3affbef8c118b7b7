// IndependentSampler: every job draws uniformly from its own R_j, ignoring the others — what k
// separate shuffling DataLoaders do today. The baseline for L/D comparisons.
#pragma once

#include "sampler/sampler.h"

namespace joader {

class IndependentSampler : public Sampler {
 public:
  using Sampler::Sampler;

 protected:
  void decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) override;
};

}  // namespace joader
