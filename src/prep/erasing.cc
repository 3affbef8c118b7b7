#include "prep/erasing.h"

#include <cmath>

namespace joader {
namespace {

constexpr uint64_t kErasingStream = 0x52616e6445726173ULL;  // "RandEras": apart from the other ops' draws

int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// A standard normal sample (Box-Muller on two 53-bit uniforms).
float normal(CounterRng& rng) {
  const double u1 = 1.0 - rng.uniform();  // (0, 1]
  const double u2 = rng.uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace

void validate_erasing(const ErasingOp& op) {
  if (!(op.p >= 0 && op.p <= 1)) throw PrepError("RandomErasing: p must be in [0, 1]");
  if (!(op.scale_min >= 0 && op.scale_min <= op.scale_max && op.scale_max <= 1)) {
    throw PrepError("RandomErasing: scale must be a range in [0, 1]");
  }
  if (!(op.ratio_min > 0 && op.ratio_min <= op.ratio_max)) throw PrepError("RandomErasing: ratio must be a positive range");
}

ErasingBox random_erasing_box(uint32_t width, uint32_t height, const ErasingOp& op, CounterRng& rng) {
  ErasingBox box;
  if (!(rng.uniform() < op.p)) return box;
  const double area = double(width) * double(height);
  const double log_lo = std::log(op.ratio_min), log_hi = std::log(op.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.uniform(op.scale_min, op.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int64_t h = round_half_even(std::sqrt(erase_area * aspect));
    const int64_t w = round_half_even(std::sqrt(erase_area / aspect));
    if (!(h < int64_t{height} && w < int64_t{width})) continue;
    box.erase = true;
    box.height = h;
    box.width = w;
    box.top = static_cast<int64_t>(rng.below(uint64_t(height - h + 1)));
    box.left = static_cast<int64_t>(rng.below(uint64_t(width - w + 1)));
    return box;
  }
  return box;  // torchvision returns the image itself: nothing changes
}

void random_erasing(float* image, uint32_t width, uint32_t height, bool chw, const ErasingOp& op, uint64_t seed,
                    uint32_t epoch, uint32_t item) {
  CounterRng rng(seed ^ kErasingStream, epoch, item);
  const ErasingBox box = random_erasing_box(width, height, op, rng);
  if (!box.erase) return;
  const size_t plane = size_t(width) * height;
  // torchvision fills channel by channel (a [C, h, w] tensor of normal samples): the same order.
  for (int c = 0; c < 3; ++c) {
    for (int64_t y = box.top; y < box.top + box.height; ++y) {
      for (int64_t x = box.left; x < box.left + box.width; ++x) {
        const size_t at = chw ? c * plane + size_t(y) * width + size_t(x) : (size_t(y) * width + size_t(x)) * 3 + c;
        image[at] = op.random_fill ? normal(rng) : op.value[c];
      }
    }
  }
}

}  // namespace joader
