#include "client/layout.h"

#include "common/simd_clones.h"

namespace joader {

// GCC vectorises the stride-3 loads into byte shuffles from SSSE3 on: 0.024 ms per 224×224 image
// with baseline x86-64, 0.007 with AVX2.
JOADER_CLONES
void to_float(const uint8_t* __restrict src, size_t pixels, bool chw, const float* mean, const float* std,
              float* __restrict dst) {
  for (size_t c = 0; c < 3; ++c) {
    float* __restrict out = chw ? dst + c * pixels : dst + c;
    const size_t step = chw ? 1 : 3;
    if (mean == nullptr) {
      for (size_t i = 0; i < pixels; ++i) out[i * step] = float(src[3 * i + c]) / 255.0f;
    } else {
      const float m = mean[c], s = std[c];
      for (size_t i = 0; i < pixels; ++i) out[i * step] = (float(src[3 * i + c]) / 255.0f - m) / s;
    }
  }
}

void hwc_to_chw(const uint8_t* __restrict src, size_t pixels, uint8_t* __restrict dst) {
  uint8_t* __restrict r = dst;
  uint8_t* __restrict g = dst + pixels;
  uint8_t* __restrict b = dst + 2 * pixels;
  for (size_t i = 0; i < pixels; ++i) {
    r[i] = src[3 * i];
    g[i] = src[3 * i + 1];
    b[i] = src[3 * i + 2];
  }
}

}  // namespace joader
