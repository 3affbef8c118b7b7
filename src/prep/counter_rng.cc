#include "prep/counter_rng.h"

namespace joader {
namespace {

// SplitMix64's finaliser: a bijection on 64 bits with full avalanche.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

CounterRng::CounterRng(uint64_t seed, uint32_t epoch, uint32_t item)
    : key_(mix(mix(seed) ^ mix((uint64_t{epoch} << 32 | item) + 0x9e3779b97f4a7c15ULL))) {}

uint64_t CounterRng::next() { return mix(key_ + 0x9e3779b97f4a7c15ULL * ++counter_); }

double CounterRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double CounterRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

uint64_t CounterRng::below(uint64_t n) {
  // Rejection of the top partial block: exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = next();
    if (v < limit) return v % n;
  }
}

}  // namespace joader
