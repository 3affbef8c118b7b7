// The per-item pipeline's data: an op as the client sends it and the daemon checks it (AugmentOp,
// one struct with the fields of every op family), and what one delivery draws for it (OpDraw).
// What each op does: prep/augment.h; each family's code: prep/ops/.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "prep/autoaugment.h"
#include "prep/image_prep.h"
#include "prep/ops/list.h"

namespace joader {

inline constexpr uint32_t kMaxAugmentSize = 8192;

// torchvision's InterpolationMode for RandomResizedCrop and Resize, as PIL's resampling codes.
enum class Interpolation : uint8_t { kNearest = 0, kBilinear = 2, kBicubic = 3 };

struct AugmentOp {
  // The op families of prep/ops/list.h, in its order.
  enum Kind {
#define JOADER_OP_KIND(kind, family) kind,
    JOADER_OP_FAMILIES(JOADER_OP_KIND)
#undef JOADER_OP_KIND
  };
  Kind kind = kCenterCrop;
  uint32_t size = 0;                              // RandomResizedCrop, Resize, CenterCrop, RandomCrop
  double scale_min = 0.08, scale_max = 1.0;       // RandomResizedCrop
  double ratio_min = 3.0 / 4, ratio_max = 4.0 / 3;
  double p = 0.5;                                 // RandomHorizontalFlip
  Interpolation interpolation = Interpolation::kBilinear;  // RandomResizedCrop, Resize
  // ColorJitter: (min, max) of brightness, contrast, saturation and hue, in that order.
  std::array<double, 8> jitter{1, 1, 1, 1, 1, 1, 0, 0};
  AutoAugmentSpec policy;                         // AutoAugment: TrivialAugmentWide, RandAugment, AutoAugment
  // RandomCrop and Pad: padding (left, top, right, bottom), the constant fill; RandomCrop's
  // pad_if_needed.
  std::array<uint32_t, 4> padding{0, 0, 0, 0};
  bool pad_if_needed = false;
  std::array<uint8_t, 3> fill{0, 0, 0};                   // RandomCrop, Pad, RandomAffine
  // RandomAffine (and RandomRotation, as `rotation`): torchvision's ranges, as given.
  struct Affine {
    bool rotation = false;  // RandomRotation: F.rotate (PIL's rotate); else F.affine
    double degrees_min = 0, degrees_max = 0;
    bool has_translate = false;
    double translate_x = 0, translate_y = 0;  // fractions of the width and height
    bool has_scale = false;
    double scale_min = 1, scale_max = 1;
    int shear_count = 0;  // 0, 2 (x) or 4 (x then y)
    std::array<double, 4> shear{0, 0, 0, 0};
    Resample interpolation = Resample::kNearest;
    bool has_center = false;
    double center_x = 0, center_y = 0;
  } affine;

  // Whether ColorJitter adjusts property k (0 brightness ... 3 hue): its range is not the centre.
  bool jitters(int k) const;

  // E.g. "RandomResizedCrop(224, scale=(0.08, 1), ratio=(0.75, 1.33333))".
  std::string describe() const;
  // The protocol's form (proto/joader.proto's AugmentOp, one message per op family) is
  // common/augment_wire.h's.

};

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// The random draws of a pipeline for one delivery: per op, the box of a RandomResizedCrop, the
// coin of a RandomHorizontalFlip, the order and factors of a ColorJitter, the ops of an
// AutoAugment policy (other ops draw nothing), for an input of width×height.
struct OpDraw {
  CropBox box;  // RandomResizedCrop's box; RandomCrop's window in the padded image
  bool flip = false;
  std::array<uint8_t, 4> order{0, 1, 2, 3};   // ColorJitter: the order of the adjustments
  std::array<double, 4> factors{1, 1, 1, 0};  // ColorJitter: brightness, contrast, saturation, hue
  std::vector<AppliedOp> applied;             // AutoAugment: the ops applied, in order
  AffineParams affine;                        // RandomAffine / RandomRotation: the drawn parameters
};

}  // namespace joader
