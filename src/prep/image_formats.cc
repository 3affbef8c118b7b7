#include "prep/image_formats.h"

#include <gif_lib.h>
#include <tiffio.h>
#include <webp/decode.h>

#include <cstring>
#include <string>

#include "prep/formats/decoders.h"

namespace joader {

using namespace formats;

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
