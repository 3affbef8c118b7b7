// Decoding only the part of a JPEG that a resize window reads.
//
// libjpeg-turbo can skip whole rows (jpeg_skip_scanlines) and decode only a band of columns
// (jpeg_crop_scanline, widened to the left to an iMCU boundary); what it skips it does not
// inverse-transform, upsample or colour-convert (the entropy decoding of every block before the
// last row needed still happens). The bytes of the decoded region equal those of a full decode
// except, the library warns, at the band's left and right edges, where its "fancy" chroma
// upsampling may treat the band's edge as the image's: so the band is widened by one pixel on
// each side and those edge pixels are never part of the requested rectangle.
//
// Thread-safe: each call uses its own decompressor.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace joader {

// Columns [left, right) of rows [top, bottom).
struct PixelRect {
  uint32_t left = 0, top = 0, right = 0, bottom = 0;
};

// Pixels of a region of a larger image: `rgb` holds `height` rows of `width` RGB pixels (no
// padding) whose first pixel is (left, top) of the full_width × full_height image.
struct ImageRegion {
  uint32_t full_width = 0, full_height = 0;
  uint32_t left = 0, top = 0, width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// Decodes the JPEG `data` far enough to cover the rectangle `choose(width, height)` returns (it
// is called once, with the size from the header; it must lie inside the image), converting colour
// as decode_image does (grayscale → equal channels, CMYK/YCCK as PIL). The region holds at least
// the rectangle, bytes equal to the same pixels of decode_image's full decode.
//
// Returns false, with `out` unspecified, whenever it cannot promise that: any error or warning
// from libjpeg (corrupt, truncated or odd files), a declared size above max_pixels, an empty
// rectangle. The caller then decodes the whole image with decode_image, which gives the verdict
// and the message, so the fast path never changes what is accepted or how it is reported.
bool decode_jpeg_region(std::span<const uint8_t> data, uint64_t max_pixels,
                        const std::function<PixelRect(uint32_t width, uint32_t height)>& choose, ImageRegion& out);

}  // namespace joader
