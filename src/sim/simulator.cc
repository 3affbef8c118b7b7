#include "sim/simulator.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <memory>
#include <queue>
#include <random>
#include <unordered_map>
#include <utility>

#include "cache/cache.h"
#include "cache/next_uses.h"
#include "common/rng.h"
#include "dispatch/dispatcher.h"
#include "dispatch/job_queue.h"
#include "sampler/sampler.h"

namespace joader {
namespace {

// The simulator's time unit: one step is a millisecond on the dispatcher's clock, so a job of
// speed 1 consumes 1000 items/s and the dispatcher's rate windows (0.2 s) span 200 steps.
constexpr double kStepSeconds = 1e-3;

// A decided item in a job's queue (dispatch/job_queue.h, as the daemon's): in the window once
// accessed (loaded or hit, pinned if resident), else in the plan.
struct Queued : QueueEntry {
  double ready = 0;  // the step from which it is loaded (once accessed)
};

struct JobRun {
  explicit JobRun(NextUses& next_uses) : queue(0, next_uses) {}
  double appetite = 0;  // items the job's consumer may take now (earned at `speed` per step)
  double cost = 0;      // items of appetite its next batch takes (batch × (1 + jitter draw))
  JobQueue<Queued> queue;  // decided, unconsumed items (one dataset: keys are item ids)
  JobSlot slot = -1;
  bool started = false;
  bool done = false;
};

// One access of an item by a job: its queued entry entering the window.
struct Access {
  size_t job;
  Queued* entry;
};

// The daemon's dispatcher, with plans under `planned` (or at a given horizon): the cache holds
// cache_items items of size 1.
DispatcherOptions dispatcher_options(const Scenario& sc) {
  DispatcherOptions o;
  if (sc.policy == "planned") o.plan_span = kDefaultPlanSpan;
  o.plan_cache = std::max<uint64_t>(sc.cache_items, 1);
  o.fixed_horizon = double(sc.horizon) * kStepSeconds;
  return o;
}

// One pass over the scenario. `cache` may be null (trace recording); `on_access` sees each group
// of accesses' distinct items with the group's index.
class Run {
 public:
  Run(const Scenario& sc, Sampler& sampler, NextUses& next_uses)
      : sc_(sc), sampler_(sampler),
        dispatcher_(std::numeric_limits<uint64_t>::max(), 0.0, dispatcher_options(sc)), loader_free_(sc.loaders, 0.0) {
    for (size_t i = 0; i < sc.jobs.size(); ++i) jobs_.emplace_back(next_uses);
    if (sc.disk.enabled) {
      on_disk_.assign(sc.universe, false);
      if (sc.disk.warm) {  // the first ids, as many as it holds
        for (ItemId x = 0; x < sc.universe && (sc.disk.items == 0 || on_disk_count_ < sc.disk.items); ++x) {
          on_disk_[x] = true;
          ++on_disk_count_;
        }
      }
    }
  }

  uint64_t access_index() const { return groups_; }
  // Whether the disk tier holds the item (Scenario::disk).
  bool on_disk(ItemId item) const { return !on_disk_.empty() && on_disk_[item]; }
  const Dispatcher& dispatcher() const { return dispatcher_; }

  SimResult run(Cache* cache, const std::function<void(const TraceEvent&)>& on_delivery,
                const std::function<void(uint64_t, const std::vector<ItemId>&)>& on_access) {
    cache_ = cache;
    on_delivery_ = on_delivery;
    on_access_ = on_access;
    result_.jobs.resize(sc_.jobs.size());
    for (size_t i = 0; i < sc_.jobs.size(); ++i) result_.jobs[i].name = sc_.jobs[i].name;
    size_t remaining = sc_.jobs.size();
    std::vector<Decision> decisions;
    std::vector<Access> group;
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
      t_ = t;
      const double now = double(t) * kStepSeconds;

      group.clear();
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
          j.slot = sampler_.add_job(spec.subset, spec.epochs, 0, {}, spec.ordered);
          slot_job_[j.slot] = i;
          j.started = true;
          dispatcher_.add_job(i, {0, j.slot, spec.batch, spec.prefetch, 1, spec.subset.size(), {}}, now);
          j.cost = batch_cost(spec);
        }
        if (!j.started) continue;
        // The consumer: it earns `speed` items per step and takes whole batches from its window,
        // acknowledging each; waiting for a batch, it banks at most one batch more. Plan items
        // then move into the window.
        j.appetite = std::min(j.appetite + spec.speed, spec.speed + j.cost);
        while (j.appetite >= j.cost && j.queue.window_size() >= spec.batch && batch_loaded(j, spec.batch)) {
          for (const Queued& q : j.queue.take(spec.batch)) {
            if (q.pinned) cache_->unpin(q.item);
          }
          dispatcher_.acknowledged(i, spec.batch);
          j.appetite -= j.cost;
          j.cost = batch_cost(spec);
        }
        while (j.queue.planned() > 0 && j.queue.window_size() < dispatcher_.window(i)) {
          group.push_back({i, &j.queue.promote()});
        }
      }
      access(group);
      tell_waiting();
      for (size_t i = 0; i < jobs_.size(); ++i) {
        if (finished_deciding(i)) {
          finish(i, t);
          --remaining;
        }
      }

      while (auto due = dispatcher_.next_round(now)) {
        sampler_.round(due->slots, decisions);
        if (decisions.empty()) break;  // lockstep: blocked on a job not in this round
        ++result_.rounds;
        group.clear();
        for (const Decision& d : decisions) {
          const size_t i = slot_job_[d.job];
          JobRun& j = jobs_[i];
          ++result_.jobs[i].deliveries;
          Queued q;
          q.item = d.item;
          q.epoch = d.epoch;
          Queued* accessed = j.queue.decide(q, j.queue.window_size() < dispatcher_.window(i),
                                            due_micros(dispatcher_.due(i, now)));
          dispatcher_.decided(i, 1);
          if (accessed != nullptr) group.push_back({i, accessed});
        }
        access(group);
        tell_waiting();
        for (const Decision& d : decisions) {
          const size_t i = slot_job_[d.job];
          if (!jobs_[i].done && sampler_.finished(d.job)) dispatcher_.stop_job(i);
          if (finished_deciding(i)) {
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
  // A job is done once its last epoch is decided and all of it has entered its window.
  bool finished_deciding(size_t i) const {
    const JobRun& j = jobs_[i];
    return j.started && !j.done && sampler_.finished(j.slot) && j.queue.planned() == 0;
  }

  // Loads take time: decodes (load_ms) or reads from the disk tier (disk.read_ms).
  bool timed() const { return sc_.load_ms > 0 || sc_.disk.read_ms > 0; }

  // Whether the first `batch` items of the job's queue (at most its window) are loaded.
  bool batch_loaded(const JobRun& j, uint32_t batch) const {
    if (!timed()) return true;
    for (size_t k = 0; k < batch && k < j.queue.window_size(); ++k) {
      if (j.queue[k].ready > double(t_)) return false;
    }
    return true;
  }

  // Tells the dispatcher which jobs' next batches wait on loads (Dispatcher::set_waiting), as the
  // daemon's engine does.
  void tell_waiting() {
    if (!timed()) return;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].started && !jobs_[i].done) dispatcher_.set_waiting(i, !batch_loaded(jobs_[i], sc_.jobs[i].batch));
    }
  }

  // When a load of `item` started now is done: on the loader that is free first, after the loads
  // queued before it; a read from the disk tier when it holds the item, else a decode. Also when an
  // access finds the item still loading: the end of that load.
  double load_done(ItemId item, bool load) {
    const double t = double(t_);
    while (!loading_.empty() && loading_.top().first <= t) {
      if (auto it = loading_ends_.find(loading_.top().second); it != loading_ends_.end() && it->second <= t) {
        loading_ends_.erase(it);
      }
      loading_.pop();
    }
    if (!load) {
      const auto it = loading_ends_.find(item);
      return it == loading_ends_.end() ? t : it->second;
    }
    const double cost = on_disk(item) ? sc_.disk.read_ms : sc_.load_ms;
    if (cost == 0) return t;
    double& loader = *std::min_element(loader_free_.begin(), loader_free_.end());
    loader = std::max(loader, t) + cost;
    loading_.emplace(loader, item);
    loading_ends_[item] = loader;
    return loader;
  }

  // A group of accesses at one moment: the distinct items that are not resident are loads (one
  // per item, however many jobs access it); a delivery is a hit when its item was resident before
  // the group. Hits are touched and pinned first, so that the group's loads cannot evict them.
  // With load time, an accessed item is ready when its load ends (a hit on an item still loading
  // waits for that load).
  void access(const std::vector<Access>& group) {
    if (group.empty()) return;
    distinct_.clear();
    hit_.clear();
    ready_.clear();
    for (const Access& a : group) {
      if (std::find(distinct_.begin(), distinct_.end(), a.entry->item) != distinct_.end()) continue;
      distinct_.push_back(a.entry->item);
      hit_.push_back(cache_ != nullptr && cache_->contains(a.entry->item));
      ready_.push_back(load_done(a.entry->item, !hit_.back()));
    }
    if (on_access_) on_access_(groups_, distinct_);
    ++groups_;
    auto hit_of = [&](ItemId x) { return hit_[std::find(distinct_.begin(), distinct_.end(), x) - distinct_.begin()]; };
    for (size_t k = 0; k < distinct_.size(); ++k) {
      if (hit_[k]) cache_->touch(distinct_[k]);
    }
    for (const Access& a : group) {
      if (hit_of(a.entry->item)) pin(*a.entry);
    }
    for (size_t k = 0; k < distinct_.size(); ++k) {
      if (hit_[k]) continue;
      ++result_.loads;
      if (on_disk(distinct_[k])) {
        ++result_.disk_reads;
      } else {
        ++result_.decodes;
        admit_to_disk(distinct_[k]);
      }
      if (cache_ != nullptr) cache_->insert(distinct_[k], 1);
    }
    for (const Access& a : group) {
      a.entry->ready = ready_[std::find(distinct_.begin(), distinct_.end(), a.entry->item) - distinct_.begin()];
    }
    for (const Access& a : group) {
      const bool hit = hit_of(a.entry->item);
      if (!hit) pin(*a.entry);
      ++result_.deliveries;
      result_.hits += hit;
      if (on_delivery_) on_delivery_(TraceEvent{t_, a.job, a.entry->epoch, a.entry->item, hit});
    }
  }

  // A decoded item enters the disk tier while it has room (the daemon writes it after the load).
  void admit_to_disk(ItemId item) {
    if (on_disk_.empty() || (sc_.disk.items != 0 && on_disk_count_ >= sc_.disk.items)) return;
    on_disk_[item] = true;
    ++on_disk_count_;
  }

  void pin(Queued& q) {
    q.state = QueueEntry::kReady;
    q.pinned = cache_ != nullptr && cache_->contains(q.item);
    if (q.pinned) cache_->pin(q.item);
  }

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
    result_.jobs[i].deliveries -= j.queue.planned();  // its plan is dropped undelivered
    for (CacheKey k : j.queue.clear()) cache_->unpin(k);
    j.done = true;
  }

  const Scenario& sc_;
  Sampler& sampler_;
  std::deque<JobRun> jobs_;
  Dispatcher dispatcher_;
  Cache* cache_ = nullptr;
  std::function<void(const TraceEvent&)> on_delivery_;
  std::function<void(uint64_t, const std::vector<ItemId>&)> on_access_;
  std::array<size_t, kMaxJobs> slot_job_{};
  std::vector<ItemId> distinct_;
  std::vector<bool> hit_;
  std::vector<double> ready_;  // of distinct_
  std::vector<double> loader_free_;                  // when each loader thread is next free
  // Loads in flight, the first to end on top (reads and decodes of different lengths end out of
  // the order they started).
  std::priority_queue<std::pair<double, ItemId>, std::vector<std::pair<double, ItemId>>, std::greater<>> loading_;
  std::unordered_map<ItemId, double> loading_ends_;  // item → the end of its latest load
  std::vector<bool> on_disk_;                        // the disk tier's items (empty: no tier)
  uint64_t on_disk_count_ = 0;
  uint64_t groups_ = 0;
  uint64_t t_ = 0;
  Rng jitter_rng_{sc_.seed ^ 0x9e3779b97f4a7c15ull};  // the consumers' jitter: the same in every pass
  SimResult result_;
};

}  // namespace

SimResult simulate(const Scenario& sc, const std::function<void(const TraceEvent&)>& on_delivery,
                   const SamplerFactory& make_sampler_for) {
  auto new_sampler = [&] {
    return make_sampler_for ? make_sampler_for(sc) : make_sampler(sc.sampler, sc.universe, sc.seed);
  };
  // Belady: record, for every item, the groups of accesses in which it is requested.
  std::vector<std::vector<uint32_t>> uses;
  if (sc.policy == "belady") {
    uses.resize(sc.universe);
    auto sampler = new_sampler();
    NextUses unused;
    Run(sc, *sampler, unused).run(nullptr, {}, [&](uint64_t g, const std::vector<ItemId>& items) {
      for (ItemId x : items) uses[x].push_back(static_cast<uint32_t>(g));
    });
  }

  auto sampler = new_sampler();
  NextUses next_uses;
  Run run(sc, *sampler, next_uses);
  PolicyContext ctx;
  const RemainingSets& sets = sampler->sets();
  ctx.signature = [&sets](CacheKey k) { return sets.signature(key_item(k)); };
  ctx.request_rate = [&sets, &run](uint32_t, uint64_t sig) { return run.dispatcher().request_rate(0, sig, sets); };
  if (sc.policy == "belady") {
    ctx.next_use = [&run, &uses](CacheKey k) -> uint64_t {
      const auto& u = uses[key_item(k)];
      auto it = std::upper_bound(u.begin(), u.end(), run.access_index());
      return it == u.end() ? std::numeric_limits<uint64_t>::max() : *it;
    };
  } else {
    ctx.next_use = [&next_uses](CacheKey k) { return next_uses.next_use(k); };
  }
  if (sc.disk.enabled && sc.disk.cheap_first) ctx.reloads_cheaply = [&run](CacheKey k) { return run.on_disk(key_item(k)); };
  // One dataset: cache keys are the item ids themselves (dataset 0).
  Cache cache(sc.cache_items, make_policy(sc.policy, ctx));
  sampler->set_observer(cache.observer_for(0));
  if (sc.policy == "planned") next_uses.set_listener([&cache](CacheKey k) { cache.rank_changed(k); });
  return run.run(&cache, on_delivery, {});
}

}  // namespace joader
