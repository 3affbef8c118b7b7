#include "prep/autoaugment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "prep/augment.h"
#include "prep/color.h"

namespace joader {
namespace {

using Fill = std::array<uint8_t, 3>;

// CPython's math.radians / math.degrees: one multiplication by a rounded constant.
constexpr double kPi = 3.14159265358979323846;
constexpr double kDegToRad = kPi / 180.0;
constexpr double kRadToDeg = 180.0 / kPi;

// Python's float % (the result takes the divisor's sign).
double py_mod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0) {
    if ((y < 0) != (m < 0)) m += y;
  } else {
    m = std::copysign(0.0, y);
  }
  return m;
}

// Python's round(x, 15): the correctly rounded 15-decimal value, read back.
double py_round15(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15f", x);
  return std::strtod(buf, nullptr);
}

// PIL's COORD and FLOOR macros (Geometry.c). COORD of a value past int's range (a near-90° shear)
// or NaN is undefined in C; x86 gives INT_MIN there, outside every image: so does this, defined.
inline int coord(double v) { return !(v >= 0.0) ? -1 : v >= 2147483647.0 ? -1 : static_cast<int>(v); }
inline int pil_floor(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

inline void copy_pixel(Image& out, int x, int y, const Image& in, int xin, int yin) {
  std::memcpy(&out.rgb[(size_t(y) * out.width + x) * 3], &in.rgb[(size_t(yin) * in.width + xin) * 3], 3);
}

// ImagingScaleAffine: nearest neighbour when the matrix only scales and translates.
void scale_affine(Image& out, const Image& in, const std::array<double, 6>& a) {
  const int w = static_cast<int>(out.width), h = static_cast<int>(out.height);
  std::vector<int> xintab(w, 0);
  double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
  int xmin = w, xmax = 0;
  for (int x = 0; x < w; ++x) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < static_cast<int>(in.width)) {
      xmax = x + 1;
      xmin = std::min(xmin, x);
      xintab[x] = xin;
    }
    xo += a[0];
  }
  for (int y = 0; y < h; ++y) {
    const int yi = coord(yo);
    if (yi >= 0 && yi < static_cast<int>(in.height)) {
      for (int x = xmin; x < xmax; ++x) copy_pixel(out, x, y, in, xintab[x], yi);
    }
    yo += a[4];
  }
}

bool check_fixed(const std::array<double, 6>& a, int x, int y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: nearest neighbour in 16.16 fixed point.
void affine_fixed(Image& out, const Image& in, const std::array<double, 6>& a) {
  const auto fix = [](double v) { return pil_floor(v * 65536.0 + 0.5); };
  const int xsize = static_cast<int>(in.width), ysize = static_cast<int>(in.height);
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  for (int y = 0; y < static_cast<int>(out.height); ++y) {
    int xx = a2, yy = a5;
    for (int x = 0; x < static_cast<int>(out.width); ++x) {
      const int xin = xx >> 16;
      if (xin >= 0 && xin < xsize) {
        const int yin = yy >> 16;
        if (yin >= 0 && yin < ysize) copy_pixel(out, x, y, in, xin, yin);
      }
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// ImagingTransformAffine's floating-point nearest-neighbour loop (coordinates past 32768).
void affine_float(Image& out, const Image& in, const std::array<double, 6>& a) {
  const int xsize = static_cast<int>(in.width), ysize = static_cast<int>(in.height);
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int y = 0; y < static_cast<int>(out.height); ++y) {
    double xx = xo, yy = yo;
    for (int x = 0; x < static_cast<int>(out.width); ++x) {
      const int xin = coord(xx);
      if (xin >= 0 && xin < xsize) {
        const int yin = coord(yy);
        if (yin >= 0 && yin < ysize) copy_pixel(out, x, y, in, xin, yin);
      }
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

// ImagingGenericTransform with affine_transform and bilinear_filter32RGB. The products a0·x and
// a3·x (per column) and a1·y, a4·y (per row) are computed once: the sums are PIL's, in its order,
// so every coordinate is the same double.
void affine_bilinear(Image& out, const Image& in, const std::array<double, 6>& a) {
  const int xsize = static_cast<int>(in.width), ysize = static_cast<int>(in.height);
  const int w = static_cast<int>(out.width), h = static_cast<int>(out.height);
  const size_t stride = size_t(in.width) * 3;
  std::vector<double> ax(w), dx_col(w);
  for (int x = 0; x < w; ++x) {
    ax[x] = a[0] * (x + 0.5);
    dx_col[x] = a[3] * (x + 0.5);
  }
  const uint8_t* base = in.rgb.data();
  for (int y = 0; y < h; ++y) {
    const double by = a[1] * (y + 0.5), ey = a[4] * (y + 0.5);
    uint8_t* o = &out.rgb[size_t(y) * w * 3];
    for (int x = 0; x < w; ++x, o += 3) {
      double xin = ax[x] + by + a[2];
      double yin = dx_col[x] + ey + a[5];
      if (!(xin >= 0.0 && xin < xsize && yin >= 0.0 && yin < ysize)) continue;  // keeps the fill (NaN too)
      xin -= 0.5;
      yin -= 0.5;
      const int fx = pil_floor(xin), fy = pil_floor(yin);  // ≥ -1: xin, yin ≥ -0.5
      const double dx = xin - fx, dy = yin - fy;
      const int x0 = (fx < 0 ? 0 : fx) * 3, x1 = (fx + 1 < xsize ? fx + 1 : xsize - 1) * 3;
      const uint8_t* r0 = base + size_t(fy < 0 ? 0 : fy) * stride;
      if (fy + 1 < ysize) {
        const uint8_t* r1 = base + size_t(fy + 1) * stride;
        for (int b = 0; b < 3; ++b) {
          const double v1 = r0[x0 + b] + (int{r0[x1 + b]} - int{r0[x0 + b]}) * dx;
          const double v2 = r1[x0 + b] + (int{r1[x1 + b]} - int{r1[x0 + b]}) * dx;
          o[b] = static_cast<uint8_t>(v1 + (v2 - v1) * dy);
        }
      } else {  // PIL's v2 = v1: v1 + (v1 - v1) * dy is v1
        for (int b = 0; b < 3; ++b) {
          o[b] = static_cast<uint8_t>(r0[x0 + b] + (int{r0[x1 + b]} - int{r0[x0 + b]}) * dx);
        }
      }
    }
  }
}

// A shift by whole pixels (a = [1, 0, tx, 0, 1, ty], tx and ty integers): PIL's bilinear filter
// then reads each sample at a weight of exactly 0 for its neighbours, so the result is the
// shifted image, the fill where the source is outside (what TranslateX/Y give).
bool shift_by_whole_pixels(Image& out, const Image& in, const std::array<double, 6>& a) {
  if (!(a[0] == 1.0 && a[1] == 0.0 && a[3] == 0.0 && a[4] == 1.0 && a[2] == std::floor(a[2]) &&
        a[5] == std::floor(a[5]) && std::fabs(a[2]) < 1e9 && std::fabs(a[5]) < 1e9)) {
    return false;
  }
  const int64_t tx = static_cast<int64_t>(a[2]), ty = static_cast<int64_t>(a[5]);
  const int64_t w = out.width, h = out.height;
  const int64_t x_lo = std::max<int64_t>(0, -tx), x_hi = std::min<int64_t>(w, int64_t(in.width) - tx);
  if (x_lo >= x_hi) return true;
  for (int64_t y = 0; y < h; ++y) {
    const int64_t yin = y + ty;
    if (yin < 0 || yin >= int64_t(in.height)) continue;
    std::memcpy(&out.rgb[size_t(y * w + x_lo) * 3], &in.rgb[size_t(yin * int64_t(in.width) + x_lo + tx) * 3],
                size_t(x_hi - x_lo) * 3);
  }
  return true;
}

// Image.transpose(ROTATE_90 / ROTATE_180 / ROTATE_270): quarter turns counter-clockwise.
Image quarter_turns(const Image& in, int turns) {
  const uint32_t w = in.width, h = in.height;
  Image out;
  out.width = turns == 2 ? w : h;
  out.height = turns == 2 ? h : w;
  out.rgb.resize(in.rgb.size());
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      uint32_t ox, oy;
      switch (turns) {
        case 1: ox = y, oy = w - 1 - x; break;
        case 2: ox = w - 1 - x, oy = h - 1 - y; break;
        default: ox = h - 1 - y, oy = x; break;
      }
      std::memcpy(&out.rgb[(size_t(oy) * out.width + ox) * 3], &in.rgb[(size_t(y) * w + x) * 3], 3);
    }
  }
  return out;
}

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear), in its order.
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y, double scale = 1.0) {
  const double rot = angle * kDegToRad, sx = shear_x * kDegToRad, sy = shear_y * kDegToRad;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m{d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v = v / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

void apply_lut(Image& img, const std::array<std::array<uint8_t, 256>, 3>& lut) {
  uint8_t* p = img.rgb.data();
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    p[i] = lut[0][p[i]];
    p[i + 1] = lut[1][p[i + 1]];
    p[i + 2] = lut[2][p[i + 2]];
  }
}

void apply_lut(Image& img, const std::array<uint8_t, 256>& lut) { apply_lut(img, {lut, lut, lut}); }

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

[[noreturn]] void bad(const AutoAugmentSpec& spec, const std::string& what) {
  static const char* families[] = {"TrivialAugmentWide", "RandAugment", "AutoAugment", "RandomApply"};
  throw PrepError(std::string(spec.family <= AutoAugmentSpec::kRandomApply ? families[spec.family] : "AutoAugment") +
                  ": " + what);
}

}  // namespace

Image filled_image(uint32_t width, uint32_t height, const Fill& fill) {
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(size_t{width} * height * 3);
  for (size_t i = 0; i < out.rgb.size(); i += 3) std::memcpy(&out.rgb[i], fill.data(), 3);
  return out;
}

std::string fill_text(const Fill& fill) {
  if (fill == Fill{0, 0, 0}) return "";
  return ", fill=(" + std::to_string(fill[0]) + ", " + std::to_string(fill[1]) + ", " + std::to_string(fill[2]) + ")";
}

const char* image_op_name(ImageOp op) {
  static const char* names[kImageOpCount] = {
      "Identity",  "ShearX",   "ShearY",       "TranslateX", "TranslateY", "Rotate",    "Brightness", "Color",
      "Contrast",  "Sharpness", "Posterize",   "Solarize",   "AutoContrast", "Equalize", "Invert",     "Grayscale",
      "VerticalFlip"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < kImageOpCount ? names[i] : "?";
}

Image affine_pil(const Image& img, const std::array<double, 6>& a, Resample resample, const Fill& fill) {
  Image out = filled_image(img.width, img.height, fill);
  if (img.width == 0 || img.height == 0) return out;
  if (resample == Resample::kBilinear) {
    if (!shift_by_whole_pixels(out, img, a)) affine_bilinear(out, img, a);
  } else if (a[1] == 0 && a[3] == 0) {
    scale_affine(out, img, a);
  } else {
    const int w = static_cast<int>(img.width), h = static_cast<int>(img.height);
    if (check_fixed(a, 0, 0) && check_fixed(a, w, h) && check_fixed(a, 0, h) && check_fixed(a, w, 0)) {
      affine_fixed(out, img, a);
    } else {
      affine_float(out, img, a);
    }
  }
  return out;
}

Image resize_nearest(const Image& img, uint32_t width, uint32_t height) {
  Image out = filled_image(width, height, {0, 0, 0});
  if (img.width == 0 || img.height == 0 || width == 0 || height == 0) return out;
  // _resize: box (0, 0, w, h) as floats, a[0] = (box[2] - box[0]) / xsize.
  const std::array<double, 6> a{static_cast<double>(static_cast<float>(img.width)) / width, 0, 0, 0,
                                static_cast<double>(static_cast<float>(img.height)) / height, 0};
  scale_affine(out, img, a);
  return out;
}

Image affine_transform(const Image& img, const AffineParams& p, Resample resample, const Fill& fill) {
  const double cx = p.has_center ? p.center_x : img.width * 0.5, cy = p.has_center ? p.center_y : img.height * 0.5;
  return affine_pil(img, inverse_affine(cx, cy, p.angle, p.translate_x, p.translate_y, p.shear_x, p.shear_y, p.scale),
                    resample, fill);
}

Image rotate_pil(const Image& img, double angle, Resample resample, const Fill& fill, const double* center) {
  angle = py_mod(angle, 360.0);
  if (center == nullptr) {  // PIL's fast paths, only without a center
    if (angle == 0) return img;
    if (angle == 180) return quarter_turns(img, 2);
    if ((angle == 90 || angle == 270) && img.width == img.height) return quarter_turns(img, angle == 90 ? 1 : 3);
  }
  const double w = img.width, h = img.height;
  const double cx = center ? center[0] : w / 2.0, cy = center ? center[1] : h / 2.0;
  const double rad = -(angle * kDegToRad);
  std::array<double, 6> m{py_round15(std::cos(rad)),  py_round15(std::sin(rad)), 0.0,
                          py_round15(-std::sin(rad)), py_round15(std::cos(rad)), 0.0};
  const double x = -cx - 0.0, y = -cy - 0.0;
  const double c = m[0] * x + m[1] * y + m[2], f = m[3] * x + m[4] * y + m[5];
  m[2] = c + cx;
  m[5] = f + cy;
  return affine_pil(img, m, resample, fill);
}

void apply_image_op(Image& img, ImageOp op, double magnitude, Resample interpolation, const Fill& fill) {
  const double cx = img.width * 0.5, cy = img.height * 0.5;
  switch (op) {
    case ImageOp::kIdentity: break;
    case ImageOp::kShearX:
      img = affine_pil(img, inverse_affine(0, 0, 0.0, 0, 0, std::atan(magnitude) * kRadToDeg, 0.0), interpolation, fill);
      break;
    case ImageOp::kShearY:
      img = affine_pil(img, inverse_affine(0, 0, 0.0, 0, 0, 0.0, std::atan(magnitude) * kRadToDeg), interpolation, fill);
      break;
    case ImageOp::kTranslateX:
      img = affine_pil(img, inverse_affine(cx, cy, 0.0, std::trunc(magnitude), 0, 0.0, 0.0), interpolation, fill);
      break;
    case ImageOp::kTranslateY:
      img = affine_pil(img, inverse_affine(cx, cy, 0.0, 0, std::trunc(magnitude), 0.0, 0.0), interpolation, fill);
      break;
    case ImageOp::kRotate: img = rotate_pil(img, magnitude, interpolation, fill); break;
    case ImageOp::kBrightness: adjust_brightness(img, 1.0 + magnitude); break;
    case ImageOp::kColor: adjust_saturation(img, 1.0 + magnitude); break;
    case ImageOp::kContrast: adjust_contrast(img, 1.0 + magnitude); break;
    case ImageOp::kSharpness:
      if (static_cast<float>(1.0 + magnitude) != 1.0f) blend_from(img, smooth(img), 1.0 + magnitude);
      break;
    case ImageOp::kPosterize: {
      const int bits = std::clamp(static_cast<int>(std::clamp(magnitude, 0.0, 8.0)), 0, 8);  // validated: 0..8
      const int mask = ~((1 << (8 - bits)) - 1);
      std::array<uint8_t, 256> lut;
      for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i & mask);
      apply_lut(img, lut);
      break;
    }
    case ImageOp::kSolarize: {
      std::array<uint8_t, 256> lut;
      for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i < magnitude ? i : 255 - i);
      apply_lut(img, lut);
      break;
    }
    case ImageOp::kAutoContrast: autocontrast(img); break;
    case ImageOp::kEqualize: equalize(img); break;
    case ImageOp::kInvert:
      for (uint8_t& v : img.rgb) v = static_cast<uint8_t>(255 - v);
      break;
    case ImageOp::kGrayscale: to_grayscale(img); break;
    case ImageOp::kVerticalFlip: {
      const size_t row = size_t(img.width) * 3;
      for (uint32_t top = 0, bottom = img.height ? img.height - 1 : 0; top < bottom; ++top, --bottom) {
        std::swap_ranges(img.rgb.begin() + top * row, img.rgb.begin() + (top + 1) * row, img.rgb.begin() + bottom * row);
      }
      break;
    }
  }
}

std::vector<AppliedOp> draw_auto_augment(const AutoAugmentSpec& spec, CounterRng& rng) {
  std::vector<AppliedOp> out;
  const auto signed_magnitude = [&](const AutoAugmentSpec::Entry& e, double magnitude, bool negate) {
    return AppliedOp{e.op, e.is_signed && negate ? -magnitude : magnitude};
  };
  if (spec.family == AutoAugmentSpec::kRandomApply) {
    for (const AutoAugmentSpec::Entry& e : spec.entries) {
      if (rng.uniform() < e.p) out.push_back({e.op, e.magnitudes.empty() ? 0.0 : e.magnitudes[0]});
    }
    return out;
  }
  if (spec.family == AutoAugmentSpec::kAutoAugment) {
    const size_t policies = spec.entries.size() / spec.policy_size;
    const size_t first = rng.below(policies) * spec.policy_size;
    for (size_t k = first; k < first + spec.policy_size; ++k) {
      const AutoAugmentSpec::Entry& e = spec.entries[k];
      const double u = rng.uniform();
      const bool negate = rng.below(2) == 0;  // torchvision negates when its sign draw is 0
      if (u <= e.p) out.push_back(signed_magnitude(e, e.magnitudes.empty() ? 0.0 : e.magnitudes[0], negate));
    }
    return out;
  }
  const uint32_t times = spec.family == AutoAugmentSpec::kRandAugment ? spec.num_ops : 1;
  for (uint32_t t = 0; t < times; ++t) {
    const AutoAugmentSpec::Entry& e = spec.entries[rng.below(spec.entries.size())];
    const double magnitude = e.magnitudes.empty() ? 0.0 : e.magnitudes[rng.below(e.magnitudes.size())];
    const bool negate = e.is_signed && rng.below(2) == 1;  // torchvision negates when its sign draw is 1
    out.push_back(signed_magnitude(e, magnitude, negate));
  }
  return out;
}

std::string AutoAugmentSpec::describe() const {
  const char* interp = interpolation == Resample::kBilinear ? "bilinear" : "nearest";
  switch (family) {
    case kTrivialAugmentWide:
      return "TrivialAugmentWide(" + std::to_string(entries.size()) + " ops, interpolation=" + interp + fill_text(fill) + ")";
    case kRandAugment:
      return "RandAugment(num_ops=" + std::to_string(num_ops) + ", " + std::to_string(entries.size()) +
             " ops, interpolation=" + interp + fill_text(fill) + ")";
    case kAutoAugment:
      return "AutoAugment(" + std::to_string(policy_size ? entries.size() / policy_size : 0) +
             " sub-policies, interpolation=" + interp + fill_text(fill) + ")";
    case kRandomApply: {
      std::string text;
      for (const Entry& e : entries) {
        char p[32];
        std::snprintf(p, sizeof p, "%.6g", e.p);
        std::string op = image_op_name(e.op);
        if (!e.magnitudes.empty()) {
          char m[32];
          std::snprintf(m, sizeof m, "%.6g", e.magnitudes[0]);
          op += std::string("(") + m + ")";
        }
        text += (text.empty() ? "" : ", ") + std::string("RandomApply(") + op + ", p=" + p + ")";
      }
      return text;
    }
  }
  return "AutoAugment(?)";
}

void AutoAugmentSpec::validate() const {
  if (family > kRandomApply) throw PrepError("AutoAugment: unknown policy family " + std::to_string(family));
  if (entries.empty()) bad(*this, "the op space is empty");
  if (interpolation != Resample::kNearest && interpolation != Resample::kBilinear) {
    bad(*this, "interpolation must be nearest or bilinear");
  }
  if (family == kRandAugment && num_ops > 64) bad(*this, "num_ops must be at most 64, not " + std::to_string(num_ops));
  if (family == kAutoAugment && (policy_size == 0 || entries.size() % policy_size != 0)) {
    bad(*this, "the sub-policies must each have " + std::to_string(policy_size) + " ops");
  }
  for (const Entry& e : entries) {
    if (static_cast<int>(e.op) >= kImageOpCount) bad(*this, "unknown op " + std::to_string(int(e.op)));
    if (!(e.p >= 0 && e.p <= 1)) bad(*this, std::string(image_op_name(e.op)) + ": p must be in [0, 1]");
    for (double m : e.magnitudes) {
      if (!std::isfinite(m)) bad(*this, std::string(image_op_name(e.op)) + ": magnitudes must be finite");
      if (e.op == ImageOp::kPosterize && !(m >= 0 && m < 9)) bad(*this, "Posterize: bits must be in 0..8");
      if ((e.op == ImageOp::kBrightness || e.op == ImageOp::kColor || e.op == ImageOp::kContrast ||
           e.op == ImageOp::kSharpness) &&
          !(std::fabs(m) < 1e6)) {
        bad(*this, std::string(image_op_name(e.op)) + ": magnitude out of range");
      }
      if ((e.op == ImageOp::kShearX || e.op == ImageOp::kShearY || e.op == ImageOp::kTranslateX ||
           e.op == ImageOp::kTranslateY) &&
          !(std::fabs(m) < 1e6)) {
        bad(*this, std::string(image_op_name(e.op)) + ": magnitude out of range");
      }
    }
  }
}

std::vector<double> AutoAugmentSpec::encode() const {
  std::vector<double> out{double(family), double(num_ops), double(static_cast<int>(interpolation)),
                          double(fill[0]), double(fill[1]), double(fill[2]), double(policy_size), double(entries.size())};
  for (const Entry& e : entries) {
    out.insert(out.end(), {double(static_cast<int>(e.op)), e.p, e.is_signed ? 1.0 : 0.0, double(e.magnitudes.size())});
    out.insert(out.end(), e.magnitudes.begin(), e.magnitudes.end());
  }
  return out;
}

AutoAugmentSpec AutoAugmentSpec::decode(const std::vector<double>& params) {
  size_t at = 0;
  const auto take_int = [&](double lo, double hi, const char* what) {
    if (at >= params.size()) throw PrepError(std::string("AutoAugment: the policy is cut short at ") + what);
    const double v = params[at++];
    if (!(v >= lo && v <= hi) || v != std::floor(v)) {
      throw PrepError(std::string("AutoAugment: ") + what + " out of range");
    }
    return static_cast<uint32_t>(v);
  };
  AutoAugmentSpec spec;
  spec.family = static_cast<Family>(take_int(0, kRandomApply, "family"));
  spec.num_ops = take_int(0, 64, "num_ops");
  const uint32_t interp = take_int(0, 2, "interpolation");
  if (interp == 1) throw PrepError("AutoAugment: interpolation must be nearest or bilinear");
  spec.interpolation = static_cast<Resample>(interp);
  for (uint8_t& f : spec.fill) f = static_cast<uint8_t>(take_int(0, 255, "fill"));
  spec.policy_size = take_int(1, 16, "policy size");
  const uint32_t n = take_int(1, 4096, "op count");
  for (uint32_t i = 0; i < n; ++i) {
    Entry e;
    e.op = static_cast<ImageOp>(take_int(0, kImageOpCount - 1, "op"));
    if (at >= params.size()) throw PrepError("AutoAugment: the policy is cut short at p");
    e.p = params[at++];
    e.is_signed = take_int(0, 1, "signed") == 1;
    const uint32_t count = take_int(0, 1024, "magnitude count");
    if (params.size() - at < count) throw PrepError("AutoAugment: the policy is cut short at the magnitudes");
    e.magnitudes.assign(params.begin() + at, params.begin() + at + count);
    at += count;
    spec.entries.push_back(std::move(e));
  }
  if (at != params.size()) throw PrepError("AutoAugment: trailing values after the policy");
  spec.validate();
  return spec;
}

}  // namespace joader
