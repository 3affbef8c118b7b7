// The decoders of prep/image_formats.h, one format per file: the size from a header (probe_*)
// and the pixels (decode_*), as image_formats.h describes them. Helpers they share are inline here.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "prep/image_prep.h"
#include "prep/scratch.h"

namespace joader::formats {

inline uint32_t le16(std::span<const uint8_t> d, size_t at) { return uint32_t(d[at]) | uint32_t(d[at + 1]) << 8; }
inline uint32_t le32(std::span<const uint8_t> d, size_t at) { return le16(d, at) | le16(d, at + 2) << 16; }
inline uint32_t be16(std::span<const uint8_t> d, size_t at) { return uint32_t(d[at]) << 8 | d[at + 1]; }
inline uint32_t be32(std::span<const uint8_t> d, size_t at) { return be16(d, at) << 16 | be16(d, at + 2); }

inline void check_pixels(uint64_t width, uint64_t height, uint64_t max_pixels, const char* format) {
  if (width == 0 || height == 0) throw PrepError(std::string("corrupt ") + format + ": image has no pixels");
  if (width * height > max_pixels) {
    throw PrepError("image declares " + std::to_string(width) + "×" + std::to_string(height) +
                    " pixels, more than the limit of " + std::to_string(max_pixels));
  }
}

inline void resize_image(Image& img, uint32_t width, uint32_t height) {
  img.width = width;
  img.height = height;
  reserve_decode_memory(uint64_t{width} * height * 3);
  img.rgb.resize(size_t{width} * height * 3);
}

ImageSize probe_webp(std::span<const uint8_t> d, uint64_t max_pixels);
void decode_webp(std::span<const uint8_t> d, uint64_t max_pixels, Image& img);
ImageSize probe_tiff(std::span<const uint8_t> d, uint64_t max_pixels);
void decode_tiff(std::span<const uint8_t> d, uint64_t max_pixels, Image& img);
ImageSize probe_bmp(std::span<const uint8_t> d, uint64_t max_pixels);
void decode_bmp(std::span<const uint8_t> d, uint64_t max_pixels, Image& img);
ImageSize probe_pnm(std::span<const uint8_t> d, uint64_t max_pixels);
void decode_pnm(std::span<const uint8_t> d, uint64_t max_pixels, Image& img);
ImageSize probe_gif(std::span<const uint8_t> d, uint64_t max_pixels);
void decode_gif(std::span<const uint8_t> d, uint64_t max_pixels, Image& img);

}  // namespace joader::formats
