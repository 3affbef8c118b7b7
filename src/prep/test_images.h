// Images for the tests of prep/: made in memory (gradients, noise, PNGs and JPEGs of other pixel
// formats), and what the tests compare them with.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include "prep/image_prep.h"

namespace joader::test_images {

using Bytes = std::vector<uint8_t>;

// Smooth content (JPEG's easy case), so a round trip stays close to the original.
inline Image gradient_image(uint32_t width, uint32_t height) {
  Image img{width, height, Bytes(size_t{width} * height * 3)};
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) {
      uint8_t* px = &img.rgb[(size_t{y} * width + x) * 3];
      px[0] = static_cast<uint8_t>(x * 255 / (width - 1));
      px[1] = static_cast<uint8_t>(y * 255 / (height - 1));
      px[2] = static_cast<uint8_t>((x + y) * 127 / (width + height));
    }
  return img;
}

// Pseudo-random bytes, so that a window off by one pixel shows.
inline Image noise_image(uint32_t width, uint32_t height) {
  Image img{width, height, Bytes(size_t{width} * height * 3)};
  uint32_t state = 12345;
  for (uint8_t& b : img.rgb) b = static_cast<uint8_t>((state = state * 1103515245 + 12345) >> 16);
  return img;
}

// A PNG written by libpng's simplified API; `format` is a PNG_FORMAT_* value.
inline Bytes write_png(const void* pixels, uint32_t width, uint32_t height, uint32_t format,
                       const void* colormap = nullptr, uint32_t colormap_entries = 0) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  image.colormap_entries = colormap_entries;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, colormap)) << image.message;
  Bytes out(size);
  EXPECT_TRUE(png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, colormap)) << image.message;
  out.resize(size);
  return out;
}

// A JPEG of another pixel format than encode_jpeg's RGB (grayscale, CMYK), written by TurboJPEG.
inline Bytes compress_jpeg(const Bytes& pixels, int width, int height, int pixel_format, int subsamp) {
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, pixels.data(), width, 0, height, pixel_format, &jpeg, &size, subsamp, 100, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  Bytes out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

inline std::string prep_error(std::span<const uint8_t> data, uint64_t max_pixels = PrepSpec().max_pixels) {
  try {
    decode_image(data, max_pixels);
  } catch (const PrepError& e) {
    return e.what();
  }
  return "no error";
}

inline double mean_abs_diff(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{b[i]});
  return sum / static_cast<double>(a.size());
}

// PNG chunk CRC (ISO 3309), to patch a header by hand.
inline uint32_t png_crc(const uint8_t* data, size_t n) {
  uint32_t crc = 0xFFFFFFFF;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

inline void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

inline PrepSpec decode_spec(uint32_t resize, uint32_t crop) {
  PrepSpec spec;
  spec.raw = false;
  spec.resize = resize;
  spec.crop = crop;
  return spec;
}

inline void expect_geometry(const PrepSpec& spec, uint32_t w, uint32_t h, uint64_t rw, uint64_t rh, int64_t left,
                            int64_t top) {
  const PrepGeometry g = prep_geometry(spec, w, h);
  EXPECT_EQ(g.resized_width, rw) << w << "x" << h;
  EXPECT_EQ(g.resized_height, rh) << w << "x" << h;
  EXPECT_EQ(g.crop_left, left) << w << "x" << h;
  EXPECT_EQ(g.crop_top, top) << w << "x" << h;
}

}  // namespace joader::test_images
