#include "prep/codecs.h"

#include <jconfig.h>  // LIBJPEG_TURBO_VERSION_NUMBER
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <climits>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prep/image_formats.h"
#include "prep/pil_cmyk.h"
#include "prep/scratch.h"

namespace joader {

std::string prepared_bytes_identity(const PrepSpec& spec) {
  constexpr int kPreparationVersion = 1;
  // libjpeg-turbo has no run-time version call: its version as built (Debian rebuilds us with it).
  return spec.describe() + "; joader preparation " + std::to_string(kPreparationVersion) + ", libjpeg-turbo " +
         std::to_string(LIBJPEG_TURBO_VERSION_NUMBER) + ", libpng " + png_get_libpng_ver(nullptr) + ", " +
         other_decoder_versions();
}
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// ---- JPEG (TurboJPEG) ----

// TurboJPEG handles are not thread-safe and hold the whole libjpeg state, so each thread keeps
// one of each kind rather than creating one per call. A call that failed (or warned) may leave that
// state half-way through a stream, and the next file would then be read against it ("two SOI
// markers"): such a handle is destroyed and the thread's next call makes a new one (Retire).
class TjHandle {
 public:
  explicit TjHandle(tjhandle (*init)()) : init_(init) {}
  ~TjHandle() { reset(); }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle get() {
    if (!handle_) handle_ = init_();
    if (!handle_) throw PrepError(std::string("cannot create a TurboJPEG handle: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }
  void reset() {
    if (handle_) tjDestroy(handle_);
    handle_ = nullptr;
  }

 private:
  tjhandle (*init_)();
  tjhandle handle_ = nullptr;
};

TjHandle& decompressor() {
  thread_local TjHandle handle(tjInitDecompress);
  return handle;
}

TjHandle& compressor() {
  thread_local TjHandle handle(tjInitCompress);
  return handle;
}

// Resets `handle` when the scope ends unless done() was called: every exit by an exception or an
// error code of TurboJPEG's leaves the next call a fresh handle.
class Retire {
 public:
  explicit Retire(TjHandle& handle) : handle_(handle) {}
  ~Retire() {
    if (!done_) handle_.reset();
  }
  Retire(const Retire&) = delete;
  Retire& operator=(const Retire&) = delete;
  void done() { done_ = true; }

 private:
  TjHandle& handle_;
  bool done_ = false;
};

// libjpeg refuses a frame header above its 65500-pixel limit before TurboJPEG can report the size:
// PrepError saying so, where the call that just failed on `tj` failed for that.
void check_jpeg_limit(tjhandle tj) {
  const std::string_view message = tjGetErrorStr2(tj);
  if (message.find("Maximum supported image dimension") != std::string_view::npos) {
    throw PrepError("JPEG too large: " + std::string(message));
  }
}

// Decodes into the width · height · 3 bytes that dest(width, height) returns once the header is
// read (it may throw to refuse the size).
template <class Dest>
ImageSize decode_jpeg_to(std::span<const uint8_t> data, uint64_t max_pixels, Dest dest) {
  Retire retire(decompressor());
  tjhandle tj = decompressor().get();
  int width = 0, height = 0, subsamp = -1, colorspace = -1;
  const int rc =
      tjDecompressHeader3(tj, data.data(), data.size(), &width, &height, &subsamp, &colorspace);
  if (rc != 0) check_jpeg_limit(tj);
  // TurboJPEG 2.x fails this call for sampling factors it has no TJSAMP for, and on warnings, after
  // filling in the size and colour space; tjDecompress2 decodes those images (as PIL does). So the
  // header is judged by what it returned, not by the return code.
  if (width <= 0 || height <= 0 || colorspace < 0) {
    // A stream cut before its first scan reads as "tables only" (return code 0), with libjpeg's
    // "Premature end of JPEG file" warning as the only sign of the truncation.
    const bool tables_only = rc == 0 && tjGetErrorCode(tj) != TJERR_WARNING;
    throw PrepError(std::string("corrupt or truncated JPEG: ") +
                    (tables_only ? "tables only, no image" : tjGetErrorStr2(tj)));
  }
  if (static_cast<uint64_t>(width) * static_cast<uint64_t>(height) > max_pixels)
    throw_too_large(width, height, max_pixels);

  uint8_t* rgb = dest(static_cast<uint32_t>(width), static_cast<uint32_t>(height));
  // libjpeg converts CMYK/YCCK only to CMYK: decode to a CMYK buffer and convert as PIL does.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  if (cmyk) reserve_decode_memory(uint64_t(width) * uint64_t(height) * 4);
  std::vector<uint8_t> cmyk_pixels(cmyk ? static_cast<size_t>(width) * height * 4 : 0);
  // Flags 0: accurate integer DCT and fancy upsampling, libjpeg's defaults, which PIL uses too.
  const int decoded = tjDecompress2(tj, data.data(), data.size(), cmyk ? cmyk_pixels.data() : rgb, width, 0,
                                    height, cmyk ? TJPF_CMYK : TJPF_RGB, 0);
  if (rc == 0 && decoded == 0) retire.done();  // a clean run leaves the handle ready for the next file
  if (decoded != 0) {
    const std::string message = tjGetErrorStr2(tj);
    // A warning means libjpeg recovered and decoded the whole image, as PIL (which ignores
    // warnings) would. The exception is a file cut short: libjpeg pads it with gray and warns
    // "Premature end of JPEG file", where PIL raises "image file is truncated". (TurboJPEG 2.1
    // keeps the first warning's text only, and reports a fatal error that follows a warning as a
    // warning: such a file is accepted with its undecoded rows left black.)
    if (tjGetErrorCode(tj) == TJERR_FATAL || message == "Premature end of JPEG file")
      throw PrepError("corrupt or truncated JPEG: " + message);
  }
  if (cmyk) pil_cmyk_to_rgb(cmyk_pixels.data(), rgb, cmyk_pixels.size() / 4);
  return {static_cast<uint32_t>(width), static_cast<uint32_t>(height)};
}

void decode_jpeg(std::span<const uint8_t> data, uint64_t max_pixels, Image& img) {
  decode_jpeg_to(data, max_pixels, [&img](uint32_t width, uint32_t height) {
    img.width = width;
    img.height = height;
    reserve_decode_memory(uint64_t{width} * height * 3);
    img.rgb.resize(size_t{width} * height * 3);
    return img.rgb.data();
  });
}

// ---- PNG (libpng) ----
//
// libpng's transform API rather than its simplified png_image_* API: the simplified API treats
// 16-bit samples as linear light and converts them to sRGB, applies gAMA, and composites alpha
// away, none of which PIL does.

struct PngReader {
  std::span<const uint8_t> data;
  size_t pos = 0;
  char message[256] = "";
  png_structp png = nullptr;
  png_infop info = nullptr;

  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

// Keeps libpng's message and jumps back to read_png (libpng's default handler would print it).
void on_png_error(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof reader->message, "%s", message);
  png_longjmp(png, 1);
}

// PIL ignores what libpng merely warns about (bad ancillary chunks), and so do we.
void on_png_warning(png_structp, png_const_charp) {}

void read_png_bytes(png_structp png, png_bytep out, size_t n) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > reader->data.size() - reader->pos) png_error(png, "unexpected end of data");
  std::memcpy(out, reader->data.data() + reader->pos, n);
  reader->pos += n;
}

enum class PngStatus { kOk, kError, kTooLarge };

// Reads the image into img.rgb, or, for 16-bit grayscale, into `wide` (2 bytes per pixel, big
// endian) for the caller to convert. Kept apart from decode_png so that no object with a destructor
// lives in the frame that longjmp returns to (C++ leaves that undefined); every object it touches
// belongs to the caller.
PngStatus read_png(PngReader& r, uint64_t max_pixels, Image& img, std::vector<uint8_t>& wide,
                   std::vector<png_bytep>& rows) {
  if (setjmp(png_jmpbuf(r.png))) return PngStatus::kError;
  png_set_read_fn(r.png, &r, read_png_bytes);
  // libpng's own size limits would report a large image as corrupt; max_pixels decides instead.
  png_set_user_limits(r.png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_read_info(r.png, r.info);
  img.width = png_get_image_width(r.png, r.info);
  img.height = png_get_image_height(r.png, r.info);
  if (static_cast<uint64_t>(img.width) * img.height > max_pixels) return PngStatus::kTooLarge;

  const int color_type = png_get_color_type(r.png, r.info);
  const int bit_depth = png_get_bit_depth(r.png, r.info);
  // PIL opens 16-bit grayscale as mode I;16, whose conversion to RGB clips at 255 rather than
  // taking the high byte as it does for every other 16-bit layout.
  const bool gray16 = color_type == PNG_COLOR_TYPE_GRAY && bit_depth == 16;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r.png);
  // Scales 1/2/4-bit gray to 0..255, as PIL's L;1, L;2, L;4 unpackers do.
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(r.png);
  if (!gray16) {
    png_set_strip_16(r.png);  // keeps the high byte, as PIL's RGB;16B-style unpackers do
    png_set_gray_to_rgb(r.png);
  }
  png_set_strip_alpha(r.png);
  png_set_interlace_handling(r.png);
  png_read_update_info(r.png, r.info);

  const size_t row_bytes = png_get_rowbytes(r.png, r.info);
  if (row_bytes != static_cast<size_t>(img.width) * (gray16 ? 2 : 3))
    png_error(r.png, "unexpected row layout after conversion to RGB");
  reserve_decode_memory(uint64_t{img.width} * img.height * 3 + (gray16 ? uint64_t{row_bytes} * img.height : 0));
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  if (gray16) wide.resize(row_bytes * img.height);
  uint8_t* base = gray16 ? wide.data() : img.rgb.data();
  rows.resize(img.height);
  for (uint32_t y = 0; y < img.height; ++y) rows[y] = base + y * row_bytes;
  png_read_image(r.png, rows.data());
  return PngStatus::kOk;
}

void decode_png(std::span<const uint8_t> data, uint64_t max_pixels, Image& img) {
  PngReader reader{.data = data};
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_png_error, on_png_warning);
  if (reader.png) reader.info = png_create_info_struct(reader.png);
  if (!reader.info) throw PrepError("cannot create a PNG decoder: out of memory");
  std::vector<uint8_t> wide;
  std::vector<png_bytep> rows;
  switch (read_png(reader, max_pixels, img, wide, rows)) {
    case PngStatus::kOk:
      break;
    case PngStatus::kError:
      throw PrepError(std::string("corrupt or truncated PNG: ") + reader.message);
    case PngStatus::kTooLarge:
      throw_too_large(img.width, img.height, max_pixels);
  }
  for (size_t i = 0, n = wide.size() / 2; i < n; ++i) {
    const uint8_t v = wide[2 * i] != 0 ? 255 : wide[2 * i + 1];
    std::fill_n(&img.rgb[3 * i], 3, v);
  }
}

std::string hex_prefix(std::span<const uint8_t> data) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(data.size(), 4); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof byte, "%s%02x", i ? " " : "", data[i]);
    out += byte;
  }
  return out;
}

std::string not_an_image(std::span<const uint8_t> data) {
  return "not a JPEG, PNG, WEBP, TIFF, BMP, PPM or GIF image (starts with " + hex_prefix(data) + ")";
}


}  // namespace

// The magic bytes PIL's JPEG plugin accepts.
bool is_jpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

[[noreturn]] void throw_too_large(uint64_t width, uint64_t height, uint64_t max_pixels) {
  throw PrepError("image declares " + std::to_string(width) + "×" + std::to_string(height) +
                  " pixels, more than the limit of " + std::to_string(max_pixels));
}

ImageSize probe_image(std::span<const uint8_t> prefix, uint64_t max_pixels) {
  if (prefix.empty()) throw PrepError("empty file (0 bytes)");
  ImageSize size;
  if (is_jpeg(prefix)) {
    int width = 0, height = 0, subsamp = -1, colorspace = -1;
    Retire retire(decompressor());
    tjhandle tj = decompressor().get();
    if (tjDecompressHeader3(tj, prefix.data(), prefix.size(), &width, &height, &subsamp, &colorspace) == 0) {
      retire.done();
    } else {
      check_jpeg_limit(tj);
    }
    if (width <= 0 || height <= 0) return {};  // no frame header yet: the caller reads the whole file
    size = {uint32_t(width), uint32_t(height)};
  } else if (prefix.size() >= sizeof kPngMagic && std::memcmp(prefix.data(), kPngMagic, sizeof kPngMagic) == 0) {
    if (prefix.size() < 24) return {};
    auto be32 = [&](size_t at) {
      return uint32_t(prefix[at]) << 24 | uint32_t(prefix[at + 1]) << 16 | uint32_t(prefix[at + 2]) << 8 | prefix[at + 3];
    };
    if (std::memcmp(prefix.data() + 12, "IHDR", 4) != 0) throw PrepError("corrupt or truncated PNG: no IHDR chunk");
    size = {be32(16), be32(20)};
    if (size.width == 0 || size.height == 0) throw PrepError("corrupt or truncated PNG: image has no pixels");
  } else if (const ImageFormat format = sniff_format(prefix); format != ImageFormat::kUnknown) {
    return probe_other_format(format, prefix, max_pixels);
  } else {
    throw PrepError(not_an_image(prefix));
  }
  if (uint64_t{size.width} * size.height > max_pixels) throw_too_large(size.width, size.height, max_pixels);
  return size;
}

void decode_into(std::span<const uint8_t> encoded, uint64_t max_pixels, Image& img) {
  if (encoded.empty()) throw PrepError("empty file (0 bytes)");
  // The magic bytes PIL's JPEG and PNG plugins accept.
  if (is_jpeg(encoded)) return decode_jpeg(encoded, max_pixels, img);
  if (encoded.size() >= sizeof kPngMagic && std::memcmp(encoded.data(), kPngMagic, sizeof kPngMagic) == 0)
    return decode_png(encoded, max_pixels, img);
  if (const ImageFormat format = sniff_format(encoded); format != ImageFormat::kUnknown) {
    return decode_other_format(format, encoded, max_pixels, img);
  }
  throw PrepError(not_an_image(encoded));
}

void check_block_fits(ImageSize image, size_t block_bytes) {
  const uint64_t bytes = uint64_t{image.width} * image.height * 3;
  if (bytes != block_bytes) {
    throw PrepError("the image is " + std::to_string(image.width) + "×" + std::to_string(image.height) + " pixels, " +
                    std::to_string(bytes) + " bytes, not the " + std::to_string(block_bytes) +
                    " its header gave when the dataset was added (did the file change?)");
  }
}

ImageSize decode_jpeg_into(std::span<const uint8_t> encoded, uint64_t max_pixels, std::span<uint8_t> out) {
  return decode_jpeg_to(encoded, max_pixels, [out](uint32_t width, uint32_t height) {
    check_block_fits({width, height}, out.size());
    return out.data();
  });
}

Image decode_image(std::span<const uint8_t> encoded, uint64_t max_pixels) {
  Image img;
  decode_into(encoded, max_pixels, img);
  return img;
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality) {
  if (img.width == 0 || img.height == 0 ||
      img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3)
    throw PrepError("cannot encode JPEG: the buffer does not hold width×height RGB pixels");
  Retire retire(compressor());
  tjhandle tj = compressor().get();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, img.rgb.data(), static_cast<int>(img.width), 0, static_cast<int>(img.height),
                  TJPF_RGB, &jpeg, &size, TJSAMP_420, quality, TJFLAG_ACCURATEDCT);
  const std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(jpeg, tjFree);
  if (rc != 0) throw PrepError(std::string("cannot encode JPEG: ") + tjGetErrorStr2(tj));
  retire.done();
  return std::vector<uint8_t>(jpeg, jpeg + size);
}

}  // namespace joader
