#include "prep/image_formats.h"

#include <gif_lib.h>
#include <tiffio.h>
#include <webp/decode.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prep/scratch.h"

namespace joader {
namespace {

uint32_t le16(std::span<const uint8_t> d, size_t at) { return uint32_t(d[at]) | uint32_t(d[at + 1]) << 8; }
uint32_t le32(std::span<const uint8_t> d, size_t at) { return le16(d, at) | le16(d, at + 2) << 16; }
uint32_t be16(std::span<const uint8_t> d, size_t at) { return uint32_t(d[at]) << 8 | d[at + 1]; }
uint32_t be32(std::span<const uint8_t> d, size_t at) { return be16(d, at) << 16 | be16(d, at + 2); }

void check_pixels(uint64_t width, uint64_t height, uint64_t max_pixels, const char* format) {
  if (width == 0 || height == 0) throw PrepError(std::string("corrupt ") + format + ": image has no pixels");
  if (width * height > max_pixels) {
    throw PrepError("image declares " + std::to_string(width) + "×" + std::to_string(height) +
                    " pixels, more than the limit of " + std::to_string(max_pixels));
  }
}

void resize_image(Image& img, uint32_t width, uint32_t height) {
  img.width = width;
  img.height = height;
  reserve_decode_memory(uint64_t{width} * height * 3);
  img.rgb.resize(size_t{width} * height * 3);
}

// ---- WEBP -------------------------------------------------------------------------------------

ImageSize probe_webp(std::span<const uint8_t> d, uint64_t max_pixels) {
  WebPBitstreamFeatures f;
  const VP8StatusCode status = WebPGetFeatures(d.data(), d.size(), &f);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) return {};
  if (status != VP8_STATUS_OK) throw PrepError("corrupt or truncated WEBP: no readable header");
  check_pixels(f.width, f.height, max_pixels, "WEBP");
  return {uint32_t(f.width), uint32_t(f.height)};
}

void decode_webp(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw PrepError("WEBP: libwebp version mismatch");
  if (WebPGetFeatures(d.data(), d.size(), &config.input) != VP8_STATUS_OK) {
    throw PrepError("corrupt or truncated WEBP: no readable header");
  }
  if (config.input.has_animation) throw PrepError("animated WEBP images are not supported");
  check_pixels(config.input.width, config.input.height, max_pixels, "WEBP");
  resize_image(img, config.input.width, config.input.height);
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = img.rgb.data();
  config.output.u.RGBA.stride = int(img.width * 3);
  config.output.u.RGBA.size = img.rgb.size();
  const VP8StatusCode status = WebPDecode(d.data(), d.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) throw PrepError("corrupt or truncated WEBP (libwebp status " + std::to_string(status) + ")");
}

// ---- TIFF -------------------------------------------------------------------------------------

ImageSize probe_tiff(std::span<const uint8_t> d, uint64_t max_pixels) {
  if (d.size() < 8) return {};
  const bool little = d[0] == 'I';
  auto u16 = [&](size_t at) { return little ? le16(d, at) : be16(d, at); };
  auto u32 = [&](size_t at) { return little ? le32(d, at) : be32(d, at); };
  if (u16(2) != 42) throw PrepError("BigTIFF files are not supported");
  const uint64_t ifd = u32(4);
  if (ifd + 2 > d.size()) return {};
  const uint32_t entries = u16(ifd);
  if (ifd + 2 + uint64_t{entries} * 12 > d.size()) return {};
  uint32_t width = 0, height = 0;
  for (uint32_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + size_t{e} * 12;
    const uint32_t tag = u16(at), type = u16(at + 2);
    const uint32_t value = type == 3 ? u16(at + 8) : u32(at + 8);  // SHORT or LONG
    if (tag == 256) width = value;
    if (tag == 257) height = value;
  }
  check_pixels(width, height, max_pixels, "TIFF");
  return {width, height};
}

// libtiff reads from memory through these; its messages go to the calling thread's last_tiff_error.
struct TiffMemory {
  std::span<const uint8_t> data;
  uint64_t at = 0;
};
thread_local std::string last_tiff_error;

tmsize_t tiff_read(thandle_t h, void* buf, tmsize_t n) {
  auto* m = static_cast<TiffMemory*>(h);
  const uint64_t take = std::min<uint64_t>(uint64_t(n), m->data.size() - std::min<uint64_t>(m->at, m->data.size()));
  if (take > 0) std::memcpy(buf, m->data.data() + m->at, take);
  m->at += take;
  return tmsize_t(take);
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t tiff_seek(thandle_t h, toff_t offset, int whence) {
  auto* m = static_cast<TiffMemory*>(h);
  const uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->at : m->data.size();
  m->at = base + offset;
  return m->at;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffMemory*>(h)->data.size(); }

void tiff_error(const char*, const char* fmt, va_list ap) {
  char message[256];
  std::vsnprintf(message, sizeof message, fmt, ap);
  last_tiff_error = message;
}
void tiff_warning(const char*, const char*, va_list) {}

void decode_tiff(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  static std::once_flag handlers;
  std::call_once(handlers, [] {
    TIFFSetErrorHandler(tiff_error);
    TIFFSetWarningHandler(tiff_warning);
  });
  last_tiff_error.clear();
  TiffMemory memory{d};
  TIFF* tif = TIFFClientOpen("memory", "rm", &memory, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                             nullptr, nullptr);
  auto fail = [&](const std::string& what) -> PrepError {
    return PrepError("corrupt or truncated TIFF: " + (last_tiff_error.empty() ? what : last_tiff_error));
  };
  if (tif == nullptr) throw fail("cannot read its header");
  std::unique_ptr<TIFF, void (*)(TIFF*)> closer(tif, TIFFClose);
  uint32_t width = 0, height = 0;
  uint16_t samples = 1, bits = 1, photometric = PHOTOMETRIC_MINISBLACK, planar = PLANARCONFIG_CONTIG;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  check_pixels(width, height, max_pixels, "TIFF");
  resize_image(img, width, height);
  const bool rgb = photometric == PHOTOMETRIC_RGB && samples >= 3;
  const bool gray = (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) && samples >= 1;
  if (bits == 8 && planar == PLANARCONFIG_CONTIG && !TIFFIsTiled(tif) && (rgb || gray)) {
    // As PIL unpacks it: the samples themselves (min-is-white inverted), extra samples dropped.
    const tmsize_t line_bytes = TIFFScanlineSize(tif);
    if (line_bytes < 0 || uint64_t(line_bytes) < uint64_t{width} * samples) throw fail("rows shorter than the image");
    std::vector<uint8_t> line(static_cast<size_t>(line_bytes));
    const uint8_t invert = photometric == PHOTOMETRIC_MINISWHITE ? 255 : 0;
    for (uint32_t y = 0; y < height; ++y) {
      if (TIFFReadScanline(tif, line.data(), y) < 0) throw fail("cannot read row " + std::to_string(y));
      uint8_t* out = img.rgb.data() + size_t{y} * width * 3;
      for (uint32_t x = 0; x < width; ++x, out += 3) {
        const uint8_t* px = line.data() + size_t{x} * samples;
        if (rgb) {
          out[0] = px[0], out[1] = px[1], out[2] = px[2];
        } else {
          out[0] = out[1] = out[2] = px[0] ^ invert;
        }
      }
    }
    return;
  }
  reserve_decode_memory(uint64_t{width} * height * 4);
  std::vector<uint32_t> raster(size_t{width} * height);
  if (!TIFFReadRGBAImageOriented(tif, width, height, raster.data(), ORIENTATION_TOPLEFT, 0)) {
    throw fail("libtiff cannot convert it to RGB");
  }
  for (size_t i = 0; i < raster.size(); ++i) {
    img.rgb[3 * i] = TIFFGetR(raster[i]);
    img.rgb[3 * i + 1] = TIFFGetG(raster[i]);
    img.rgb[3 * i + 2] = TIFFGetB(raster[i]);
  }
}

// ---- BMP --------------------------------------------------------------------------------------

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

ImageSize probe_bmp(std::span<const uint8_t> d, uint64_t max_pixels) {
  BmpHeader h;
  if (!read_bmp_header(d, h)) return {};
  check_pixels(h.width, h.height, max_pixels, "BMP");
  return {h.width, h.height};
}

// A bit field's value expanded to 8 bits as PIL's unpackers do (v · 255 / max).
uint8_t expand_field(uint32_t pixel, uint32_t mask) {
  if (mask == 0) return 0;
  const int shift = std::countr_zero(mask);
  const uint32_t max = mask >> shift;
  return uint8_t(((pixel & mask) >> shift) * 255 / max);
}

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

// ---- PPM / PGM / PBM --------------------------------------------------------------------------

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

ImageSize probe_pnm(std::span<const uint8_t> d, uint64_t max_pixels) {
  PnmHeader h;
  if (!read_pnm_header(d, h)) return {};
  check_pixels(h.width, h.height, max_pixels, "PPM");
  return {h.width, h.height};
}

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

// ---- GIF --------------------------------------------------------------------------------------

ImageSize probe_gif(std::span<const uint8_t> d, uint64_t max_pixels) {
  if (d.size() < 10) return {};
  check_pixels(le16(d, 6), le16(d, 8), max_pixels, "GIF");
  return {le16(d, 6), le16(d, 8)};
}

struct GifMemory {
  std::span<const uint8_t> data;
  size_t at = 0;
};

int gif_read(GifFileType* gif, GifByteType* out, int n) {
  auto* m = static_cast<GifMemory*>(gif->UserData);
  const size_t take = std::min<size_t>(size_t(n), m->data.size() - m->at);
  std::memcpy(out, m->data.data() + m->at, take);
  m->at += take;
  return int(take);
}

const char* gif_error(int code) {
  const char* what = GifErrorString(code);
  return what != nullptr ? what : "unknown error";
}

void decode_gif(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  GifMemory memory{d};
  int error = 0;
  GifFileType* gif = DGifOpen(&memory, gif_read, &error);
  if (gif == nullptr) throw PrepError(std::string("corrupt GIF: ") + gif_error(error));
  std::unique_ptr<GifFileType, void (*)(GifFileType*)> closer(gif, [](GifFileType* g) { DGifCloseFile(g, nullptr); });
  check_pixels(gif->SWidth, gif->SHeight, max_pixels, "GIF");
  // Only the first image is read (what PIL's convert() of a freshly opened GIF shows).
  GifRecordType record;
  do {
    if (DGifGetRecordType(gif, &record) == GIF_ERROR) throw PrepError(std::string("corrupt GIF: ") + gif_error(gif->Error));
    if (record == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType* ext;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) throw PrepError("corrupt GIF: bad extension block");
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) throw PrepError("corrupt GIF: bad extension block");
      }
    }
  } while (record != IMAGE_DESC_RECORD_TYPE && record != TERMINATE_RECORD_TYPE);
  if (record != IMAGE_DESC_RECORD_TYPE) throw PrepError("corrupt GIF: no image");
  if (DGifGetImageDesc(gif) == GIF_ERROR) throw PrepError("corrupt GIF: bad image descriptor");
  const GifImageDesc& frame = gif->Image;
  if (frame.Width > 0 && frame.Height > 0) check_pixels(frame.Width, frame.Height, max_pixels, "GIF");
  const ColorMapObject* map = frame.ColorMap != nullptr ? frame.ColorMap : gif->SColorMap;
  const uint32_t width = gif->SWidth, height = gif->SHeight;
  auto colour = [&](uint32_t index, uint8_t* out) {
    if (map != nullptr && int(index) < map->ColorCount) {
      out[0] = map->Colors[index].Red, out[1] = map->Colors[index].Green, out[2] = map->Colors[index].Blue;
    } else {
      out[0] = out[1] = out[2] = 0;
    }
  };
  resize_image(img, width, height);
  uint8_t background[3];
  colour(uint32_t(gif->SBackGroundColor), background);
  for (size_t i = 0; i < size_t{width} * height; ++i) std::memcpy(&img.rgb[3 * i], background, 3);
  if (frame.Width <= 0 || frame.Height <= 0) return;
  std::vector<GifPixelType> line(size_t(frame.Width));
  std::vector<int> rows;
  if (frame.Interlace) {
    for (int start : {0, 4, 2, 1}) {
      for (int y = start; y < frame.Height; y += start == 0 ? 8 : start == 4 ? 8 : start == 2 ? 4 : 2) rows.push_back(y);
    }
  } else {
    for (int y = 0; y < frame.Height; ++y) rows.push_back(y);
  }
  for (int y : rows) {
    if (DGifGetLine(gif, line.data(), frame.Width) == GIF_ERROR) throw PrepError("corrupt or truncated GIF: image data cut short");
    const int64_t cy = int64_t{frame.Top} + y;
    if (cy < 0 || cy >= int64_t{height}) continue;
    for (int x = 0; x < frame.Width; ++x) {
      const int64_t cx = int64_t{frame.Left} + x;
      if (cx >= 0 && cx < int64_t{width}) colour(line[size_t(x)], &img.rgb[(size_t(cy) * width + size_t(cx)) * 3]);
    }
  }
}

}  // namespace

ImageFormat sniff_format(std::span<const uint8_t> h) {
  auto starts = [&](const char* magic, size_t at = 0) {
    const size_t n = std::strlen(magic);
    return h.size() >= at + n && std::memcmp(h.data() + at, magic, n) == 0;
  };
  if (h.size() >= 3 && h[0] == 0xFF && h[1] == 0xD8 && h[2] == 0xFF) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::kWebp;
  if (starts("II*") || starts("MM")) {
    if (h.size() >= 4 && ((h[0] == 'I' && h[2] == 42 && h[3] == 0) || (h[0] == 'M' && h[2] == 0 && (h[3] == 42 || h[3] == 43)) ||
                          (h[0] == 'I' && h[2] == 43 && h[3] == 0))) {
      return ImageFormat::kTiff;
    }
  }
  if (starts("BM")) return ImageFormat::kBmp;
  if (h.size() >= 2 && h[0] == 'P' && h[1] >= '1' && h[1] <= '6') return ImageFormat::kPnm;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

const char* format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WEBP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kPnm: return "PPM";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageSize probe_other_format(ImageFormat format, std::span<const uint8_t> prefix, uint64_t max_pixels) {
  switch (format) {
    case ImageFormat::kWebp: return probe_webp(prefix, max_pixels);
    case ImageFormat::kTiff: return probe_tiff(prefix, max_pixels);
    case ImageFormat::kBmp: return probe_bmp(prefix, max_pixels);
    case ImageFormat::kPnm: return probe_pnm(prefix, max_pixels);
    case ImageFormat::kGif: return probe_gif(prefix, max_pixels);
    default: throw PrepError("probe_other_format: not one of the other formats");
  }
}

void decode_other_format(ImageFormat format, std::span<const uint8_t> encoded, uint64_t max_pixels, Image& img) {
  switch (format) {
    case ImageFormat::kWebp: return decode_webp(encoded, max_pixels, img);
    case ImageFormat::kTiff: return decode_tiff(encoded, max_pixels, img);
    case ImageFormat::kBmp: return decode_bmp(encoded, max_pixels, img);
    case ImageFormat::kPnm: return decode_pnm(encoded, max_pixels, img);
    case ImageFormat::kGif: return decode_gif(encoded, max_pixels, img);
    default: throw PrepError("decode_other_format: not one of the other formats");
  }
}

std::string other_decoder_versions() {
  const int webp = WebPGetDecoderVersion();
  std::string tiff = TIFFGetVersion();  // "LIBTIFF, Version 4.5.0\nCopyright ..."
  tiff = tiff.substr(0, tiff.find('\n'));
  return "libwebp " + std::to_string(webp >> 16) + "." + std::to_string((webp >> 8) & 0xff) + "." +
         std::to_string(webp & 0xff) + ", " + tiff + ", giflib " + std::to_string(GIFLIB_MAJOR) + "." +
         std::to_string(GIFLIB_MINOR) + "." + std::to_string(GIFLIB_RELEASE);
}

}  // namespace joader
