// PIL's point and filter operations as torchvision's _apply_op uses them: lookup tables,
// ImageOps.autocontrast and equalize, ImageFilter.SMOOTH.
#include "prep/pil/point_ops.h"

#include <algorithm>
#include <cmath>

namespace joader {

void apply_lut(Image& img, const std::array<std::array<uint8_t, 256>, 3>& lut) {
  uint8_t* p = img.rgb.data();
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    p[i] = lut[0][p[i]];
    p[i + 1] = lut[1][p[i + 1]];
    p[i + 2] = lut[2][p[i + 2]];
  }
}

void apply_lut(Image& img, const std::array<uint8_t, 256>& lut) { apply_lut(img, {lut, lut, lut}); }

namespace {

std::array<std::array<uint64_t, 256>, 3> histograms(const Image& img) {
  std::array<std::array<uint64_t, 256>, 3> h{};
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    ++h[0][img.rgb[i]];
    ++h[1][img.rgb[i + 1]];
    ++h[2][img.rgb[i + 2]];
  }
  return h;
}

std::array<uint8_t, 256> identity_lut() {
  std::array<uint8_t, 256> lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i);
  return lut;
}

}  // namespace

// ImageOps.autocontrast(img) (cutoff 0, nothing ignored): each band stretched to 0..255.
void autocontrast(Image& img) {
  const auto h = histograms(img);
  std::array<std::array<uint8_t, 256>, 3> lut;
  for (int band = 0; band < 3; ++band) {
    int lo = 0, hi = 255;
    while (lo < 255 && h[band][lo] == 0) ++lo;
    while (hi > 0 && h[band][hi] == 0) --hi;
    if (hi <= lo) {
      lut[band] = identity_lut();
      continue;
    }
    const double scale = 255.0 / (hi - lo), offset = -lo * scale;
    for (int ix = 0; ix < 256; ++ix) lut[band][ix] = static_cast<uint8_t>(std::clamp(int(ix * scale + offset), 0, 255));
  }
  apply_lut(img, lut);
}

// ImageOps.equalize(img): each band's cumulative histogram as a lookup table (PIL 9.4's steps).
void equalize(Image& img) {
  const auto h = histograms(img);
  std::array<std::array<uint8_t, 256>, 3> lut;
  for (int band = 0; band < 3; ++band) {
    uint64_t total = 0, last = 0, nonzero = 0;
    for (int i = 0; i < 256; ++i) {
      if (h[band][i] == 0) continue;
      total += h[band][i];
      last = h[band][i];
      ++nonzero;
    }
    const uint64_t step = nonzero <= 1 ? 0 : (total - last) / 255;
    if (step == 0) {
      lut[band] = identity_lut();
      continue;
    }
    uint64_t n = step / 2;
    for (int i = 0; i < 256; ++i) {
      lut[band][i] = static_cast<uint8_t>(std::min<uint64_t>(n / step, 255));  // Image.point clips
      n += h[band][i];
    }
  }
  apply_lut(img, lut);
}

// Image.filter(ImageFilter.SMOOTH): PIL's 3×3 float kernel (1 1 1 / 1 5 1 / 1 1 1, each /13 as a
// float), +0.5 and truncated; the border rows and columns copied.
std::vector<uint8_t> smooth(const Image& img) {
  std::vector<uint8_t> out = img.rgb;
  const int w = static_cast<int>(img.width), h = static_cast<int>(img.height);
  if (w < 3 || h < 3) return out;
  const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
  const auto clip8 = [](float v) -> uint8_t { return v <= 0.0f ? 0 : v >= 255.0f ? 255 : static_cast<uint8_t>(v); };
  const size_t stride = size_t(w) * 3;
  for (int y = 1; y < h - 1; ++y) {
    const uint8_t* up = &img.rgb[(y - 1) * stride];
    const uint8_t* mid = &img.rgb[y * stride];
    const uint8_t* down = &img.rgb[(y + 1) * stride];
    uint8_t* o = &out[y * stride];
    for (int x = 1; x < w - 1; ++x) {
      for (int b = 0; b < 3; ++b) {
        const int i = 3 * x + b;
        float ss = 0.5f;
        ss += float(down[i - 3]) * k1 + float(down[i]) * k1 + float(down[i + 3]) * k1;
        ss += float(mid[i - 3]) * k1 + float(mid[i]) * k5 + float(mid[i + 3]) * k1;
        ss += float(up[i - 3]) * k1 + float(up[i]) * k1 + float(up[i + 3]) * k1;
        o[i] = clip8(ss);
      }
    }
  }
  return out;
}

}  // namespace joader
