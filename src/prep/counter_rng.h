// The per-item pipeline's random numbers: a counter-based generator keyed by (seed, epoch, item),
// so that no state is shared between deliveries — a job's draws are reproducible from its seed,
// resumable after a crash, and independent of which other jobs run or in what order items come.
//
// Thread-safe: each generator is its own value.
#pragma once

#include <cstdint>

namespace joader {

// The n-th draw is a fixed function of (key, n), the key a hash of (seed, epoch, item). Exactly
// uniform integers (rejection) and doubles on [0, 1) with 53 bits.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint32_t epoch, uint32_t item);
  uint64_t next();
  double uniform();                      // [0, 1)
  double uniform(double lo, double hi);  // [lo, hi)
  uint64_t below(uint64_t n);            // [0, n), n > 0

 private:
  uint64_t key_, counter_ = 0;
};

}  // namespace joader
