// IdleExit: when a daemon started with `joader serve --idle-exit SECONDS` has had no job for that
// long and should exit (the daemon a loader starts by itself does, so that nothing outlives the
// work by more than that; docs/DAEMON.md, "Started by the first loader").
//
// The rule: the daemon is idle while no job is registered; it exits once an idle spell, counted
// from its start or from the last observation that saw a job, reaches `seconds`. Any job, even one
// that appears and ends between two observations, starts the count again. Time is passed in, so
// the rule is tested on a virtual clock. Not thread-safe: one caller (the daemon's main thread).
#pragma once

#include <chrono>
#include <cstdint>

namespace joader {

class IdleExit {
 public:
  using Clock = std::chrono::steady_clock;

  // seconds <= 0: never due.
  IdleExit(double seconds, Clock::time_point start) : seconds_(seconds), idle_since_(start) {}

  // Observes the daemon at `now`: `jobs` registered now, `jobs_opened` the count of jobs ever
  // opened (so that one that came and went between observations counts as activity). Returns
  // whether the daemon should exit now.
  bool due(uint64_t jobs, uint64_t jobs_opened, Clock::time_point now);

  double seconds() const { return seconds_; }

 private:
  double seconds_;
  Clock::time_point idle_since_;
  uint64_t jobs_opened_ = 0;
};

}  // namespace joader
