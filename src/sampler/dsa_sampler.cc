#include "sampler/dsa_sampler.h"

#include <algorithm>

namespace joader {

bool DsaSampler::reuse_parent(JobSlot i, JobSlot p) {
  return rng_.uniform(sets_.size(i)) < sets_.size(p);
}

void DsaSampler::decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) {
  order_.assign(jobs.begin(), jobs.end());
  std::sort(order_.begin(), order_.end(), [this](JobSlot a, JobSlot b) {
    const uint32_t sa = sets_.size(a), sb = sets_.size(b);
    return sa != sb ? sa < sb : a < b;
  });
  const size_t first = out.size();
  for (JobSlot i : order_) {
    Decision d{i, 0};
    // Parent: the decided job sharing the most remaining items with i (first one on ties).
    const Decision* parent = nullptr;
    uint32_t best = 0;
    for (size_t k = first; k < out.size(); ++k) {
      const uint32_t shared = sets_.intersection(out[k].job, i);
      if (shared > best) {
        best = shared;
        parent = &out[k];
      }
    }
    if (parent == nullptr) {
      // No decided job overlaps R_i (or i is first): R_i \ R_p = R_i, a plain uniform draw.
      d.item = sets_.draw(i, rng_, &d.index);
    } else if (sets_.contains(i, parent->item) && reuse_parent(i, parent->job)) {
      d.item = parent->item;  // position unknown: removed by value
    } else {
      d.item = sets_.draw_excluding(i, parent->job, rng_, &d.index);
    }
    out.push_back(d);
  }
}

}  // namespace joader
