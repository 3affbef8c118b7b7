// RandomResizedCrop (prep/augment.h): torchvision's box law and PIL's resample of the box.
#pragma once

#include <cstdint>

#include "prep/augment_op.h"
#include "prep/counter_rng.h"
#include "prep/image_prep.h"

namespace joader {

// torchvision.transforms.RandomResizedCrop.get_params for a width×height image, drawing from rng.
CropBox random_resized_crop_box(uint32_t width, uint32_t height, const AugmentOp& op, CounterRng& rng);

// F.resized_crop(img, box, [size, size], interpolation) on a PIL image, then F.hflip when flip: the
// box (inside the image) resized to size×size with PIL's antialiased bilinear or bicubic filter,
// or its nearest neighbour. HWC RGB out.
Image resized_crop(const ImageView& img, const CropBox& box, uint32_t size, bool flip,
                   Interpolation interpolation = Interpolation::kBilinear);
Image resized_crop(const Image& img, const CropBox& box, uint32_t size, bool flip,
                   Interpolation interpolation = Interpolation::kBilinear);

}  // namespace joader
