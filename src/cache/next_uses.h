// NextUses: when each item will next be needed, as far as the jobs' plans tell. The dispatcher
// decides ids ahead of their loads (dispatch/dispatcher.h, "Plan"); each such decision is
// recorded here with its due time (when its job is expected to consume it) until it enters its
// job's window (and is loaded or pinned) or its job leaves. The `planned` cache policy evicts by
// it: the item needed last goes first.
//
// Due times are in any unit that grows with time (the daemon and the simulator use microseconds
// on the dispatcher's clock). An item may be planned by several jobs, or twice by one job across
// an epoch boundary; next_use() is the earliest of its due times.
//
// Not thread-safe: the owner serialises calls.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

#include "cache/eviction_policy.h"

namespace joader {

// A due time in NextUses' unit as the daemon and the simulator use it: seconds of the
// dispatcher's clock, in microseconds.
inline uint64_t due_micros(double seconds) { return static_cast<uint64_t>(seconds * 1e6); }

class NextUses {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  // Records a planned use of k due at `due`.
  void add(CacheKey k, uint64_t due);
  // Forgets one planned use of k due at `due` (it must have been added).
  void remove(CacheKey k, uint64_t due);
  // The earliest due time of k's planned uses; kNever when none.
  uint64_t next_use(CacheKey k) const;
  size_t planned() const { return planned_; }  // uses recorded in all

  // Called with k whenever next_use(k) changes (so that a cache re-ranks k).
  void set_listener(std::function<void(CacheKey)> listener) { on_change_ = std::move(listener); }

 private:
  std::unordered_map<CacheKey, std::vector<uint64_t>> dues_;  // a handful per item: scanned
  size_t planned_ = 0;
  std::function<void(CacheKey)> on_change_;
};

}  // namespace joader
