// Dispatcher: decides *when* jobs take part in a sampler round, and which ones. The one rule for
// the daemon (src/server/serving_state.cc drives it, on the clock the Engine passes) and the simulator
// (src/sim/simulator.cc drives it on its virtual clock). It holds numbers only — credits, rates,
// queue lengths, reservations; the owner keeps the decided items themselves.
//
// Clock: the owner passes the time (seconds, any origin, never decreasing) to every call that
// needs it; there is no clock inside, so tests and the simulator run it on virtual time.
//
// Pacing. Jobs are grouped (a group = one dataset = one sampler). Each job earns credit at its
// consumption rate, measured from its acknowledgements: a moving average over `rate_window`
// seconds (smoothing 0.3), with a first estimate once it has acknowledged two batches over at
// least `first_window` seconds; until then it earns at the median rate of its group's measured
// jobs (with none measured, it follows its group's rounds: see "Starting together"). Credit is
// capped at one batch (or one round interval's worth plus an item, if that is more), and at one
// item while the job's queue is full. A job whose queue (decided, not yet acknowledged items) is
// below one batch catches up: it is due, and the items that bring it up to one batch cost no
// credit (so a job whose consumer outruns its credit is supplied more than its credit, and its
// measured rate can grow).
// A round of a group is due when one of its jobs that may take an item has credit ≥ 1 or is short
// of a batch; every job of the group with positive credit that may take an item joins it
// (borrowing up to one item), so that jobs of equal speed land in the same rounds whatever their
// jitter.
//
// Plan. A job's queue holds up to its horizon of decided items: what it consumes in the plans'
// horizon, at least its window of `prefetch` batches and at most `max_plan`. That count follows a
// slower estimate of the job's rate than its pace (plan_smoothing) and moves only once off by more
// than plan_hysteresis: a horizon that moves makes its job decide alone (see set_horizon).
// A job plans by its own rate only once that rests on plan_batches acknowledged batches (its
// samples weighted by the time each covers, at most a rate window: see advance): a first sample
// of a batch or two is off by up to 2x (a burst of loads, a consumer scheduled late), and the
// longer plan it set was filled alone. Until then it plans at the median rate of its peers whose
// rates are known (a job joining running peers), or not at all (jobs started together, whose
// plans then begin together).
// The horizon is in seconds, the same for every job, so that jobs of different speeds decide, in
// a shared round, items they consume at about the same moment: `fixed_horizon` if set, else the
// time the jobs take to access `plan_span` cache-fulls of items (plan_span · (cache bytes − the
// windows' bytes) / Σ over all jobs of pace · item_bytes), at most kMaxPlanHorizon; and short
// enough for every job's max_plan. A job whose queue is below its horizon less a batch earns, on
// top of its pace, the shortfall over `plan_settle` seconds, so that every job's plan stays about
// the horizon long (a job at its horizon stops joining rounds, hence the batch below it). A job alone on its dataset plans nothing (within an epoch it has
// nobody to share with). docs/DAEMON.md says why plans are never re-decided. The first `prefetch` batches of the queue are its window: loaded (or loading) and
// pinned. The rest is its plan: ids only, loaded when acknowledgements move them into the window.
// A job whose queue is more than a window below its horizon (one that just joined) fills its
// plan at once, at no credit, down to a window below the horizon; above that it is paced by
// credit like any job, so that jobs of equal speed keep sharing rounds at the plan's end.
//
// Memory. A job may take an item while its queue is below its horizon. Its reservation is what
// the decided items of its window take (the owner's item_bytes: the oldest min(queue, window)
// items but a partly decided last batch), plus, while a batch of the window is partly decided,
// what any one batch of its items may take (batch_bound: items of different sizes are bounded by
// the job's largest ones until they are decided, then reserve their own size); plan items reserve
// nothing. Without item_bytes every item takes JobConfig::item_bytes. The items its consumer holds
// (delivered, not acknowledged) are reserved whatever its window. When an acknowledgement brings
// plan items into a window and they take more than the room left (or another job keeps an excess:
// set_shrinkable), the window shrinks by batches, down to none; if it no longer holds a whole batch
// beyond what its consumer holds, the job is *blocked*: it starves (see "Idle jobs") until its
// window can grow by a batch — while decided items wait for room, or its consumer, short of a
// batch, waits for what the job decides next; not while its consumer is busy with all it decided,
// nor once it failed (fail_job).
// A job starts a batch only when that fits in `capacity` on top of every reservation *and* of the
// batches that the jobs admitted before it in the same round are starting (checking each against
// the start-of-round total once let two jobs share the last free batch; see docs/DAEMON.md). When
// fewer new batches fit than jobs want, the jobs holding the fewest batches are admitted first.
//
// Idle jobs. A job whose queue is below one batch and that cannot start it for lack of room
// starves. Then the windows of idle jobs (nothing acknowledged for idle_after seconds; a notebook's
// open loaders), the longest idle first, shrink to the batches their consumers hold (delivered,
// not acknowledged; at least one) until the starving job's batch fits; the owner unpins what left
// a window (take_window_changes) and keeps it decided. A shrunk window grows back, a batch at a
// time as room allows, once its job acknowledges again and nobody starves. A job short of a batch
// that finds no room goes first: behind it no job starts a batch, so the room that consumers free
// comes to it. A running job (one that acknowledged within idle_after) whose window cannot fill
// for want of room shrinks idle windows the same way, so that it runs with its whole prefetch
// while idle consumers (a val loader during training) wait; for it, a job is idle only after
// idle_after and four of its own batch intervals without an acknowledgement. A job that starves for starve_after seconds while nobody acknowledges anything
// (nothing left to reclaim, no room coming) is reported by starving(), for the owner to fail with
// an error that names the jobs holding the room.
//
// Supply. When the loads are slower than the consumers (a slow or busy machine, a sanitizer
// build), every job's next batch waits on loads, and the jobs' acknowledgements arrive when the
// shared loads finish, a few milliseconds apart; their credits, measured from those bursts, drift
// out of phase. Rounds formed by whichever job had credit then left the others out (measured in
// an ASan daemon beside two busy loops, three identical jobs: 657 rounds of one job, 954 of two,
// 389 of three, nearly always for want of credit, and L/D well above the 1/3 of full sharing;
// docs/BENCHMARKS.md, "Closed (measured 2026-12-03): jobs waiting on loads join every round").
// A job whose next batch waits on loads (set_waiting) is held back by the loads, not by its pace:
// it joins every round of its group, credit or not (owing at most one item), and even with a full
// queue, by up to one batch beyond its horizon; those items are plan items (ids only) and reserve
// nothing. It never makes a round due by that: a full job only joins the rounds its peers form. A
// horizon is never below its job's window (a shrunk window that grows back raises it), and a batch
// that a job starts inside its window is reserved whatever lets it take the item: once, a horizon
// left at a shrunk window's size let a waiting job start a batch that did not fit.
//
// Starting together. Jobs started together (a launcher's k jobs, DDP ranks, a sweep) register
// a few milliseconds apart, and their first acknowledgements come as far apart. If each decided
// its first items as it came, each would start on items decided for a different set of jobs (the
// first job's first batch for it alone, the next ones' for it and the first, ...). Those items
// reach the others at uniformly random points of their epochs (exactness), by which time the cache
// may have evicted them, and the jobs' remaining sets, now different, keep splitting rounds all
// epoch. Two rules keep them together:
// - a job joining a group none of whose jobs runs yet (none has a measured rate) opens a
//   gathering of join_gather seconds (or joins the one open): it joins no round before the
//   gathering ends, so the jobs that came within it start in the same rounds; the cost is up to
//   join_gather on a job's first batch. Its rate is measured from the gathering's end (counting
//   the gathering, the first estimate would be low and the horizon growing from it would make
//   the job decide alone: under `planned`, L/D 0.40 against 0.34). A job joining running peers
//   starts at once: they do not wait for it, and delaying it only put its plan out of step with
//   theirs (S2 under `planned`: 0.565 → 0.576 when it waited);
// - a job with no pace yet (its rate unmeasured, and no measured peer) joins every round of its
//   group while it may take an item, owing nothing: its consumer's speed is unknown, and its
//   peers', the same jobs started together, are the best guess.
// Simulated, 4 identical jobs on 2000 items, a 400-item cache, mean of 8 seeds (BENCHMARKS.md,
// "Jobs started together"): starts 1 ms apart L/D 0.313 → 0.267, 0/3/7/30 ms 0.306 → 0.250;
// with ±30 % jitter per batch 0.292-0.327 → 0.262-0.281.
//
// Waking: next_due() tells the owner when a round will next be due if nothing happens; only an
// event (an acknowledgement, a job joining or leaving) can make one due earlier. An idle daemon,
// or one whose jobs all have full queues, therefore sleeps until such an event. Rounds are formed
// at most once per `round_interval` (1 ms): all the rounds due at that moment, one after another.
//
// Not thread-safe: the owner serialises calls (the daemon holds its engine mutex).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "common/types.h"
#include "sampler/remaining_sets.h"

namespace joader {

// The plans' span (cache-fulls of accesses decided ahead) under the `planned` cache policy, and
// the longest horizon the span may give: rate estimates are never exact, and two jobs' plans of
// equal time drift apart in proportion to their length (docs/SIMULATOR.md, "Plans").
inline constexpr double kDefaultPlanSpan = 8.0;
inline constexpr double kMaxPlanHorizon = 4.0;

struct DispatcherOptions {
  double rate_window = 0.2;   // seconds per rate sample
  double first_window = 0.02; // the shortest window for a new job's first estimate
  double smoothing = 0.3;     // weight of the newest sample
  // Rounds are formed at most once per interval (all that are due then, one after the other), so
  // that jobs whose acknowledgements arrive within it share rounds — the simulator's step. Waking
  // on every acknowledgement instead would give each job rounds of its own and lose the sharing.
  double round_interval = 1e-3;
  // Plans (see "Plan" above): 0 = none. plan_cache: the cache's size in item_bytes' unit (0: the
  // capacity). fixed_horizon: seconds, instead of the span rule (the simulator's `horizon`).
  double plan_span = 0;
  uint64_t plan_cache = 0;
  double fixed_horizon = 0;
  double plan_settle = 0.1;  // seconds over which a job short of its horizon earns the shortfall
  // A plan's length in items follows a slower rate estimate than credit does (weight of the
  // newest sample), and moves only once off its target by more than plan_hysteresis: see
  // set_horizon.
  double plan_smoothing = 0.05;
  double plan_hysteresis = 0.25;
  uint32_t plan_batches = 8;  // batches a job's plan rate must rest on before it plans (see "Plan")
  // Idle jobs (see "Idle jobs" above): a job that has acknowledged nothing for idle_after seconds
  // may give up its window down to what its consumer holds when another job starves for room; a
  // job that starves starve_after seconds with nothing left to reclaim, while no job acknowledges
  // anything, is reported by starving().
  double idle_after = 1.0;
  double starve_after = 10.0;
  // Starts (see "Starting together" above): a job joins no round until join_gather seconds after
  // the first job of the same gathering joined its group.
  double join_gather = 0.02;
};

class Dispatcher {
 public:
  using JobKey = uint64_t;  // the owner's name for a job
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  struct JobConfig {
    uint32_t group = 0;         // the job's dataset: rounds are per group
    JobSlot slot = 0;           // its slot in the group's sampler
    uint32_t batch = 1;         // items per batch (≥ 1)
    uint32_t prefetch = 4;      // batches loaded ahead: the job's window (≥ 1)
    uint64_t item_bytes = 0;    // its mean item size (plans), and what each item reserves without ItemBytes
    // The most items it decides ahead (one epoch: its subset's size); 0: no bound.
    uint64_t max_plan = 0;
    // When items differ in size: what any one batch of the job's items may take (the sum of the
    // batch largest of its subset); 0: batch · item_bytes.
    uint64_t batch_bound = 0;
  };
  // The bytes of a job's `items` oldest decided items (those it has not acknowledged and that were
  // not dropped, in the order it consumes them), as the owner holds them when it calls decided(),
  // acknowledged(), dropped() or set_window's callers: see "Memory".
  using ItemBytes = std::function<uint64_t(JobKey job, uint64_t items)>;
  struct Round {
    uint32_t group = 0;
    std::vector<JobSlot> slots;  // ascending
  };

  // `capacity`: bytes that reservations may use in all (the arena); `now`: the current time.
  Dispatcher(uint64_t capacity, double now, DispatcherOptions options = {});

  // Reservations by the items' own sizes (see "Memory"); set before the first job is added.
  void set_item_bytes(ItemBytes item_bytes) { item_bytes_ = std::move(item_bytes); }

  void add_job(JobKey job, const JobConfig& config, double now);
  // The job leaves: its queue and reservation are dropped. Unknown keys are ignored.
  void remove_job(JobKey job);
  // The job takes no more items (its sampler finished); its reservation stays until its items are
  // acknowledged or it is removed.
  void stop_job(JobKey job);
  // The job failed: as stop_job, and it no longer starves nor grows its window, since nothing it
  // decided will be delivered (its consumer is told of the failure and closes it). Its reservation
  // stays until it is removed: the owner keeps its items pinned until then.
  void fail_job(JobKey job);

  // `items` decided for the job (in a round): they join its queue and spend its credit.
  void decided(JobKey job, uint64_t items);
  // `items` of the job's queue were consumed and acknowledged at `now` (default: the time of the
  // last next_round): they count for its rate.
  void acknowledged(JobKey job, uint64_t items, double now = -1);
  // Whether the job's window may shrink for a starving job (the owner can unpin what leaves it).
  void set_shrinkable(JobKey job, bool shrinkable);
  // `items` left the job's queue without being consumed (dropped, skipped).
  void dropped(JobKey job, uint64_t items);
  // `items` of the job's queue were handed to its consumer; they stay in its window (pinned)
  // until acknowledged.
  void delivered(JobKey job, uint64_t items);
  // Whether the job's next batch waits on loads: an item of it is still being loaded (see
  // "Supply" above). Its owner says so as that changes.
  void set_waiting(JobKey job, bool waiting);

  // The jobs whose window (window()) shrank or grew since the last call, once each: the owner
  // unpins what left a window, or loads what entered it.
  std::vector<JobKey> take_window_changes();
  // Jobs that have starved for room (see "Idle jobs") for starve_after seconds with nothing left
  // to reclaim, as of the last next_round().
  std::vector<JobKey> starving() const;
  // Seconds since the job last acknowledged a batch (or joined), as of the last next_round().
  double idle_seconds(JobKey job) const { return last_ - jobs_.at(job).last_ack; }
  // The rate to show for a job at `now`: its measured rate (rate()), but never more than one batch
  // per second since its last acknowledgement, so that a stalled job's rate falls towards 0
  // rather than keeping the last value measured.
  double shown_rate(JobKey job, double now) const;

  // Earns credit up to `now` (once per distinct `now`), then returns the next round that is due,
  // if any. Call it again after the sampler decided (and decided() was told) until it returns
  // nothing: rounds due at the same moment come one after the other.
  std::optional<Round> next_round(double now);
  // When a round will next be due if no event happens: `now` or later; kNever if only an event
  // can make one due. Valid after next_round(now) returned nothing.
  double next_due(double now) const;

  // The request rate (items/s) for an item of the given signature in a group: the sum over the
  // jobs whose remaining set holds it of rate / |R_j| — the `rate` cache policy's λ.
  double request_rate(uint32_t group, uint64_t signature, const RemainingSets& sets) const;

  uint64_t reserved_bytes() const { return reserved_; }
  // Whether a job keeps its window whatever it reserves (skipped entries pending: set_shrinkable),
  // so that the reservations may exceed the capacity until they are passed over.
  bool any_unshrinkable() const;
  uint64_t capacity() const { return capacity_; }
  uint64_t queued(JobKey job) const { return jobs_.at(job).queued; }
  double rate(JobKey job) const { return jobs_.at(job).rate; }
  // The slower estimate of the job's rate (DispatcherOptions::plan_smoothing), which its horizon
  // follows once known (see "Plan").
  double plan_rate(JobKey job) const { return jobs_.at(job).plan_rate; }
  // The rate the job earns credit at: its own once measured, else its group's median (0 if none).
  double pace(JobKey job) const;
  // When the job should consume an item decided for it now (behind its whole queue), at its pace.
  double due(JobKey job, double now) const;
  double credit(JobKey job) const { return jobs_.at(job).credit; }
  // Whether the job's queue holds all it may (its horizon).
  bool full(JobKey job) const;
  // Items of the job's queue that are in its window (prefetch · batch): the oldest ones.
  uint64_t window(JobKey job) const { return window_of(jobs_.at(job)); }

 private:
  struct Job {
    JobConfig config;
    bool stopped = false;
    bool failed = false;  // fail_job: stopped, and waits for nothing
    uint64_t queued = 0;
    double credit = 0, rate = 0;
    double plan_rate = 0;  // the slower estimate of its rate that plans use (plan_smoothing)
    uint64_t plan_samples = 0;
    uint64_t plan_acked = 0;  // items acknowledged in its rate samples so far
    double plan_weighted = 0, plan_weights = 0;  // Σ sample rate × weight, Σ weight (see advance)
    double plan_basis = 0;  // the rate its horizon follows (see advance); 0: no plan yet
    uint64_t horizon = 0;  // items: at least the window; set as the job's pace changes
    uint64_t reserved = 0;  // its part of reserved_ (reservation() when last updated)
    // The exact part of `reserved`: the bytes of its `exact_items` oldest items, recomputed only
    // when that count changes or the queue's front moved (an acknowledgement or a drop).
    uint64_t exact_items = 0, exact_bytes = 0;
    bool front_moved = false;
    // Its window was cut below a whole batch beyond what its consumer holds because the
    // reservations did not fit (see "Memory"): it starves, as that says, until its window grows.
    bool blocked = false;
    double pace = 0;       // the rate it earns credit at (rate, or its group's median)
    uint64_t acked_in_window = 0;
    double window_start = 0;
    uint32_t window_batches = 0;  // its window now: config.prefetch, or fewer while shrunk
    uint64_t in_flight = 0;       // delivered to its consumer, not yet acknowledged
    double last_ack = 0;          // when it last acknowledged (or joined)
    double ack_gap = 0;           // the time between its last two acknowledgements
    double starving_since = kNever;
    bool shrinkable = true;
    bool waiting = false;  // its next batch waits on loads (set_waiting)
    double not_before = 0;  // the end of its start's gathering: it joins no round before
  };

  static bool is_due(const Job& j);
  static bool is_full(const Job& j);  // its queue holds its horizon
  static uint64_t window_of(const Job& j) { return uint64_t{j.window_batches} * j.config.batch; }
  // The fewest batches its window may shrink to: what its consumer holds, at least one.
  static uint32_t held_batches(const Job& j);
  // Short of a batch and no room to start it, or blocked (Job::blocked); never once failed.
  bool is_starving(const Job& j) const;
  // Whether the job's window may grow by a batch: the reservation that gives fits.
  bool fits_grown(JobKey key, Job& j) const;
  // A blocked job's window grows by a batch if that fits (unblocking it once it holds a whole
  // batch beyond what its consumer holds); returns whether it did.
  bool grow_blocked(JobKey key, Job& j);
  void set_window(JobKey key, Job& j, uint32_t batches);
  // Shrinks idle windows for starving jobs, grows shrunk windows back where room allows.
  void balance_windows(double now);
  // Below this many queued items a job catches up at no credit: one batch, or a window below
  // its horizon when it has a plan.
  static uint64_t catch_up_of(const Job& j);
  static bool is_filling(const Job& j);     // catching up on its plan (beyond one batch)
  static double plan_pace(const Job& j);    // the rate its horizon follows (plan_basis, or pace)
  bool plan_known(const Job& j) const;      // its plan rate rests on plan_batches batches
  static double plan_time(const Job& j);    // seconds its queue lasts at that rate
  double earning(const Job& j, double pace) const;  // credit per second
  // What the job reserves with a window of `window_items` (its exact part cached in the Job).
  uint64_t reservation(JobKey key, Job& j, uint64_t window_items) const;
  void update_reservation(JobKey key, Job& j);  // after its queue or window changed
  // Shrinks the window, a batch at a time down to what its consumer holds, while the reservations
  // exceed the capacity (plan items of larger sizes entered it).
  void fit_reservation(JobKey key, Job& j);
  static uint64_t batch_bound(const Job& j);  // what starting a batch reserves
  void set_queued(JobKey key, Job& j, uint64_t queued);
  bool can_take(const Job& j, uint64_t admitted) const;
  static bool may_overrun(const Job& j);  // full, and may still join rounds (see "Supply")
  void advance(double now);
  bool may_form_rounds(double now) const;
  double next_credit_due(double now) const;  // next_due, the round interval aside
  double horizon_seconds() const;             // the plans' horizon now (0: no plans)
  void set_horizon(Job& j, uint64_t target) const;  // j's horizon (items) towards target
  double median_rate(uint32_t group) const;

  const DispatcherOptions options_;
  const uint64_t capacity_;
  ItemBytes item_bytes_;
  uint64_t reserved_ = 0;
  double last_ = 0;
  double round_time_ = -kNever;  // when rounds were last formed
  std::map<JobKey, Job> jobs_;
  std::vector<JobKey> window_changes_;
  bool any_starving_ = false;  // as of the last balance_windows
  std::map<uint32_t, std::map<JobSlot, JobKey>> groups_;
};

}  // namespace joader
