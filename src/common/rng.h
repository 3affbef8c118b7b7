// The random source used by the samplers: a seeded 64-bit Mersenne Twister with exact
// (unbiased) bounded draws. Exactness of the samplers rests on `uniform(n)` being exactly
// uniform on [0, n), which std::uniform_int_distribution guarantees by rejection.
#pragma once

#include <cstdint>
#include <random>

namespace joader {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform on [0, n); n must be > 0.
  uint64_t uniform(uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine_);
  }

  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace joader
