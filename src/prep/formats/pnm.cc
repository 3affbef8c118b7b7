// PPM / PGM / PBM: prep/image_formats.h says what is decoded and how.
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "prep/formats/decoders.h"

namespace joader::formats {

namespace {

struct PnmHeader {
  char kind = 0;  // '1', '2', '3' (plain text) or '4', '5', '6' (binary)
  uint32_t width = 0, height = 0, maxval = 1;
  size_t data = 0;  // where the samples start
};

// The header, once `d` holds it; false when it ends before.
bool read_pnm_header(std::span<const uint8_t> d, PnmHeader& h) {
  h.kind = char(d[1]);
  if (h.kind < '1' || h.kind > '6') throw PrepError(std::string("unknown PNM kind P") + h.kind);
  size_t at = 2;
  uint64_t values[3] = {0, 0, 1};
  const int count = h.kind == '1' || h.kind == '4' ? 2 : 3;
  for (int v = 0; v < count; ++v) {
    for (;;) {  // whitespace and comments
      if (at >= d.size()) return false;
      if (d[at] == '#') {
        while (at < d.size() && d[at] != '\n' && d[at] != '\r') ++at;
      } else if (std::isspace(d[at])) {
        ++at;
      } else {
        break;
      }
    }
    if (!std::isdigit(d[at])) throw PrepError("corrupt PNM header");
    uint64_t n = 0;
    while (at < d.size() && std::isdigit(d[at])) {
      n = n * 10 + (d[at++] - '0');
      if (n > 0xffffffffu) throw PrepError("corrupt PNM header: number too large");
    }
    if (at >= d.size()) return false;
    values[v] = n;
  }
  h.width = uint32_t(values[0]);
  h.height = uint32_t(values[1]);
  h.maxval = uint32_t(values[2]);
  if (h.maxval == 0 || h.maxval > 65535) throw PrepError("corrupt PNM header: maxval must be 1 to 65535");
  h.data = at + 1;  // one whitespace character ends the header
  return true;
}

}  // namespace

ImageSize probe_pnm(std::span<const uint8_t> d, uint64_t max_pixels) {
  PnmHeader h;
  if (!read_pnm_header(d, h)) return {};
  check_pixels(h.width, h.height, max_pixels, "PPM");
  return {h.width, h.height};
}

namespace {

// Plain PNM samples one after the other: P1's are single '0'/'1' characters (whitespace between
// them optional), P2's and P3's decimal numbers; '#' starts a comment up to the end of its line.
class PlainSamples {
 public:
  PlainSamples(std::span<const uint8_t> d, size_t at, char kind, uint32_t maxval)
      : d_(d), at_(at), bits_(kind == '1'), maxval_(maxval) {}
  uint32_t next() {
    for (;;) {
      if (at_ >= d_.size()) throw PrepError("corrupt or truncated PPM: pixel data cut short");
      if (d_[at_] == '#') {
        while (at_ < d_.size() && d_[at_] != '\n' && d_[at_] != '\r') ++at_;
      } else if (std::isspace(d_[at_])) {
        ++at_;
      } else {
        break;
      }
    }
    if (bits_) {
      const uint8_t c = d_[at_++];
      if (c != '0' && c != '1') throw PrepError("corrupt PBM: a sample that is not 0 or 1");
      return c - '0';
    }
    if (!std::isdigit(d_[at_])) throw PrepError("corrupt PPM: a sample that is not a number");
    uint64_t v = 0;
    while (at_ < d_.size() && std::isdigit(d_[at_])) {
      v = v * 10 + (d_[at_++] - '0');
      if (v > maxval_) throw PrepError("corrupt PPM: a sample above maxval " + std::to_string(maxval_));
    }
    return uint32_t(v);
  }

 private:
  std::span<const uint8_t> d_;
  size_t at_;
  bool bits_;
  uint32_t maxval_;
};

}  // namespace

void decode_pnm(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  PnmHeader h;
  if (!read_pnm_header(d, h)) throw PrepError("corrupt or truncated PPM: header cut short");
  check_pixels(h.width, h.height, max_pixels, "PPM");
  const bool plain = h.kind <= '3';
  const char kind = plain ? char(h.kind + 3) : h.kind;  // plain samples map as their binary kind's
  const uint32_t channels = kind == '6' ? 3 : 1;
  const uint32_t bytes = h.maxval > 255 ? 2 : 1;
  const uint64_t stride = kind == '4' ? (uint64_t{h.width} + 7) / 8 : uint64_t{h.width} * channels * bytes;
  // A plain sample takes at least a byte: a header that claims more than the file holds fails here,
  // before the image is allocated.
  const uint64_t needed = plain ? uint64_t{h.width} * channels * h.height : stride * h.height;
  if (h.data > d.size() || needed > d.size() - h.data) {
    throw PrepError("corrupt or truncated PPM: pixel data cut short");
  }
  // PIL: maxval 255 as is; 16-bit PGM read as mode I (values as they are) and clipped to 255 by
  // convert("RGB"); any other maxval scaled to 255 with Python's round (ties to even).
  const bool clip16 = kind == '5' && h.maxval == 65535;
  uint8_t lut8[256];
  for (uint32_t v = 0; v < 256; ++v) {
    lut8[v] = uint8_t(std::min(255.0, std::nearbyint(double(std::min(v, h.maxval)) / h.maxval * 255.0)));
  }
  auto sample = [&](uint32_t v) -> uint8_t {
    if (clip16) return uint8_t(std::min<uint32_t>(v, 255));
    if (h.maxval == 255) return uint8_t(v);
    if (bytes == 1) return lut8[v];
    if (kind == '5') {  // mode I: scaled to 65535, then clipped
      return uint8_t(std::min(255.0, std::nearbyint(double(std::min(v, h.maxval)) / h.maxval * 65535.0)));
    }
    return uint8_t(std::min(255.0, std::nearbyint(double(std::min(v, h.maxval)) / h.maxval * 255.0)));
  };
  resize_image(img, h.width, h.height);
  if (plain) {
    PlainSamples samples(d, h.data - 1, h.kind, h.maxval);
    uint8_t* out = img.rgb.data();
    for (uint64_t p = 0; p < uint64_t{h.width} * h.height; ++p, out += 3) {
      if (kind == '4') {  // 1 is black
        out[0] = out[1] = out[2] = samples.next() ? 0 : 255;
      } else if (channels == 1) {
        out[0] = out[1] = out[2] = sample(samples.next());
      } else {
        for (uint32_t c = 0; c < 3; ++c) out[c] = sample(samples.next());
      }
    }
    return;
  }
  for (uint32_t y = 0; y < h.height; ++y) {
    const uint8_t* row = d.data() + h.data + stride * y;
    uint8_t* out = img.rgb.data() + size_t{y} * h.width * 3;
    for (uint32_t x = 0; x < h.width; ++x, out += 3) {
      if (h.kind == '4') {  // 1 is black
        out[0] = out[1] = out[2] = (row[x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
        continue;
      }
      for (uint32_t c = 0; c < 3; ++c) {
        const uint8_t* s = row + (size_t{x} * channels + (channels == 3 ? c : 0)) * bytes;
        out[c] = sample(bytes == 2 ? uint32_t(s[0]) << 8 | s[1] : s[0]);
      }
    }
  }
}

}  // namespace joader::formats
