#include "sim/simulator.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <memory>
#include <random>

#include "cache/cache.h"
#include "common/rng.h"
#include "dispatch/dispatcher.h"
#include "sampler/sampler.h"

namespace joader {
namespace {

// The simulator's time unit: one step is a millisecond on the dispatcher's clock, so a job of
// speed 1 consumes 1000 items/s and the dispatcher's rate windows (0.2 s) span 200 steps.
constexpr double kStepSeconds = 1e-3;

struct JobRun {
  double appetite = 0;  // items the job's consumer may take now (earned at `speed` per step)
  double cost = 0;      // items of appetite its next batch takes (batch × (1 + jitter draw))
  // Its decided, unconsumed items, oldest first, and whether each holds a pin in the cache (as in
  // the daemon, an item waiting for its consumer cannot be evicted).
  std::deque<std::pair<ItemId, bool>> queue;
  JobSlot slot = -1;
  bool started = false;
  bool done = false;
};

// One pass over the scenario. `cache` may be null (trace recording); `on_round` sees each round's
// distinct items with the round's index.
class Run {
 public:
  Run(const Scenario& sc, Sampler& sampler)
      : sc_(sc), sampler_(sampler), jobs_(sc.jobs.size()), dispatcher_(std::numeric_limits<uint64_t>::max(), 0.0) {}

  uint64_t round_index() const { return result_.rounds; }
  const Dispatcher& dispatcher() const { return dispatcher_; }

  SimResult run(Cache* cache, const std::function<void(const TraceEvent&)>& on_delivery,
                const std::function<void(uint64_t, const std::vector<ItemId>&)>& on_round) {
    cache_ = cache;
    result_.jobs.resize(sc_.jobs.size());
    for (size_t i = 0; i < sc_.jobs.size(); ++i) result_.jobs[i].name = sc_.jobs[i].name;
    size_t remaining = sc_.jobs.size();
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
      const double now = double(t) * kStepSeconds;

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
          dispatcher_.add_job(i, {0, j.slot, spec.batch, spec.prefetch, 1}, now);
          j.cost = batch_cost(spec);
        }
        if (!j.started) continue;
        // The consumer: it earns `speed` items per step and takes whole batches from its queue of
        // decided items, acknowledging each; waiting for a batch, it banks at most one batch more.
        j.appetite = std::min(j.appetite + spec.speed, spec.speed + j.cost);
        while (j.appetite >= j.cost && dispatcher_.queued(i) >= spec.batch) {
          for (uint32_t k = 0; k < spec.batch; ++k) {
            if (j.queue.front().second) cache_->unpin(j.queue.front().first);
            j.queue.pop_front();
          }
          dispatcher_.acknowledged(i, spec.batch);
          j.appetite -= j.cost;
          j.cost = batch_cost(spec);
        }
      }

      while (auto due = dispatcher_.next_round(now)) {
        sampler_.round(due->slots, decisions);
        if (decisions.empty()) break;  // lockstep: blocked on a job not in this round

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
          dispatcher_.decided(i, 1);
          const bool pinned = cache != nullptr && cache->contains(d.item);
          if (pinned) cache->pin(d.item);
          jobs_[i].queue.emplace_back(d.item, pinned);
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
  double batch_cost(const JobSpec& spec) {
    if (spec.jitter == 0) return spec.batch;
    return spec.batch * (1 + std::uniform_real_distribution<double>(-spec.jitter, spec.jitter)(jitter_rng_.engine()));
  }

  void finish(size_t i, uint64_t t) {
    JobRun& j = jobs_[i];
    result_.jobs[i].epochs = sampler_.epoch(j.slot);
    result_.jobs[i].end_step = t;
    sampler_.remove_job(j.slot);
    dispatcher_.remove_job(i);
    for (const auto& [item, pinned] : j.queue) {
      if (pinned) cache_->unpin(item);
    }
    j.queue.clear();
    j.done = true;
  }

  const Scenario& sc_;
  Sampler& sampler_;
  std::vector<JobRun> jobs_;
  Dispatcher dispatcher_;
  Cache* cache_ = nullptr;
  std::array<size_t, kMaxJobs> slot_job_{};
  Rng jitter_rng_{sc_.seed ^ 0x9e3779b97f4a7c15ull};  // the consumers' jitter: the same in every pass
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
  ctx.request_rate = [&sets, &run](uint32_t, uint64_t sig) { return run.dispatcher().request_rate(0, sig, sets); };
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
