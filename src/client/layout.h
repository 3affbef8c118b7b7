// Pixel layouts a client hands to its framework.
#pragma once

#include <cstddef>
#include <cstdint>

namespace joader {

// Copies `pixels` RGB pixels stored interleaved (HWC, as the daemon stores them) into three planes
// (CHW, as PyTorch's NCHW wants them): dst[c * pixels + i] = src[3 * i + c]. One pass over the
// bytes; the batch gather of the Python binding writes NCHW with it instead of copying HWC and
// then permuting (0.007 vs 0.01 + 0.045 ms per 224×224 image, bench/prep_bench.cc).
void hwc_to_chw(const uint8_t* src, size_t pixels, uint8_t* dst);

// The float conversion of torchvision's tensor tail, in one pass: each sample x becomes
// x / 255 (ToTensor), then, with `mean`/`std` (3 values each; nullptr for none), (x - mean[c]) /
// std[c] (Normalize), in float32 and in that order — the same arithmetic as torch's, so the
// result is bit for bit what `t.float() / 255` and `(t - mean) / std` give. Written as planes
// (chw: dst[c * pixels + i]) or interleaved (dst[3 * i + c]).
void to_float(const uint8_t* src, size_t pixels, bool chw, const float* mean, const float* std, float* dst);

}  // namespace joader
