// Per-job augmentation of a decoded image, with torchvision's semantics: the random part of a
// training pipeline, run per delivery on the shared decoded image so that jobs keep independent,
// fresh crops while sharing the decode.
//
// Ops (applied in order, each to the output of the one before, as torchvision.transforms.Compose
// applies them to a PIL image):
//   RandomResizedCrop(size, scale, ratio, interpolation)  parameters by torchvision's get_params
//       law (10 attempts, then the clamped central fallback); output bytes equal
//       F.resized_crop(pil, top, left, h, w, [size, size], interpolation) (PIL's antialiased
//       bilinear or bicubic, or its nearest neighbour).
//   RandomHorizontalFlip(p)                F.hflip with probability p.
//   Resize(S, interpolation)               shorter side to S, the longer int(S * long / short).
//   CenterCrop(C)                          torchvision's offsets, zero padding when smaller.
//   ColorJitter(brightness, contrast, saturation, hue)  ColorJitter.get_params's law (a uniform
//       order of the four, each factor uniform in its range; a range at its centre — (1, 1),
//       or (0, 0) for hue — is torchvision's None: not applied), then F.adjust_* on the PIL
//       image in that order (prep/color.h: PIL's bytes).
//   AutoAugment(policy)                    TrivialAugmentWide, RandAugment or AutoAugment with
//       their laws and PIL's pixels (prep/autoaugment.h); also torchvision's single random ops
//       (RandomPosterize, RandomGrayscale, RandomVerticalFlip, ...) as its RandomApply family.
//   RandomAffine(degrees, translate, scale, shear, interpolation, fill, center) and
//       RandomRotation(degrees, interpolation, expand=False, center, fill): get_params's law (the
//       angle, scale and shears uniform, the translations round(uniform(±fraction × size))), then
//       F.affine / F.rotate on the PIL image (prep/autoaugment.h: PIL's pixels).
//   RandomCrop(size, padding, pad_if_needed, fill)  torchvision's: F.pad with the constant fill
//       (padding, then pad_if_needed's padding of both sides by the missing width / height), then
//       a size×size window at a uniform position (get_params); an image still smaller than size
//       is an error, as in torchvision.
//
// Randomness comes from a counter-based generator keyed by (seed, epoch, item): no state is shared
// between deliveries, so a job's crops are reproducible from its seed, resumable after a crash,
// and independent of which other jobs run or in what order items are delivered.
//
// Thread-safe: every function is pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "prep/autoaugment.h"
#include "prep/image_prep.h"

namespace joader {

inline constexpr uint32_t kMaxAugmentSize = 8192;

// torchvision's InterpolationMode for RandomResizedCrop and Resize, as PIL's resampling codes.
enum class Interpolation : uint8_t { kNearest = 0, kBilinear = 2, kBicubic = 3 };

struct AugmentOp {
  enum Kind {
    kRandomResizedCrop,
    kRandomHorizontalFlip,
    kResize,
    kCenterCrop,
    kColorJitter,
    kAutoAugment,
    kRandomCrop,
    kRandomAffine,
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
  // RandomCrop: padding (left, top, right, bottom), pad_if_needed, the constant fill.
  std::array<uint32_t, 4> padding{0, 0, 0, 0};
  bool pad_if_needed = false;
  std::array<uint8_t, 3> fill{0, 0, 0};                   // RandomCrop, RandomAffine
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

  // The values the protocol (AugmentOp.params) and the Python binding carry beyond the common
  // fields: an AutoAugment's policy (AutoAugmentSpec::encode), a RandomCrop's [left, top, right,
  // bottom, pad_if_needed, fill0, fill1, fill2], a RandomResizedCrop's or Resize's
  // [interpolation] unless bilinear, a RandomAffine's [rotation, degrees min, max, has_translate,
  // translate x, y, has_scale, scale min, max, shear count, shear x4, interpolation, fill x3,
  // has_center, center x, y]; empty for the other ops. set_params throws PrepError on a
  // malformed list.
  std::vector<double> params() const;
  void set_params(const std::vector<double>& values);
};

// Throws PrepError naming the op and field, e.g. "RandomResizedCrop: size must be in 1..8192, not
// 0", "RandomResizedCrop: scale (0.5, 0.2) is empty", "RandomHorizontalFlip: p must be in [0, 1]".
// A pipeline must end in a fixed size: its last sizing op is RandomResizedCrop, CenterCrop or
// RandomCrop.
void validate_pipeline(const std::vector<AugmentOp>& ops);

// The output side (C of C×C) of a valid pipeline.
uint32_t pipeline_output_size(const std::vector<AugmentOp>& ops);

// A counter-based generator: the n-th draw is a fixed function of (key, n), the key a hash of
// (seed, epoch, item). Exactly uniform integers (rejection) and doubles on [0, 1) with 53 bits.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint32_t epoch, uint32_t item);
  uint64_t next();
  double uniform();                          // [0, 1)
  double uniform(double lo, double hi);      // [lo, hi)
  uint64_t below(uint64_t n);                // [0, n), n > 0

 private:
  uint64_t key_, counter_ = 0;
};

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// torchvision.transforms.RandomResizedCrop.get_params for a width×height image, drawing from rng.
CropBox random_resized_crop_box(uint32_t width, uint32_t height, const AugmentOp& op, CounterRng& rng);

// F.resized_crop(img, box, [size, size], interpolation) on a PIL image, then F.hflip when flip: the
// box (inside the image) resized to size×size with PIL's antialiased bilinear or bicubic filter,
// or its nearest neighbour. HWC RGB out.
Image resized_crop(const ImageView& img, const CropBox& box, uint32_t size, bool flip,
                   Interpolation interpolation = Interpolation::kBilinear);
Image resized_crop(const Image& img, const CropBox& box, uint32_t size, bool flip,
                   Interpolation interpolation = Interpolation::kBilinear);

// RandomCrop's padded image for a width×height input: its size and where the input sits in it.
// Throws PrepError when it is still smaller than the crop.
struct RandomCropPadding {
  uint64_t left = 0, top = 0, width = 0, height = 0;
};
RandomCropPadding random_crop_padding(const AugmentOp& op, uint32_t width, uint32_t height);

// RandomCrop's output for the window `box` (top, left in the padded image; box.width = height = size).
Image random_crop(const ImageView& img, const AugmentOp& op, const CropBox& box);

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
std::vector<OpDraw> draw_augment(const std::vector<AugmentOp>& ops, uint32_t width, uint32_t height, uint64_t seed,
                                 uint32_t epoch, uint32_t item);

// ColorJitter with the given draws on img, in place.
void color_jitter(Image& img, const AugmentOp& op, const OpDraw& draw);

// The ops applied in order to img with the given draws (from draw_augment on img's size).
Image apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws);

// The same pixels handed to `sink` row by row (rows 0 .. size - 1 of the size×size output, in
// order) instead of stored: for a pipeline that ends in a bilinear or bicubic RandomResizedCrop
// and flips, straight from the resample (no output image, no flip pass); for any other, from the
// image apply_augment computes.
void apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws,
                   RowSink& sink);

// What one delivery of `item` in `epoch` to a job with `seed` receives:
// apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item)).
// Throws PrepError on an image without pixels.
Image augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item);
Image augment(const Image& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item);
// augment() handing the rows to `sink` (apply_augment above): e.g. into a batch's slot.
void augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item,
             RowSink& sink);

}  // namespace joader
