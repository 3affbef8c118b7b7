#include "client/layout.h"

#include <cstring>

#include "common/simd_clones.h"

namespace joader {

// GCC vectorises the stride-3 loads of both loops below into byte shuffles from SSSE3 on, so each
// needs JOADER_CLONES on its own definition: the attribute applies to the one function after it
// (without it, hwc_to_chw is scalar and several times slower: docs/BENCHMARKS.md, "The gather
// vectorised again").
JOADER_CLONES
void to_float(const uint8_t* __restrict src, size_t pixels, bool chw, const float* mean, const float* std,
              float* __restrict dst, size_t plane) {
  for (size_t c = 0; c < 3; ++c) {
    float* __restrict out = chw ? dst + c * plane : dst + c;
    const size_t step = chw ? 1 : 3;
    if (mean == nullptr) {
      for (size_t i = 0; i < pixels; ++i) out[i * step] = float(src[3 * i + c]) / 255.0f;
    } else {
      const float m = mean[c], s = std[c];
      for (size_t i = 0; i < pixels; ++i) out[i * step] = (float(src[3 * i + c]) / 255.0f - m) / s;
    }
  }
}

void to_float(const uint8_t* src, size_t pixels, bool chw, const float* mean, const float* std, float* dst) {
  to_float(src, pixels, chw, mean, std, dst, pixels);
}

JOADER_CLONES
void hwc_to_chw(const uint8_t* __restrict src, size_t pixels, uint8_t* __restrict dst, size_t plane) {
  uint8_t* __restrict r = dst;
  uint8_t* __restrict g = dst + plane;
  uint8_t* __restrict b = dst + 2 * plane;
  for (size_t i = 0; i < pixels; ++i) {
    r[i] = src[3 * i];
    g[i] = src[3 * i + 1];
    b[i] = src[3 * i + 2];
  }
}

void hwc_to_chw(const uint8_t* src, size_t pixels, uint8_t* dst) { hwc_to_chw(src, pixels, dst, pixels); }

void ByteRows::row(int64_t y, const uint8_t* rgb) {
  const size_t at = size_t(y) * size_;
  if (chw_) {
    hwc_to_chw(rgb, size_, slot_ + at, size_t{size_} * size_);
  } else {
    std::memcpy(slot_ + at * 3, rgb, size_t{size_} * 3);
  }
}

void FloatRows::row(int64_t y, const uint8_t* rgb) {
  const size_t at = size_t(y) * size_;
  to_float(rgb, size_, chw_, mean_, stdev_, slot_ + (chw_ ? at : at * 3), size_t{size_} * size_);
}

}  // namespace joader
