#include "sim/simulator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>

#include "cache/cache.h"
#include "sampler/sampler.h"

namespace joader {
namespace {

struct JobRun {
  double credit = 0;
  JobSlot slot = -1;
  bool started = false;
  bool done = false;
};

// One pass over the scenario. `cache` may be null (trace recording); `on_round` sees each round's
// distinct items with the round's index.
class Run {
 public:
  Run(const Scenario& sc, Sampler& sampler) : sc_(sc), sampler_(sampler), jobs_(sc.jobs.size()) {}

  uint64_t round_index() const { return result_.rounds; }
  double speed_of_slot(JobSlot s) const { return sc_.jobs[slot_job_[s]].speed; }

  SimResult run(Cache* cache, const std::function<void(const TraceEvent&)>& on_delivery,
                const std::function<void(uint64_t, const std::vector<ItemId>&)>& on_round) {
    result_.jobs.resize(sc_.jobs.size());
    for (size_t i = 0; i < sc_.jobs.size(); ++i) result_.jobs[i].name = sc_.jobs[i].name;
    size_t remaining = sc_.jobs.size();
    std::vector<JobSlot> ready;
    std::vector<Decision> decisions;
    std::vector<ItemId> distinct;
    std::vector<bool> distinct_hit;
    for (uint64_t t = 0; remaining > 0; ++t) {
      // Nothing active: jump to the next start.
      uint64_t next_start = std::numeric_limits<uint64_t>::max();
      bool any_active = false;
      for (size_t i = 0; i < jobs_.size(); ++i) {
        if (jobs_[i].done) continue;
        if (jobs_[i].started) any_active = true;
        else next_start = std::min(next_start, sc_.jobs[i].start);
      }
      if (!any_active && next_start > t) t = next_start;

      for (size_t i = 0; i < jobs_.size(); ++i) {
        JobRun& j = jobs_[i];
        const JobSpec& spec = sc_.jobs[i];
        if (j.done) continue;
        if (j.started && spec.stop && t >= *spec.stop) {
          finish(i, t);
          --remaining;
          continue;
        }
        if (!j.started && t >= spec.start) {
          j.slot = sampler_.add_job(spec.subset, spec.epochs);
          slot_job_[j.slot] = i;
          j.started = true;
        }
        if (j.started) j.credit = std::min(j.credit + spec.speed, spec.speed + 1.0);
      }

      for (;;) {
        ready.clear();
        for (const JobRun& j : jobs_) {
          if (j.started && !j.done && j.credit >= 1.0) ready.push_back(j.slot);
        }
        if (ready.empty()) break;
        sampler_.round(ready, decisions);
        if (decisions.empty()) break;  // lockstep: blocked on a job without credit

        distinct.clear();
        distinct_hit.clear();
        for (const Decision& d : decisions) {
          if (std::find(distinct.begin(), distinct.end(), d.item) != distinct.end()) continue;
          distinct.push_back(d.item);
          distinct_hit.push_back(cache != nullptr && cache->contains(d.item));
        }
        if (on_round) on_round(result_.rounds, distinct);
        // Hits first, so that inserting this round's misses cannot evict them before their access.
        for (size_t k = 0; k < distinct.size(); ++k) {
          if (distinct_hit[k]) cache->touch(distinct[k]);
        }
        for (size_t k = 0; k < distinct.size(); ++k) {
          if (distinct_hit[k]) continue;
          ++result_.loads;
          if (cache != nullptr) cache->insert(distinct[k], 1);
        }
        ++result_.rounds;

        for (const Decision& d : decisions) {
          const size_t i = slot_job_[d.job];
          const bool hit = distinct_hit[std::find(distinct.begin(), distinct.end(), d.item) - distinct.begin()];
          ++result_.deliveries;
          result_.hits += hit;
          ++result_.jobs[i].deliveries;
          jobs_[i].credit -= 1.0;
          if (on_delivery) on_delivery(TraceEvent{t, i, d.epoch, d.item, hit});
        }
        for (const Decision& d : decisions) {
          const size_t i = slot_job_[d.job];
          if (!jobs_[i].done && sampler_.finished(d.job)) {
            finish(i, t);
            --remaining;
          }
        }
      }
      result_.steps = t + 1;
    }
    return result_;
  }

 private:
  void finish(size_t i, uint64_t t) {
    JobRun& j = jobs_[i];
    result_.jobs[i].epochs = sampler_.epoch(j.slot);
    result_.jobs[i].end_step = t;
    sampler_.remove_job(j.slot);
    j.done = true;
  }

  const Scenario& sc_;
  Sampler& sampler_;
  std::vector<JobRun> jobs_;
  std::array<size_t, kMaxJobs> slot_job_{};
  SimResult result_;
};

}  // namespace

SimResult simulate(const Scenario& sc, const std::function<void(const TraceEvent&)>& on_delivery,
                   const SamplerFactory& make_sampler_for) {
  auto new_sampler = [&] {
    return make_sampler_for ? make_sampler_for(sc) : make_sampler(sc.sampler, sc.universe, sc.seed);
  };
  // Belady: record, for every item, the rounds in which it is requested.
  std::vector<std::vector<uint32_t>> uses;
  if (sc.policy == "belady") {
    uses.resize(sc.universe);
    auto sampler = new_sampler();
    Run(sc, *sampler).run(nullptr, {}, [&](uint64_t r, const std::vector<ItemId>& items) {
      for (ItemId x : items) uses[x].push_back(static_cast<uint32_t>(r));
    });
  }

  auto sampler = new_sampler();
  Run run(sc, *sampler);
  PolicyContext ctx;
  const RemainingSets& sets = sampler->sets();
  ctx.signature = [&sets](CacheKey k) { return sets.signature(key_item(k)); };
  ctx.request_rate = [&sets, &run](uint32_t, uint64_t sig) {
    double rate = 0;
    for (uint64_t rest = sig; rest != 0; rest &= rest - 1) {
      const JobSlot j = std::countr_zero(rest);
      rate += run.speed_of_slot(j) / double(sets.size(j));
    }
    return rate;
  };
  if (sc.policy == "belady") {
    ctx.next_use = [&run, &uses](CacheKey k) -> uint64_t {
      const auto& u = uses[key_item(k)];
      auto it = std::upper_bound(u.begin(), u.end(), run.round_index());
      return it == u.end() ? std::numeric_limits<uint64_t>::max() : *it;
    };
  }
  // One dataset: cache keys are the item ids themselves (dataset 0).
  Cache cache(sc.cache_items, make_policy(sc.policy, ctx));
  sampler->set_observer(cache.observer_for(0));
  return run.run(&cache, on_delivery, {});
}

}  // namespace joader
