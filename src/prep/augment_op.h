// The per-item pipeline's data: an op (AugmentOp: its family's kind and that family's own
// parameters, made from the protocol's message by the family, common/augment_wire.h) and what one
// delivery draws for it (OpDraw). What each op does: prep/augment.h; each family's code and
// parameters: prep/ops/.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "prep/autoaugment.h"
#include "prep/image_prep.h"
#include "prep/ops/list.h"

namespace joader {

inline constexpr uint32_t kMaxAugmentSize = 8192;

// torchvision's InterpolationMode for RandomResizedCrop and Resize, as PIL's resampling codes.
enum class Interpolation : uint8_t { kNearest = 0, kBilinear = 2, kBicubic = 3 };

// An op family's parameters: each family defines its own type in its file (prep/ops/), made once
// when the op is read and never changed after (the op's copies share it).
struct OpParams {
  virtual ~OpParams() = default;
};

struct AugmentOp {
  // The op families of prep/ops/list.h, in its order.
  enum Kind {
#define JOADER_OP_KIND(kind, family) kind,
    JOADER_OP_FAMILIES(JOADER_OP_KIND)
#undef JOADER_OP_KIND
  };
  Kind kind = kCenterCrop;
  std::shared_ptr<const OpParams> params;

  // The parameters as the family's own type (its code's only: the kind says which it is). An op
  // made otherwise than by its family's from_wire has none: a bug, thrown as one.
  template <class P>
  const P& as() const {
    const P* p = dynamic_cast<const P*>(params.get());
    if (p == nullptr) throw std::logic_error("an augmentation op without its family's parameters");
    return *p;
  }

  // E.g. "RandomResizedCrop(224, scale=(0.08, 1), ratio=(0.75, 1.33333))".
  std::string describe() const;
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
