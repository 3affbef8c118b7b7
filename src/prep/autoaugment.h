// torchvision's AutoAugment family (TrivialAugmentWide, RandAugment, AutoAugment) on a PIL RGB
// image, natively: the op law of each policy and the pixels of each op (torchvision's _apply_op on
// a PIL image, i.e. PIL's own arithmetic). The same ops serve torchvision's single random ops
// (RandomPosterize, RandomSolarize, RandomAutocontrast, RandomEqualize, RandomAdjustSharpness,
// RandomInvert, RandomGrayscale / Grayscale(3), RandomVerticalFlip) as the RandomApply family.
//
// Pixels, for given draws, equal torchvision 0.14's F.* on PIL 9.4, byte for byte (tested on
// real photos): ShearX/Y, TranslateX/Y (F.affine) and Rotate (F.rotate) with NEAREST or BILINEAR
// resampling and a fill colour, through PIL's own paths (its scale, 16.16 fixed-point and float
// nearest-neighbour loops, its bilinear filter, the transposes of rotations by 90/180/270);
// Brightness, Color, Contrast (prep/color.h), Sharpness (PIL's SMOOTH filter in float, then a
// blend), Posterize, Solarize, AutoContrast, Equalize and Invert (ImageOps' lookup tables).
// Compiled without FMA contraction, as PIL's float steps must be reproduced in their order.
//
// Law: the policy's op space is handed over as torchvision builds it (`_augmentation_space`
// evaluated in Python for the image size this op sees, so the magnitudes are torch's own float32
// values); the draws follow each policy's forward():
//   TrivialAugmentWide  one op uniform, one magnitude bin uniform, a sign coin for signed ops;
//   RandAugment         num_ops times: one op uniform at the fixed magnitude, a sign coin;
//   AutoAugment         one sub-policy uniform; each of its ops applied when a uniform draw
//                       u ≤ p, negated on a sign coin when signed;
//   RandomApply         each entry in turn applied when a uniform draw u < p (torchvision's
//                       `torch.rand(1) < self.p` of its Random* ops), at its magnitude.
// (Draws come from the job's counter-based generator, not torch's: the law is torchvision's, the
// numbers are Joader's, keyed by (seed, epoch, item) like every native op.)
//
// Thread-safe: every function is pure or works on its argument only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "prep/image_prep.h"
#include "prep/pil/geometry.h"

namespace joader {

class CounterRng;

// The image ops of torchvision's _apply_op, in the order of its `if` chain.
enum class ImageOp : uint8_t {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
  // Not in _apply_op; for the RandomApply family: F.rgb_to_grayscale(img, 3) (PIL's "L" luma in
  // all three channels) and F.vflip.
  kGrayscale,
  kVerticalFlip,
};
inline constexpr int kImageOpCount = 17;
const char* image_op_name(ImageOp op);

struct AutoAugmentSpec {
  enum Family : uint8_t { kTrivialAugmentWide, kRandAugment, kAutoAugment, kRandomApply };
  struct Entry {
    ImageOp op = ImageOp::kIdentity;
    std::vector<double> magnitudes;  // empty: the op takes none (torchvision's 0-d tensor: 0.0)
    bool is_signed = false;
    double p = 1.0;  // AutoAugment: the probability of applying it
  };
  Family family = kTrivialAugmentWide;
  uint32_t num_ops = 1;  // RandAugment
  Resample interpolation = Resample::kNearest;
  std::array<uint8_t, 3> fill{0, 0, 0};
  // TrivialAugmentWide / RandAugment: the op space (RandAugment: each op's magnitudes reduced to the
  // one at its magnitude index). AutoAugment: the sub-policies, policy_size entries each.
  // RandomApply: the ops, each with its p and (at most one) magnitude.
  std::vector<Entry> entries;
  uint32_t policy_size = 2;

  // E.g. "TrivialAugmentWide(14 ops, interpolation=nearest)".
  std::string describe() const;
  // Throws PrepError naming the problem (an empty op space, a magnitude out of an op's range...).
  void validate() const;
};

// One applied op with its magnitude (already signed).
struct AppliedOp {
  ImageOp op = ImageOp::kIdentity;
  double magnitude = 0;
  bool operator==(const AppliedOp&) const = default;
};

// The ops one delivery applies, drawn by the spec's law.
std::vector<AppliedOp> draw_auto_augment(const AutoAugmentSpec& spec, CounterRng& rng);

// torchvision's _apply_op(img, op, magnitude, interpolation, fill) on the PIL image img, in place.
void apply_image_op(Image& img, ImageOp op, double magnitude, Resample interpolation,
                    const std::array<uint8_t, 3>& fill);

}  // namespace joader
