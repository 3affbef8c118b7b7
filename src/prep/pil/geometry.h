// PIL's geometry (Geometry.c) as torchvision's functional API calls it on an RGB image: affine
// transforms and rotations (nearest or bilinear, a constant fill), nearest-neighbour resize, and
// torchvision's inverse affine matrix. Compiled without fused multiply-adds, as PIL's arithmetic
// is step by step.
//
// Thread-safe: every function is pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "prep/image_prep.h"

namespace joader {

// PIL's resampling codes, as torchvision's InterpolationMode maps them.
enum class Resample : uint8_t { kNearest = 0, kBilinear = 2 };

// CPython's math.radians / math.degrees: one multiplication by a rounded constant.
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kDegToRad = kPi / 180.0;
inline constexpr double kRadToDeg = 180.0 / kPi;

using Fill = std::array<uint8_t, 3>;

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear), in its order
// (angle and shears in degrees).
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y, double scale = 1.0);

// PIL's Image.transform(size, AFFINE, matrix, resample, fillcolor=fill) with the output the
// input's size (what F.affine gives), and Image.rotate(angle, resample, fillcolor=fill).
Image affine_pil(const Image& img, const std::array<double, 6>& matrix, Resample resample,
                 const std::array<uint8_t, 3>& fill);
// `center` (x, y), when given, is Image.rotate's center= (and disables its quarter-turn fast paths).
Image rotate_pil(const Image& img, double angle, Resample resample, const std::array<uint8_t, 3>& fill,
                 const double* center = nullptr);

// F.affine(img, angle, translate, scale, shear, interpolation, fill, center) on a PIL image:
// torchvision's inverse matrix (center default: the image's centre, w * 0.5, h * 0.5), then
// affine_pil.
struct AffineParams {
  double angle = 0, translate_x = 0, translate_y = 0, scale = 1, shear_x = 0, shear_y = 0;
  bool has_center = false;
  double center_x = 0, center_y = 0;
};
Image affine_transform(const Image& img, const AffineParams& params, Resample resample,
                       const std::array<uint8_t, 3>& fill);

// PIL's Image.new("RGB", (width, height), fill).
Image filled_image(uint32_t width, uint32_t height, const std::array<uint8_t, 3>& fill);

// ", fill=(r, g, b)" for a describe(); nothing for black, torchvision's default.
std::string fill_text(const std::array<uint8_t, 3>& fill);

// PIL's Image.resize((width, height), NEAREST): its scale-only affine nearest-neighbour loop.
Image resize_nearest(const Image& img, uint32_t width, uint32_t height);

}  // namespace joader
