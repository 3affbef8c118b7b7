// BMP: prep/image_formats.h says what is decoded and how.
#include <bit>
#include <cstring>
#include <vector>

#include "prep/formats/decoders.h"

namespace joader::formats {

namespace {

struct BmpHeader {
  uint32_t data_offset = 0, header_size = 0, width = 0, height = 0, bits = 0, compression = 0, colors = 0;
  bool top_down = false;
  uint32_t masks[3] = {0, 0, 0};
};

// The header, once `d` holds it; false when it ends before.
bool read_bmp_header(std::span<const uint8_t> d, BmpHeader& h) {
  if (d.size() < 26) return false;
  h.data_offset = le32(d, 10);
  h.header_size = le32(d, 14);
  if (h.header_size == 12) {  // OS/2 BITMAPCOREHEADER
    h.width = le16(d, 18);
    h.height = le16(d, 20);
    h.bits = le16(d, 24);
    return true;
  }
  if (h.header_size < 40) throw PrepError("corrupt BMP: unknown header size " + std::to_string(h.header_size));
  if (d.size() < 54) return false;
  h.width = le32(d, 18);
  const int32_t height = static_cast<int32_t>(le32(d, 22));
  h.top_down = height < 0;
  h.height = height < 0 ? uint32_t(-int64_t{height}) : uint32_t(height);
  h.bits = le16(d, 28);
  h.compression = le32(d, 30);
  h.colors = le32(d, 46);
  if (h.compression == 3 || h.compression == 6) {  // BI_BITFIELDS: masks after a 40-byte header, or in it
    if (d.size() < 66) return false;
    for (int i = 0; i < 3; ++i) h.masks[i] = le32(d, 54 + 4 * size_t(i));
  }
  return true;
}

}  // namespace

ImageSize probe_bmp(std::span<const uint8_t> d, uint64_t max_pixels) {
  BmpHeader h;
  if (!read_bmp_header(d, h)) return {};
  check_pixels(h.width, h.height, max_pixels, "BMP");
  return {h.width, h.height};
}

namespace {

// A bit field's value expanded to 8 bits as PIL's unpackers do (v · 255 / max).
uint8_t expand_field(uint32_t pixel, uint32_t mask) {
  if (mask == 0) return 0;
  const int shift = std::countr_zero(mask);
  const uint32_t max = mask >> shift;
  return uint8_t(((pixel & mask) >> shift) * 255 / max);
}

}  // namespace

void decode_bmp(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  BmpHeader h;
  if (!read_bmp_header(d, h)) throw PrepError("corrupt or truncated BMP: header cut short");
  check_pixels(h.width, h.height, max_pixels, "BMP");
  if (h.compression == 1 || h.compression == 2) throw PrepError("BMP images with RLE compression are not supported");
  if (h.compression != 0 && h.compression != 3 && h.compression != 6) {
    throw PrepError("BMP compression " + std::to_string(h.compression) + " is not supported");
  }
  const uint32_t b = h.bits;
  if (b != 1 && b != 4 && b != 8 && b != 16 && b != 24 && b != 32) {
    throw PrepError("BMP with " + std::to_string(b) + " bits per pixel is not supported");
  }
  const uint64_t stride = (uint64_t{h.width} * b + 31) / 32 * 4;
  if (h.data_offset > d.size() || stride * h.height > d.size() - h.data_offset) {
    throw PrepError("corrupt or truncated BMP: pixel data cut short");
  }
  std::vector<uint8_t> palette;  // RGB triples
  if (b <= 8) {
    const size_t entry = h.header_size == 12 ? 3 : 4;
    const size_t count = h.colors != 0 && h.colors <= (1u << b) ? h.colors : (1u << b);
    const size_t at = 14 + h.header_size;
    palette.assign(size_t{3} << b, 0);
    for (size_t i = 0; i < count && at + i * entry + 3 <= d.size(); ++i) {
      palette[3 * i] = d[at + i * entry + 2];
      palette[3 * i + 1] = d[at + i * entry + 1];
      palette[3 * i + 2] = d[at + i * entry];
    }
  }
  uint32_t masks[3] = {h.masks[0], h.masks[1], h.masks[2]};
  if (h.compression == 0 && b == 16) masks[0] = 0x7c00, masks[1] = 0x03e0, masks[2] = 0x001f;
  const bool fields = b == 16 || (b == 32 && h.compression != 0);
  resize_image(img, h.width, h.height);
  for (uint32_t y = 0; y < h.height; ++y) {
    const uint8_t* row = d.data() + h.data_offset + stride * (h.top_down ? y : h.height - 1 - y);
    uint8_t* out = img.rgb.data() + size_t{y} * h.width * 3;
    for (uint32_t x = 0; x < h.width; ++x, out += 3) {
      if (b <= 8) {
        const uint32_t bit = x * b;
        const uint32_t index = (row[bit / 8] >> (8 - b - bit % 8)) & ((1u << b) - 1);
        std::memcpy(out, &palette[3 * index], 3);
      } else if (fields) {
        const uint32_t pixel = b == 16 ? le16({row, stride}, 2 * size_t{x}) : le32({row, stride}, 4 * size_t{x});
        for (int c = 0; c < 3; ++c) out[c] = expand_field(pixel, masks[c]);
      } else {  // 24 or 32 bits, BGR(X)
        const uint8_t* px = row + size_t{x} * (b / 8);
        out[0] = px[2], out[1] = px[1], out[2] = px[0];
      }
    }
  }
}

}  // namespace joader::formats
