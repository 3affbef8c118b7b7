// torchvision's colour adjustments of a PIL image (F.adjust_brightness, F.adjust_contrast,
// F.adjust_saturation, F.adjust_hue), with PIL's arithmetic, on an RGB image in place: the ops of
// ColorJitter, run per item in the job's process.
//
// PIL defines them as blends (ImageEnhance): out = in1 + alpha * (in2 - in1), computed in float and
// truncated (clipped to 0..255 when alpha is outside [0, 1]), between the image and a degenerate
// one — black (brightness), the grey of the mean luma rounded (contrast), the luma itself
// (saturation); luma is ITU-R 601-2 in PIL's fixed point, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
// The hue shift converts to PIL's 8-bit HSV, adds uint8(hue * 255) to H modulo 256 (numpy's
// conversion: truncation, then wrap-around), and converts back. The float and double steps are
// PIL's own, in its order, so the bytes equal PIL's (tested against torchvision on real photos,
// and over every RGB colour for the HSV round trip); this file is compiled without FMA
// contraction for that reason.
//
// Thread-safe: every function is pure or works on its argument only.
#pragma once

#include <cstdint>
#include <vector>

#include "prep/image_prep.h"

namespace joader {

void adjust_brightness(Image& img, double factor);
void adjust_contrast(Image& img, double factor);
void adjust_saturation(Image& img, double factor);
void adjust_hue(Image& img, double hue_factor);  // hue_factor in [-0.5, 0.5]

// F.rgb_to_grayscale(img, num_output_channels=3): PIL's convert("L") luma in all three channels.
void to_grayscale(Image& img);

// Image.blend(degenerate, img, factor) into img: degenerate holds img.rgb.size() samples.
void blend_from(Image& img, const std::vector<uint8_t>& degenerate, double factor);

}  // namespace joader
