#include "dispatch/dispatcher.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace joader {

Dispatcher::Dispatcher(uint64_t capacity, double now, DispatcherOptions options)
    : options_(options), capacity_(capacity), last_(now) {}

namespace {

// The median of `values` (the upper one of an even count), reordering them; 0 if there are none.
double median_of(std::vector<double>& values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

void Dispatcher::add_job(JobKey key, const JobConfig& config, double now) {
  if (config.batch == 0 || config.prefetch == 0) throw std::invalid_argument("batch and prefetch must be at least 1");
  if (jobs_.count(key) != 0) throw std::invalid_argument("job added twice");
  Job& j = jobs_[key];
  j.config = config;
  j.window_batches = config.prefetch;
  j.horizon = window_of(j);
  j.last_ack = now;
  // See "Starting together": a job joining peers that run already (one has a rate) starts at once;
  // one joining new jobs (or none) joins the gathering still open among them, or opens one.
  auto& members = groups_[config.group];
  bool running = false;
  double gathering = now;
  for (const auto& [slot, other] : members) {
    running = running || jobs_.at(other).rate > 0;
    gathering = std::max(gathering, jobs_.at(other).not_before);
  }
  j.not_before = running ? now : gathering > now ? gathering : now + options_.join_gather;
  j.window_start = j.not_before;  // its rate is measured from then
  members[config.slot] = key;
}

void Dispatcher::remove_job(JobKey key) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  reserved_ -= it->second.reserved;
  auto& group = groups_[it->second.config.group];
  group.erase(it->second.config.slot);
  if (group.empty()) groups_.erase(it->second.config.group);
  jobs_.erase(it);
  std::erase(window_changes_, key);
}

void Dispatcher::stop_job(JobKey key) { jobs_.at(key).stopped = true; }

void Dispatcher::fail_job(JobKey key) {
  Job& j = jobs_.at(key);
  j.stopped = j.failed = true;
  j.starving_since = kNever;  // at once: nobody waits on it until the next balance_windows
}

void Dispatcher::decided(JobKey key, uint64_t items) {
  Job& j = jobs_.at(key);
  // Items that bring a queue up to one batch are its catch-up: they cost no credit, so that a job
  // whose consumer outruns its credit is supplied its batch *and* its credit, and its measured
  // rate (what it consumed) can grow past what it was credited. So are the items that fill a new
  // job's plan.
  const uint64_t catch_up = catch_up_of(j);
  const uint64_t free = j.queued < catch_up ? std::min<uint64_t>(items, catch_up - j.queued) : 0;
  j.credit -= double(items - free);
  // With no pace yet it owes nothing (see "Starting together"); held back by loads, not by its
  // pace, at most one item (see "Supply").
  if (j.pace == 0) j.credit = std::max(j.credit, 0.0);
  if (j.waiting) j.credit = std::max(j.credit, -1.0);
  set_queued(key, j, j.queued + items);
}

void Dispatcher::acknowledged(JobKey key, uint64_t items, double now) {
  Job& j = jobs_.at(key);
  j.front_moved = true;
  j.in_flight -= std::min(items, j.in_flight);
  set_queued(key, j, j.queued - std::min(items, j.queued));
  fit_reservation(key, j);
  j.acked_in_window += items;
  const double t = now >= 0 ? now : last_;
  if (t > j.last_ack) j.ack_gap = t - j.last_ack;
  j.last_ack = t;
  // Progress: room may come. A job starves (and is reported) only while nobody consumes.
  for (auto& [other_key, other] : jobs_) {
    if (other.starving_since != kNever) other.starving_since = t;
  }
}

void Dispatcher::set_shrinkable(JobKey key, bool shrinkable) {
  Job& j = jobs_.at(key);
  j.shrinkable = shrinkable;
  if (shrinkable) fit_reservation(key, j);  // what entered its window meanwhile may not fit
}

bool Dispatcher::any_unshrinkable() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return !j.second.shrinkable; });
}

void Dispatcher::delivered(JobKey key, uint64_t items) { jobs_.at(key).in_flight += items; }

void Dispatcher::set_waiting(JobKey key, bool waiting) { jobs_.at(key).waiting = waiting; }

std::vector<Dispatcher::JobKey> Dispatcher::take_window_changes() { return std::exchange(window_changes_, {}); }

std::vector<Dispatcher::JobKey> Dispatcher::starving() const {
  std::vector<JobKey> out;
  for (const auto& [key, j] : jobs_) {
    if (j.starving_since != kNever && last_ - j.starving_since >= options_.starve_after) out.push_back(key);
  }
  return out;
}

uint32_t Dispatcher::held_batches(const Job& j) {
  const uint64_t b = j.config.batch;
  return static_cast<uint32_t>(std::clamp<uint64_t>((j.in_flight + b - 1) / b, 1, j.config.prefetch));
}

bool Dispatcher::is_starving(const Job& j) const {
  // A blocked job starves while decided items wait for room (even once its sampler has finished),
  // or while its consumer, short of a batch, waits for what it decides next. Not while its
  // consumer is busy with all it decided: that is no want of room, to be reported.
  if (j.failed) return false;
  return (!j.stopped && j.queued < j.config.batch && !is_full(j) && !can_take(j, 0)) ||
         (j.blocked && (j.queued > j.in_flight || (!j.stopped && j.in_flight < j.config.batch)));
}

bool Dispatcher::fits_grown(JobKey key, Job& j) const {
  return reserved_ - j.reserved + reservation(key, j, window_of(j) + j.config.batch) <= capacity_;
}

bool Dispatcher::grow_blocked(JobKey key, Job& j) {
  if (!j.blocked) return false;
  if (j.window_batches < j.config.prefetch) {
    if (!fits_grown(key, j)) return false;
    set_window(key, j, j.window_batches + 1);
  }
  // Unblocked once its window holds a whole batch beyond what its consumer holds.
  j.blocked = window_of(j) < j.in_flight + j.config.batch && j.window_batches < j.config.prefetch;
  return true;
}

void Dispatcher::set_window(JobKey key, Job& j, uint32_t batches) {
  if (batches == j.window_batches) return;
  j.window_batches = batches;
  update_reservation(key, j);
  j.horizon = std::max(j.horizon, window_of(j));  // a horizon is at least the window
  if (std::find(window_changes_.begin(), window_changes_.end(), key) == window_changes_.end()) {
    window_changes_.push_back(key);
  }
}

void Dispatcher::balance_windows(double now) {
  any_starving_ = false;
  for (auto& [key, s] : jobs_) {
    const bool starving = is_starving(s);
    if (!starving) s.starving_since = kNever;
    // A running job whose window cannot fill for want of room takes it from idle windows too, so
    // that it runs with its whole prefetch while the idle consumers (a val loader during training)
    // wait.
    const bool cramped = !starving && !s.stopped && now - s.last_ack < options_.idle_after && s.queued < window_of(s) &&
                         !is_full(s) && !can_take(s, 0);
    if (!starving && !cramped) continue;
    if (starving) {
      any_starving_ = true;
      if (s.starving_since == kNever) s.starving_since = now;
    }
    std::vector<std::pair<JobKey, Job*>> idle;
    for (auto& [other_key, k] : jobs_) {
      // For a job that merely cannot fill its window, a job is idle only once it has missed a few
      // of its own batches too: one whose steps take longer than idle_after is not shrunk for it.
      const double idle_for = starving ? options_.idle_after : std::max(options_.idle_after, 4 * k.ack_gap);
      if (&k != &s && k.shrinkable && !k.stopped && now - k.last_ack >= idle_for && k.window_batches > held_batches(k)) {
        idle.emplace_back(other_key, &k);
      }
    }
    std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a.second->last_ack < b.second->last_ack; });
    Job& job = s;  // a lambda may not capture a structured binding (clang)
    const JobKey job_key = key;
    const auto served = [this, &job, job_key] { return job.blocked ? grow_blocked(job_key, job) : can_take(job, 0); };
    bool done = served();
    for (auto [other_key, k] : idle) {
      if (done) break;
      set_window(other_key, *k, held_batches(*k));
      done = served();
    }
    if (starving && done) s.starving_since = kNever;
  }
  if (any_starving_) return;
  for (auto& [key, j] : jobs_) {  // shrunk windows of jobs that consume again grow back as room allows
    while (!j.failed && j.window_batches < j.config.prefetch && now - j.last_ack < options_.idle_after) {
      if (j.queued > window_of(j) && !fits_grown(key, j)) break;
      set_window(key, j, j.window_batches + 1);
    }
  }
}

void Dispatcher::dropped(JobKey key, uint64_t items) {
  Job& j = jobs_.at(key);
  j.front_moved = true;
  set_queued(key, j, j.queued - std::min(items, j.queued));
  fit_reservation(key, j);
}

bool Dispatcher::full(JobKey key) const { return is_full(jobs_.at(key)); }

bool Dispatcher::is_full(const Job& j) { return j.queued >= j.horizon; }

uint64_t Dispatcher::catch_up_of(const Job& j) {
  const uint64_t window = window_of(j);
  return j.horizon > window ? std::max<uint64_t>(j.config.batch, j.horizon - window) : j.config.batch;
}

uint64_t Dispatcher::batch_bound(const Job& j) {
  return j.config.batch_bound != 0 ? j.config.batch_bound : uint64_t{j.config.batch} * j.config.item_bytes;
}

uint64_t Dispatcher::reservation(JobKey key, Job& j, uint64_t window_items) const {
  // The window's decided items (at least those its consumer holds) at their own sizes; when the
  // queue's last batch is being decided inside the window, that batch at its bound instead: the
  // items decided for it take no more (the owner counts an item once per job, and a batch holds
  // at most `batch` items), so deciding them never raises the reservation above what admitting
  // the batch checked.
  const uint64_t b = j.config.batch;
  const uint64_t n = std::min(j.queued, std::max(window_items, j.in_flight));
  const bool open = n == j.queued && n % b != 0;
  const uint64_t exact_items = open ? n - n % b : n;
  uint64_t exact = exact_items * j.config.item_bytes;
  if (item_bytes_) {
    if (j.front_moved || exact_items != j.exact_items) {
      j.exact_items = exact_items;
      j.exact_bytes = exact_items == 0 ? 0 : item_bytes_(key, exact_items);
      j.front_moved = false;
    }
    exact = j.exact_bytes;
  }
  return exact + (open ? batch_bound(j) : 0);
}

void Dispatcher::update_reservation(JobKey key, Job& j) {
  reserved_ -= j.reserved;
  j.reserved = reservation(key, j, window_of(j));
  reserved_ += j.reserved;
}

void Dispatcher::fit_reservation(JobKey key, Job& j) {
  // A job with skipped entries pending keeps its window (see set_shrinkable): its excess lasts
  // until they are passed over.
  if (!j.shrinkable) return;
  bool shrank = false;
  while (reserved_ > capacity_ && j.window_batches > 0) {
    set_window(key, j, j.window_batches - 1);
    shrank = true;
  }
  // Its window no longer holds a whole batch beyond what its consumer holds: its consumer will
  // wait for room. Blocked, it starves ("Idle jobs") until its window can grow. So also when its
  // consumer holds all it decided: what it decides next lies beyond the window, and a window
  // that holds nothing loads nothing, so no acknowledgement would ever come to grow it back.
  if (shrank && window_of(j) < j.in_flight + j.config.batch) j.blocked = true;
}

void Dispatcher::set_queued(JobKey key, Job& j, uint64_t queued) {
  j.queued = queued;
  update_reservation(key, j);
}

bool Dispatcher::may_overrun(const Job& j) { return j.waiting && j.queued < j.horizon + j.config.batch; }

bool Dispatcher::can_take(const Job& j, uint64_t admitted) const {
  const uint64_t b = j.config.batch;
  if (j.stopped) return false;
  if (is_full(j) && !may_overrun(j)) return false;
  // Starting a new batch of the window reserves a whole batch, on top of what is reserved and of
  // the batches that jobs admitted earlier in the same round are starting, whatever lets the job
  // take the item (its credit, a catch-up, or waiting on loads); plan items take none.
  return j.queued >= window_of(j) || j.queued % b != 0 ||
         reserved_ + admitted + batch_bound(j) <= capacity_;
}

double Dispatcher::shown_rate(JobKey key, double now) const {
  const Job& j = jobs_.at(key);
  const double idle = now - j.last_ack;
  return idle > 0 ? std::min(j.rate, double(j.config.batch) / idle) : j.rate;
}

double Dispatcher::median_rate(uint32_t group) const {
  std::vector<double> rates;
  for (const auto& [slot, key] : groups_.at(group)) {
    const double r = jobs_.at(key).rate;
    if (r > 0) rates.push_back(r);
  }
  return median_of(rates);
}

double Dispatcher::pace(JobKey key) const {
  const Job& j = jobs_.at(key);
  return j.rate > 0 ? j.rate : median_rate(j.config.group);
}

double Dispatcher::due(JobKey key, double now) const {
  const double p = pace(key);
  return p > 0 ? now + double(jobs_.at(key).queued) / p : now;
}

void Dispatcher::advance(double now) {
  const double dt = std::max(0.0, now - last_);
  last_ = std::max(last_, now);
  // Rates first (all of them), so that a new job earns at this moment's median and the plans'
  // horizon sees every job's pace.
  for (auto& [key, j] : jobs_) {
    const double window = now - j.window_start;
    const bool first = j.rate == 0 && j.acked_in_window >= 2 * uint64_t{j.config.batch} && window >= options_.first_window;
    if (window >= options_.rate_window || first) {
      const double instant = double(j.acked_in_window) / window;
      j.rate = j.rate == 0 ? instant : (1 - options_.smoothing) * j.rate + options_.smoothing * instant;
      // The plan's rate: for its first 1 / plan_smoothing samples their mean, each weighted by
      // the time it covers up to rate_window (a first sample of a few milliseconds weighs no more
      // than its length; a long pause, which the owner sees as one sample, no more than any other
      // sample); then a moving average of weight plan_smoothing.
      const double weight = std::min(window, options_.rate_window);
      j.plan_acked += j.acked_in_window;
      j.plan_weighted += instant * weight;
      j.plan_weights += weight;
      j.plan_rate = double(++j.plan_samples) * options_.plan_smoothing < 1
                        ? j.plan_weighted / j.plan_weights
                        : (1 - options_.plan_smoothing) * j.plan_rate + options_.plan_smoothing * instant;
      j.acked_in_window = 0;
      j.window_start = now;
    }
  }
  const double all_horizon = horizon_seconds();
  for (auto& [group, members] : groups_) {
    const double median = median_rate(group);
    // One horizon for the group, short enough for every job's max_plan: bounding one job's plan
    // alone would leave its decisions out of step with the others'. A job alone on its dataset has
    // nobody to share with within an epoch: it plans nothing.
    double horizon = members.size() < 2 ? 0 : all_horizon;
    for (const auto& [slot, key] : members) {
      const Job& j = jobs_.at(key);
      const double rate = j.rate > 0 ? j.rate : median;
      if (j.config.max_plan != 0 && rate > 0) horizon = std::min(horizon, double(j.config.max_plan) / rate);
    }
    // A job plans by its own plan rate once that is known, else at its known peers' median, else
    // not at all (see "Plan" in the header).
    std::vector<double> known_rates;
    for (const auto& [slot, key] : members) {
      const Job& j = jobs_.at(key);
      if (plan_known(j)) known_rates.push_back(j.plan_rate);
    }
    const double peers = median_of(known_rates);
    for (const auto& [slot, key] : members) {
      Job& j = jobs_.at(key);
      const double rate = j.rate > 0 ? j.rate : median;
      j.pace = rate;
      j.plan_basis = plan_known(j) ? j.plan_rate : peers;
      set_horizon(j, std::max(window_of(j), static_cast<uint64_t>(std::ceil(j.plan_basis * horizon))));
      // Credit is banked up to one batch, or one round interval's worth plus an item for a job
      // faster than a batch per interval. A full queue waits for its consumer, not for supply: it
      // banks at most the item that puts it in the next round once there is room, not a burst of
      // rounds of its own.
      const double cap = is_full(j) ? 1.0 : std::max(double(j.config.batch), rate * options_.round_interval + 1);
      j.credit = std::min(j.credit + earning(j, rate) * dt, cap);
    }
  }
}

void Dispatcher::set_horizon(Job& j, uint64_t target) const {
  // A job whose horizon rises decides the difference in rounds of its own, and one whose horizon
  // falls sits out the rounds until it has consumed the difference: either way the other jobs'
  // queues are at their horizons, so those items are decided for one job alone and not shared.
  // When jobs wait for loads their acknowledgements come in bursts and the 0.2 s rate samples
  // swing (in the ASan daemon, three jobs faster than two loaders: L/D far above RefCnt's with
  // horizons following every estimate, much closer to it following the slower one beyond a 25 %
  // band; docs/BENCHMARKS.md, "When the daemon is the bottleneck" and "The change").
  // So the horizon follows plan_basis (plan_rate once known, else the known peers' median): at
  // once while the job's plan rate is still the weighted mean of its first samples, then only
  // once off by more than plan_hysteresis.
  // A plan starting or ending, and a plan longer than the job's bound, take effect at once.
  const uint64_t window = window_of(j);
  const double h = 1 + options_.plan_hysteresis;
  const bool near = double(target) <= double(j.horizon) * h && double(target) * h >= double(j.horizon);
  const bool warming = double(j.plan_samples) * options_.plan_smoothing < 1;
  if (target <= window || j.horizon <= window || warming || !near) j.horizon = target;
  if (j.config.max_plan != 0) j.horizon = std::min(j.horizon, std::max(window, j.config.max_plan));
}

double Dispatcher::horizon_seconds() const {
  if (options_.fixed_horizon > 0) return options_.fixed_horizon;
  if (options_.plan_span <= 0) return 0;
  // What the plans help keep is the part of the cache that the windows' pinned items leave.
  double demand = 0;  // bytes per second the jobs access, at their paces
  double cache = double(options_.plan_cache != 0 ? options_.plan_cache : capacity_);
  for (const auto& [key, j] : jobs_) {
    const double item = double(std::max<uint64_t>(j.config.item_bytes, 1));
    demand += pace(key) * item;
    cache -= double(window_of(j)) * item;
  }
  if (demand <= 0 || cache <= 0) return 0;
  return std::min(kMaxPlanHorizon, options_.plan_span * cache / demand);
}

double Dispatcher::earning(const Job& j, double pace) const {
  // Credit at the job's pace keeps its queue where it is; with a plan it must be where its
  // horizon is (every job's plan the same time long, so that items decided in one round are
  // consumed together), so a job short of its horizon earns the shortfall over plan_settle
  // seconds on top. Without this the queues wander between the catch-up floor and the horizon
  // and shared items are consumed far apart (measured for three equal jobs: docs/BENCHMARKS.md,
  // "Design measurements quoted from the code").
  // Below full, so that it keeps joining rounds (a horizon below a batch: a window cut to none).
  if (j.horizon <= window_of(j) || j.horizon < j.config.batch) return pace;
  const uint64_t aim = j.horizon - j.config.batch;
  if (j.queued >= aim) return pace;
  return pace + double(aim - j.queued) / options_.plan_settle;
}

bool Dispatcher::is_filling(const Job& j) { return j.queued >= j.config.batch && j.queued < catch_up_of(j); }

bool Dispatcher::plan_known(const Job& j) const {
  return j.plan_rate > 0 && j.plan_acked >= uint64_t{options_.plan_batches} * j.config.batch;
}

double Dispatcher::plan_pace(const Job& j) { return j.plan_basis > 0 ? j.plan_basis : j.pace; }

double Dispatcher::plan_time(const Job& j) { return plan_pace(j) > 0 ? double(j.queued) / plan_pace(j) : 0; }

bool Dispatcher::is_due(const Job& j) {
  return j.credit >= 1.0 || j.queued < catch_up_of(j);  // a whole item of credit, or catching up
}

bool Dispatcher::may_form_rounds(double now) const {
  // The same moment as the last rounds (their sequence goes on), or a whole interval later; the
  // tolerance absorbs the rounding of a clock in steps of exactly the interval.
  return now == round_time_ || now >= round_time_ + options_.round_interval * (1 - 1e-9);
}

std::optional<Dispatcher::Round> Dispatcher::next_round(double now) {
  advance(now);
  balance_windows(now);
  if (!may_form_rounds(now)) return std::nullopt;
  std::vector<Job*> order;
  for (auto& [group, members] : groups_) {
    order.clear();
    for (const auto& [slot, key] : members) {
      if (now >= jobs_.at(key).not_before) order.push_back(&jobs_.at(key));  // "Starting together"
    }
    // Due jobs (a whole item of credit, or short of a batch) before the ones that would only
    // join, so a joiner never takes the last free batch from a job that is due; among them, the
    // jobs holding the fewest batches first, so a job just acknowledged down to nothing is not
    // kept waiting.
    std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
      return std::tuple(!is_due(*a), a->queued / a->config.batch, a->config.slot) <
             std::tuple(!is_due(*b), b->queued / b->config.batch, b->config.slot);
    });
    // While plans fill (a job joined, or the horizon grew), the jobs decide in the order of the
    // time their plans reach (queue / pace), not of their positions: jobs of different speeds
    // would otherwise share rounds for items they consume seconds apart. A round then holds the
    // jobs within one item's time of the earliest filling plan.
    double fill_time = kNever;
    for (const Job* j : order) {
      if (is_filling(*j) && can_take(*j, 0)) fill_time = std::min(fill_time, plan_time(*j));
    }
    auto in_step = [&](const Job& j) {
      return fill_time == kNever || plan_time(j) <= fill_time + (plan_pace(j) > 0 ? 1 / plan_pace(j) : 0);
    };
    Round round;
    round.group = group;
    bool due = false;
    uint64_t admitted = 0;
    // While a job (of any group) is short of a batch and finds no room for it, no job that holds a
    // batch starts another: the room consumers free goes to the jobs short of one (a job of small
    // batches would otherwise take every bit of room freed and starve a job of large ones).
    for (const Job* j : order) {
      const bool starts_batch = j->queued < window_of(*j) && j->queued % j->config.batch == 0;
      if (any_starving_ && starts_batch && j->queued >= j->config.batch) continue;
      const bool follows = j->waiting || j->pace == 0;  // joins every round ("Supply", "Starting together")
      if ((j->credit > 0 || is_due(*j) || follows) && in_step(*j) && can_take(*j, admitted)) {
        round.slots.push_back(j->config.slot);
        due = due || (is_due(*j) && !is_full(*j));  // a full job only joins (see "Supply")
        if (starts_batch) admitted += batch_bound(*j);
      }
    }
    if (due) {
      std::sort(round.slots.begin(), round.slots.end());
      round_time_ = now;
      return round;
    }
  }
  return std::nullopt;
}

double Dispatcher::next_due(double now) const {
  const double due = next_credit_due(now);
  return due == kNever || may_form_rounds(due) ? due : round_time_ + options_.round_interval;
}

double Dispatcher::next_credit_due(double now) const {
  double due = kNever;
  for (const auto& [group, members] : groups_) {
    const double median = median_rate(group);
    for (const auto& [slot, key] : members) {
      const Job& j = jobs_.at(key);
      if (j.starving_since != kNever) {
        // Waiting for room: for an idle window to reclaim, or for the moment it is reported.
        due = std::min(due, std::max(now, j.starving_since + options_.starve_after));
        for (const auto& [other_key, k] : jobs_) {  // the windows balance_windows may shrink
          if (&k != &j && k.shrinkable && !k.stopped && k.window_batches > held_batches(k)) {
            due = std::min(due, std::max(now, k.last_ack + options_.idle_after));
          }
        }
      }
      if (now < j.not_before) {  // still gathering: due when that ends, not before
        due = std::min(due, j.not_before);
        continue;
      }
      // Stopped, full (a full job only joins rounds), or waiting for room: only an event helps.
      if (is_full(j) || !can_take(j, 0)) continue;
      if (is_due(j)) return now;
      const double rate = earning(j, j.rate > 0 ? j.rate : median);
      if (rate > 0) due = std::min(due, now + (1.0 - j.credit) / rate);
      // A new job's first rate estimate: due when its first window closes.
      if (j.rate == 0 && j.acked_in_window >= 2 * uint64_t{j.config.batch}) {
        due = std::min(due, std::max(now, j.window_start + options_.first_window));
      }
    }
  }
  return due;
}

double Dispatcher::request_rate(uint32_t group, uint64_t signature, const RemainingSets& sets) const {
  auto g = groups_.find(group);
  if (g == groups_.end()) return 0;
  double rate = 0;
  for (uint64_t rest = signature; rest != 0; rest &= rest - 1) {
    const JobSlot slot = std::countr_zero(rest);
    auto it = g->second.find(slot);
    if (it != g->second.end()) rate += jobs_.at(it->second).rate / double(sets.size(slot));
  }
  return rate;
}

}  // namespace joader
