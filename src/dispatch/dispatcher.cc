#include "dispatch/dispatcher.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <tuple>

namespace joader {

Dispatcher::Dispatcher(uint64_t capacity, double now, DispatcherOptions options)
    : options_(options), capacity_(capacity), last_(now) {}

void Dispatcher::add_job(JobKey key, const JobConfig& config, double now) {
  if (config.batch == 0 || config.prefetch == 0) throw std::invalid_argument("batch and prefetch must be at least 1");
  if (jobs_.count(key) != 0) throw std::invalid_argument("job added twice");
  Job& j = jobs_[key];
  j.config = config;
  j.window_start = now;
  groups_[config.group][config.slot] = key;
}

void Dispatcher::remove_job(JobKey key) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  set_queued(it->second, 0);
  auto& group = groups_[it->second.config.group];
  group.erase(it->second.config.slot);
  if (group.empty()) groups_.erase(it->second.config.group);
  jobs_.erase(it);
}

void Dispatcher::stop_job(JobKey key) { jobs_.at(key).stopped = true; }

void Dispatcher::decided(JobKey key, uint64_t items) {
  Job& j = jobs_.at(key);
  // Items that bring a queue up to one batch are its catch-up: they cost no credit, so that a job
  // whose consumer outruns its credit is supplied its batch *and* its credit, and its measured
  // rate (what it consumed) can grow past what it was credited.
  const uint64_t free = j.queued < j.config.batch ? std::min<uint64_t>(items, j.config.batch - j.queued) : 0;
  j.credit -= double(items - free);
  set_queued(j, j.queued + items);
}

void Dispatcher::acknowledged(JobKey key, uint64_t items) {
  Job& j = jobs_.at(key);
  set_queued(j, j.queued - std::min(items, j.queued));
  j.acked_in_window += items;
}

void Dispatcher::dropped(JobKey key, uint64_t items) {
  Job& j = jobs_.at(key);
  set_queued(j, j.queued - std::min(items, j.queued));
}

bool Dispatcher::full(JobKey key) const { return is_full(jobs_.at(key)); }

bool Dispatcher::is_full(const Job& j) { return j.queued >= uint64_t{j.config.prefetch} * j.config.batch; }

uint64_t Dispatcher::reservation(const Job& j) const {
  const uint64_t b = j.config.batch;
  return (j.queued + b - 1) / b * b * j.config.item_bytes;
}

void Dispatcher::set_queued(Job& j, uint64_t queued) {
  reserved_ -= reservation(j);
  j.queued = queued;
  reserved_ += reservation(j);
}

bool Dispatcher::can_take(const Job& j, uint64_t admitted) const {
  const uint64_t b = j.config.batch;
  if (j.stopped || is_full(j)) return false;
  // Starting a new batch reserves a whole batch, on top of what is reserved and of the batches
  // that jobs admitted earlier in the same round are starting.
  return j.queued % b != 0 || reserved_ + admitted + b * j.config.item_bytes <= capacity_;
}

double Dispatcher::median_rate(uint32_t group) const {
  std::vector<double> rates;
  for (const auto& [slot, key] : groups_.at(group)) {
    const double r = jobs_.at(key).rate;
    if (r > 0) rates.push_back(r);
  }
  if (rates.empty()) return 0;
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  return rates[rates.size() / 2];
}

void Dispatcher::advance(double now) {
  const double dt = std::max(0.0, now - last_);
  last_ = std::max(last_, now);
  for (auto& [group, members] : groups_) {
    // Rates first (all of the group's), so that a new job earns at this moment's median.
    for (const auto& [slot, key] : members) {
      Job& j = jobs_.at(key);
      const double window = now - j.window_start;
      const bool first = j.rate == 0 && j.acked_in_window >= 2 * uint64_t{j.config.batch} && window >= options_.first_window;
      if (window >= options_.rate_window || first) {
        const double instant = double(j.acked_in_window) / window;
        j.rate = j.rate == 0 ? instant : (1 - options_.smoothing) * j.rate + options_.smoothing * instant;
        j.acked_in_window = 0;
        j.window_start = now;
      }
    }
    const double median = median_rate(group);
    for (const auto& [slot, key] : members) {
      Job& j = jobs_.at(key);
      const double rate = j.rate > 0 ? j.rate : median;
      // Credit is banked up to one batch, or one round interval's worth plus an item for a job
      // faster than a batch per interval. A full queue waits for its consumer, not for supply: it
      // banks at most the item that puts it in the next round once there is room, not a burst of
      // rounds of its own.
      const double cap = is_full(j) ? 1.0 : std::max(double(j.config.batch), rate * options_.round_interval + 1);
      j.credit = std::min(j.credit + rate * dt, cap);
    }
  }
}

bool Dispatcher::is_due(const Job& j) {
  return j.credit >= 1.0 || j.queued < j.config.batch;  // a whole item of credit, or short of a batch
}

bool Dispatcher::may_form_rounds(double now) const {
  // The same moment as the last rounds (their sequence goes on), or a whole interval later; the
  // tolerance absorbs the rounding of a clock in steps of exactly the interval.
  return now == round_time_ || now >= round_time_ + options_.round_interval * (1 - 1e-9);
}

std::optional<Dispatcher::Round> Dispatcher::next_round(double now) {
  advance(now);
  if (!may_form_rounds(now)) return std::nullopt;
  std::vector<Job*> order;
  for (auto& [group, members] : groups_) {
    order.clear();
    for (const auto& [slot, key] : members) order.push_back(&jobs_.at(key));
    // Due jobs (a whole item of credit, or short of a batch) before the ones that would only
    // join, so a joiner never takes the last free batch from a job that is due; among them, the
    // jobs holding the fewest batches first, so a job just acknowledged down to nothing is not
    // kept waiting.
    std::sort(order.begin(), order.end(), [](const Job* a, const Job* b) {
      return std::tuple(!is_due(*a), a->queued / a->config.batch, a->config.slot) <
             std::tuple(!is_due(*b), b->queued / b->config.batch, b->config.slot);
    });
    Round round;
    round.group = group;
    bool due = false;
    uint64_t admitted = 0;
    for (const Job* j : order) {
      if ((j->credit > 0 || is_due(*j)) && can_take(*j, admitted)) {
        round.slots.push_back(j->config.slot);
        due = due || is_due(*j);
        if (j->queued % j->config.batch == 0) admitted += uint64_t{j->config.batch} * j->config.item_bytes;
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
      if (!can_take(j, 0)) continue;  // stopped, full, or waiting for room: only an event helps
      if (is_due(j)) return now;
      const double rate = j.rate > 0 ? j.rate : median;
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
