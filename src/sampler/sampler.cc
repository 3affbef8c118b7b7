#include "sampler/sampler.h"

#include <fmt/format.h>

#include "sampler/dsa_sampler.h"
#include "sampler/independent_sampler.h"
#include "sampler/lockstep_sampler.h"

namespace joader {

Sampler::Sampler(uint32_t universe, uint64_t seed) : sets_(universe), rng_(seed) {}

JobSlot Sampler::add_job(std::vector<ItemId> subset, uint32_t epochs, uint32_t first_epoch,
                         std::span<const ItemId> consumed, bool ordered) {
  if (epochs != 0 && first_epoch >= epochs) {
    throw SamplerError("cannot resume in epoch " + std::to_string(first_epoch) + " of a job with " +
                       std::to_string(epochs) + " epochs");
  }
  std::vector<ItemId> order = ordered ? subset : std::vector<ItemId>{};
  const JobSlot job = sets_.add_job(std::move(subset));
  order_[job] = std::move(order);
  next_[job] = 0;
  for (ItemId x : consumed) {
    if (x >= sets_.universe() || !sets_.contains(job, x)) {
      sets_.remove_job(job);
      throw SamplerError("consumed item " + std::to_string(x) + " is not in the job's subset, or appears twice");
    }
    sets_.remove(job, x);
  }
  epoch_[job] = first_epoch;
  limit_[job] = epochs;
  if (sets_.size(job) == 0) {  // the saved epoch was complete: continue with the next one
    ++epoch_[job];
    if (!finished(job)) sets_.refill(job);
  }
  return job;
}

void Sampler::remove_job(JobSlot job) {
  sets_.remove_job(job);
  order_[job] = {};
}

void Sampler::round(std::span<const JobSlot> requesting, std::vector<Decision>& out) {
  out.clear();
  scratch_.clear();
  ordered_scratch_.clear();
  uint64_t seen = 0;
  for (JobSlot j : requesting) {
    if (j < 0 || j >= kMaxJobs || !sets_.active(j) || finished(j)) continue;
    if ((seen >> j) & 1) continue;
    seen |= uint64_t{1} << j;
    (ordered(j) ? ordered_scratch_ : scratch_).push_back(j);
  }
  if (!scratch_.empty()) decide(scratch_, out);
  // After the random jobs' decisions, so that none of them takes an ordered one as its parent.
  for (JobSlot j : ordered_scratch_) {
    const std::vector<ItemId>& order = order_[j];
    while (!sets_.contains(j, order[next_[j]])) ++next_[j];  // a resumed epoch's consumed items
    out.push_back({j, order[next_[j]++]});
  }
  for (Decision& d : out) d.epoch = epoch_[d.job];
  for (const Decision& d : out) sets_.remove(d.job, d.item, d.index);
  for (const Decision& d : out) {
    if (sets_.size(d.job) != 0) continue;
    ++epoch_[d.job];
    next_[d.job] = 0;
    if (!finished(d.job)) sets_.refill(d.job);
  }
}

const std::vector<std::string>& sampler_names() {
  static const std::vector<std::string> names = {"dsa", "independent", "lockstep", "biased-dsa"};
  return names;
}

std::unique_ptr<Sampler> make_sampler(const std::string& name, uint32_t universe, uint64_t seed) {
  if (name == "dsa") return std::make_unique<DsaSampler>(universe, seed);
  if (name == "independent") return std::make_unique<IndependentSampler>(universe, seed);
  if (name == "lockstep") return std::make_unique<LockstepSampler>(universe, seed);
  if (name == "biased-dsa") return std::make_unique<AlwaysReuseDsaSampler>(universe, seed);
  throw SamplerError(fmt::format("unknown sampler '{}' (expected one of {})", name, fmt::join(sampler_names(), ", ")));
}

}  // namespace joader
