#include "prep/color.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace joader {
namespace {

inline uint8_t luma(const uint8_t* p) {
  return static_cast<uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

inline uint8_t clip8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// PIL's ImagingBlend of one sample, in1 + alpha * (in2 - in1) in float, truncated; clipped to
// 0..255 (PIL clips only when alpha is outside [0, 1], where it can leave the range; inside it the
// clip changes nothing), so one branch-free form serves both and vectorises.
inline uint8_t blend(uint8_t in1, uint8_t in2, float alpha) {
  float t = static_cast<float>(in1) + alpha * static_cast<float>(int{in2} - int{in1});
  t = std::min(std::max(t, 0.0f), 255.0f);
  return static_cast<uint8_t>(static_cast<int>(t));
}

// Image.blend(degenerate, img, factor) where the degenerate image is one grey for every sample.
// PIL copies an input when alpha is exactly 0 or 1.
void blend_with_grey(Image& img, double factor, uint8_t grey) {
  const float alpha = static_cast<float>(factor);
  if (alpha == 1.0f) return;
  uint8_t* p = img.rgb.data();
  const size_t n = img.rgb.size();
  if (alpha == 0.0f) {
    std::fill(p, p + n, grey);
    return;
  }
  for (size_t i = 0; i < n; ++i) p[i] = blend(grey, p[i], alpha);
}

void rgb_to_hsv(const uint8_t* in, uint8_t* out) {
  const uint8_t r = in[0], g = in[1], b = in[2];
  const uint8_t maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  out[2] = maxc;
  if (minc == maxc) {
    out[0] = out[1] = 0;
    return;
  }
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr, gc = static_cast<float>(maxc - g) / cr,
              bc = static_cast<float>(maxc - b) / cr;
  float h;
  if (r == maxc) {
    h = bc - gc;
  } else if (g == maxc) {
    h = static_cast<float>(2.0 + rc - bc);
  } else {
    h = static_cast<float>(4.0 + gc - rc);
  }
  h = static_cast<float>(std::fmod(h / 6.0 + 1.0, 1.0));
  out[0] = clip8(static_cast<int>(h * 255.0));
  out[1] = clip8(static_cast<int>(s * 255.0));
}

void hsv_to_rgb(const uint8_t* in, uint8_t* out) {
  const uint8_t h = in[0], s = in[1], v = in[2];
  if (s == 0) {
    out[0] = out[1] = out[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const uint8_t p = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs))));
  const uint8_t q = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * f))));
  const uint8_t t = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * (1.0 - f)))));
  const uint8_t rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  const uint8_t* c = rgb[i % 6];
  out[0] = c[0];
  out[1] = c[1];
  out[2] = c[2];
}

}  // namespace

void adjust_brightness(Image& img, double factor) { blend_with_grey(img, factor, 0); }

void adjust_contrast(Image& img, double factor) {
  uint64_t sum = 0;
  const size_t n = size_t{img.width} * img.height;
  for (size_t i = 0; i < n; ++i) sum += luma(&img.rgb[3 * i]);
  const double mean = n == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(n);  // ImageStat's mean
  blend_with_grey(img, factor, static_cast<uint8_t>(static_cast<int>(mean + 0.5)));
}

void blend_from(Image& img, const std::vector<uint8_t>& degenerate, double factor) {
  const float alpha = static_cast<float>(factor);
  if (alpha == 1.0f) return;
  uint8_t* p = img.rgb.data();
  if (alpha == 0.0f) {
    std::copy(degenerate.begin(), degenerate.end(), p);
    return;
  }
  const size_t n = img.rgb.size();
  for (size_t i = 0; i < n; ++i) p[i] = blend(degenerate[i], p[i], alpha);
}

void to_grayscale(Image& img) {
  uint8_t* p = img.rgb.data();
  for (size_t i = 0; i < img.rgb.size(); i += 3) p[i] = p[i + 1] = p[i + 2] = luma(p + i);
}

void adjust_saturation(Image& img, double factor) {
  if (static_cast<float>(factor) == 1.0f) return;
  const size_t n = size_t{img.width} * img.height;
  std::vector<uint8_t> grey(3 * n);  // the degenerate image: each pixel's luma in its three samples
  for (size_t i = 0; i < n; ++i) grey[3 * i] = grey[3 * i + 1] = grey[3 * i + 2] = luma(&img.rgb[3 * i]);
  blend_from(img, grey, factor);
}

void adjust_hue(Image& img, double hue_factor) {
  // np.uint8(hue_factor * 255): the double truncated toward zero, then taken modulo 256.
  const auto shift = static_cast<uint8_t>(static_cast<int64_t>(hue_factor * 255));
  uint8_t* p = img.rgb.data();
  const size_t n = size_t{img.width} * img.height;
  for (size_t i = 0; i < n; ++i, p += 3) {
    uint8_t hsv[3];
    rgb_to_hsv(p, hsv);
    hsv[0] = static_cast<uint8_t>(hsv[0] + shift);
    hsv_to_rgb(hsv, p);
  }
}

}  // namespace joader
