// PIL's geometry (Geometry.c) as torchvision calls it: affine transforms and rotations with
// nearest or bilinear resampling, a constant fill, and nearest-neighbour resize.
#include "prep/pil/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace joader {
namespace {

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
        case 1:
          ox = y, oy = w - 1 - x;
          break;
        case 2:
          ox = w - 1 - x, oy = h - 1 - y;
          break;
        default:
          ox = h - 1 - y, oy = x;
          break;
      }
      std::memcpy(&out.rgb[(size_t(oy) * out.width + ox) * 3], &in.rgb[(size_t(y) * w + x) * 3], 3);
    }
  }
  return out;
}

}  // namespace

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear), in its order.
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y, double scale) {
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
  const std::array<double, 6> a{static_cast<double>(static_cast<float>(img.width)) / width,   0, 0, 0,
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

}  // namespace joader
