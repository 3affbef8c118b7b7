// RandomCrop (prep/augment.h): torchvision's padding and window.
#pragma once

#include <cstdint>

#include "prep/augment_op.h"
#include "prep/image_prep.h"

namespace joader {

// RandomCrop's padded image for a width×height input: its size and where the input sits in it.
// Throws PrepError when it is still smaller than the crop.
struct RandomCropPadding {
  uint64_t left = 0, top = 0, width = 0, height = 0;
};
RandomCropPadding random_crop_padding(const AugmentOp& op, uint32_t width, uint32_t height);

// RandomCrop's output for the window `box` (top, left in the padded image; box.width = height = size).
Image random_crop(const ImageView& img, const AugmentOp& op, const CropBox& box);

}  // namespace joader
