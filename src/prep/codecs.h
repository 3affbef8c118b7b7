// The decoders behind decode_image and probe_image: JPEG (TurboJPEG) and PNG (libpng) here, the
// other formats torchvision's ImageFolder lists in image_formats.h, chosen by magic bytes as PIL
// chooses its plugins. decode_image, probe_image and encode_jpeg (image_prep.h) are defined in
// codecs.cc; this header is for the rest of src/prep.
#pragma once

#include <cstdint>
#include <span>

#include "prep/image_prep.h"

namespace joader {

// The magic bytes PIL's JPEG plugin accepts.
bool is_jpeg(std::span<const uint8_t> data);
// decode_image into img, whose buffer is reused (grown, never shrunk).
void decode_into(std::span<const uint8_t> encoded, uint64_t max_pixels, Image& img);
// PrepError naming both sizes unless a block of block_bytes holds exactly the image's
// width · height · 3 bytes (its size as probed from its header when the dataset was added).
void check_block_fits(ImageSize image, size_t block_bytes);
// Decodes a JPEG (is_jpeg) straight into `out`, which must hold exactly its width · height · 3
// bytes (check_block_fits, before anything is written). The same bytes as decode_into. Returns
// the image's size.
ImageSize decode_jpeg_into(std::span<const uint8_t> encoded, uint64_t max_pixels, std::span<uint8_t> out);
// PrepError: the image declares more than max_pixels pixels.
[[noreturn]] void throw_too_large(uint64_t width, uint64_t height, uint64_t max_pixels);

}  // namespace joader
