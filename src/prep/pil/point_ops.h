// PIL's point and filter operations as torchvision's _apply_op uses them (PIL 9.4's steps), on
// an RGB image.
//
// Thread-safe: every function is pure or works on its argument only.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "prep/image_prep.h"

namespace joader {

// Image.point(lut): each band through its table (one table for all three, or one per band).
void apply_lut(Image& img, const std::array<std::array<uint8_t, 256>, 3>& lut);
void apply_lut(Image& img, const std::array<uint8_t, 256>& lut);

// ImageOps.autocontrast(img) (cutoff 0, nothing ignored): each band stretched to 0..255.
void autocontrast(Image& img);

// ImageOps.equalize(img): each band's cumulative histogram as a lookup table.
void equalize(Image& img);

// Image.filter(ImageFilter.SMOOTH)'s pixels (the border rows and columns copied).
std::vector<uint8_t> smooth(const Image& img);

}  // namespace joader
