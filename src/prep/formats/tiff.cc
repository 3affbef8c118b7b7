// TIFF: prep/image_formats.h says what is decoded and how.
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <tiffio.h>

#include "prep/formats/decoders.h"

namespace joader::formats {

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

namespace {

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

}  // namespace

void decode_tiff(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  static std::once_flag handlers;
  std::call_once(handlers, [] {
    TIFFSetErrorHandler(tiff_error);
    TIFFSetWarningHandler(tiff_warning);
  });
  last_tiff_error.clear();
  TiffMemory memory{d};
  TIFF* tif = TIFFClientOpen("memory", "rm", &memory, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size, nullptr,
                             nullptr);
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

}  // namespace joader::formats
