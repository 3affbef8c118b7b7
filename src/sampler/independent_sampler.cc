#include "sampler/independent_sampler.h"

namespace joader {

void IndependentSampler::decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) {
  for (JobSlot j : jobs) {
    Decision d{j, 0};
    d.item = sets_.draw(j, rng_, &d.index);
    out.push_back(d);
  }
}

}  // namespace joader
