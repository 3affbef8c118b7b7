// torchvision.transforms.RandomErasing on a float image, as the last op of a pipeline's tensor
// tail (after ToTensor and Normalize): written into the batch by the same pass that converts it.
//
// The law is torchvision's RandomErasing.forward / get_params: with probability p, up to ten
// attempts of an area fraction uniform in `scale` and a log-uniform aspect ratio in `ratio`,
// h = round(sqrt(area * aspect)), w = round(sqrt(area / aspect)) (Python's round, half to even),
// kept when h < height and w < width, at a uniform position; no attempt kept: nothing erased.
// The box is filled with `value` (one value, or one per channel) or, for value='random', with
// standard normal samples. Draws come from CounterRng keyed by (seed, epoch, item), a stream apart
// from the pipeline's other draws: reproducible, resumable, independent between jobs.
//
// Thread-safe: every function is pure.
#pragma once

#include <array>
#include <cstdint>

#include "prep/counter_rng.h"
#include "prep/image_prep.h"

namespace joader {

struct ErasingOp {
  double p = 0.5;
  double scale_min = 0.02, scale_max = 0.33;
  double ratio_min = 0.3, ratio_max = 3.3;
  bool random_fill = false;          // value='random': N(0, 1) per sample
  std::array<float, 3> value{};      // per channel (a single value repeated)
};

struct ErasingBox {
  bool erase = false;
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// Throws PrepError naming the field: p outside [0, 1], an empty or negative scale, an empty or
// non-positive ratio, scale above 1.
void validate_erasing(const ErasingOp& op);

// The draws of one delivery for a width×height image.
ErasingBox random_erasing_box(uint32_t width, uint32_t height, const ErasingOp& op, CounterRng& rng);

// Draws the box for (seed, epoch, item) and fills it in `image`, 3 channels of width×height
// floats, as planes (chw) or interleaved.
void random_erasing(float* image, uint32_t width, uint32_t height, bool chw, const ErasingOp& op, uint64_t seed,
                    uint32_t epoch, uint32_t item);

}  // namespace joader
