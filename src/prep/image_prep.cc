#include "prep/image_prep.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/simd_clones.h"
#include "prep/image_formats.h"
#include "prep/pil_cmyk.h"

namespace joader {
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// The magic bytes PIL's JPEG plugin accepts.
bool is_jpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

// Decoded pixels are kept in per-thread buffers from one prepare() to the next instead of
// allocating (and zeroing) half a megabyte per image. In bench/prep_bench (one thread) this made no
// measurable difference (1.38 → 1.37 ms per eval prep): glibc recycled the blocks already. A buffer
// one very large image grew is released, so that it does not stay pinned in every loader thread.
constexpr size_t kKeepScratchBytes = size_t{32} << 20;

Image& scratch_image() {
  thread_local Image img;
  return img;
}

ImageRegion& scratch_region() {
  thread_local ImageRegion region;
  return region;
}

template <class T>
void release_if_large(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > kKeepScratchBytes) std::vector<T>().swap(v);
}

[[noreturn]] void throw_too_large(uint64_t width, uint64_t height, uint64_t max_pixels) {
  throw PrepError("image declares " + std::to_string(width) + "×" + std::to_string(height) +
                  " pixels, more than the limit of " + std::to_string(max_pixels));
}

void check_decode_spec(const PrepSpec& spec) {
  if (!spec.raw && spec.crop == 0) throw PrepError("decode mode needs a crop size > 0");
}

// The shorter side resized to `size`, the longer to int(size * long / short), as torchvision's Resize.
ImageSize shorter_side_to(uint64_t size, uint32_t width, uint32_t height) {
  const uint64_t shorter = std::min(width, height), longer = std::max(width, height);
  // The product is exact and the division a correctly rounded double, as in Python, for any
  // product below 2^53.
  const auto new_long = static_cast<uint64_t>(static_cast<double>(size * longer) / static_cast<double>(shorter));
  return width <= height ? ImageSize{uint32_t(size), uint32_t(new_long)} : ImageSize{uint32_t(new_long), uint32_t(size)};
}

// ---- JPEG (TurboJPEG) ----

// TurboJPEG handles are not thread-safe and hold the whole libjpeg state, so each thread keeps
// one of each kind rather than creating one per call.
class TjHandle {
 public:
  explicit TjHandle(tjhandle handle) : handle_(handle) {}
  ~TjHandle() {
    if (handle_) tjDestroy(handle_);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle get() const {
    if (!handle_)
      throw PrepError(std::string("cannot create a TurboJPEG handle: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }

 private:
  tjhandle handle_;
};

tjhandle decompressor() {
  thread_local TjHandle handle(tjInitDecompress());
  return handle.get();
}

tjhandle compressor() {
  thread_local TjHandle handle(tjInitCompress());
  return handle.get();
}

void decode_jpeg(std::span<const uint8_t> data, uint64_t max_pixels, Image& img) {
  tjhandle tj = decompressor();
  int width = 0, height = 0, subsamp = -1, colorspace = -1;
  const int rc =
      tjDecompressHeader3(tj, data.data(), data.size(), &width, &height, &subsamp, &colorspace);
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

  img.width = static_cast<uint32_t>(width);
  img.height = static_cast<uint32_t>(height);
  img.rgb.resize(static_cast<size_t>(width) * height * 3);
  // libjpeg converts CMYK/YCCK only to CMYK: decode to a CMYK buffer and convert as PIL does.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> cmyk_pixels(cmyk ? static_cast<size_t>(width) * height * 4 : 0);
  // Flags 0: accurate integer DCT and fancy upsampling, libjpeg's defaults, which PIL uses too.
  if (tjDecompress2(tj, data.data(), data.size(), cmyk ? cmyk_pixels.data() : img.rgb.data(), width,
                    0, height, cmyk ? TJPF_CMYK : TJPF_RGB, 0) != 0) {
    const std::string message = tjGetErrorStr2(tj);
    // A warning means libjpeg recovered and decoded the whole image, as PIL (which ignores
    // warnings) would. The exception is a file cut short: libjpeg pads it with gray and warns
    // "Premature end of JPEG file", where PIL raises "image file is truncated". (TurboJPEG 2.1
    // keeps the first warning's text only, and reports a fatal error that follows a warning as a
    // warning: such a file is accepted with its undecoded rows left black.)
    if (tjGetErrorCode(tj) == TJERR_FATAL || message == "Premature end of JPEG file")
      throw PrepError("corrupt or truncated JPEG: " + message);
  }
  if (cmyk) pil_cmyk_to_rgb(cmyk_pixels.data(), img.rgb.data(), cmyk_pixels.size() / 4);
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


// PIL's bilinear (and bicubic) resampling, which torchvision's Resize applies to PIL images
// (Image.resize(size, BILINEAR), libImaging/Resample.c): a triangle filter widened by the scale
// when shrinking (antialiasing), weights normalised per output pixel and rounded to fixed point
// with 22 fraction bits, a horizontal pass into uint8 rows, then a vertical pass. Reproduced
// arithmetic for arithmetic so that the bytes equal torchvision's pipeline; computed only for
// the crop window, since each output pixel depends on its own coefficients alone.
constexpr int kPrecisionBits = 22;

struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;  // input span of each output position
  std::vector<int32_t> weights;   // ksize per output position
};

// PIL's filters: the triangle, and the cubic convolution with a = -0.5.
double filter_weight(ResizeFilter filter, double x) {
  if (x < 0.0) x = -x;
  if (filter == ResizeFilter::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Coefficients of output positions [out0, out0 + n) of an in_size -> out_size resize
// (precompute_coeffs and normalize_coeffs_8bpc).
Coefficients resize_coefficients(ResizeFilter filter, int64_t in_size, int64_t out_size, int64_t out0, int64_t n) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filterscale = std::max(1.0, scale);
  const double support = (filter == ResizeFilter::kBilinear ? 1.0 : 2.0) * filterscale;
  const double ss = 1.0 / filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(n);
  c.count.resize(n);
  c.weights.assign(static_cast<size_t>(n * c.ksize), 0);
  std::vector<double> w(c.ksize);
  for (int64_t i = 0; i < n; ++i) {
    const double center = (static_cast<double>(out0 + i) + 0.5) * scale;
    int xmin = static_cast<int>(center - support + 0.5);  // truncation, as C's (int) cast
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = static_cast<int>(in_size);
    xmax -= xmin;
    double total = 0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = filter_weight(filter, (x + xmin - center + 0.5) * ss);
      total += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = total != 0.0 ? w[x] / total : w[x];
      c.weights[static_cast<size_t>(i * c.ksize + x)] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[i] = xmin;
    c.count[i] = xmax;
  }
  return c;
}

inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

}  // namespace

namespace {

// The window's columns (or rows) inside the resized image, [first, last).
std::pair<int64_t, int64_t> inside(int64_t offset, int64_t size, int64_t resized) {
  return {std::max<int64_t>(0, offset), std::min<int64_t>(resized, offset + size)};
}

// The input span [first, last) that output positions [out0, out1) of an in -> out resize read.
std::pair<uint32_t, uint32_t> input_span(ResizeFilter filter, int64_t in, int64_t out, int64_t out0, int64_t out1) {
  const Coefficients a = resize_coefficients(filter, in, out, out0, 1);
  const Coefficients b = resize_coefficients(filter, in, out, out1 - 1, 1);
  return {static_cast<uint32_t>(a.first[0]), static_cast<uint32_t>(b.first[0] + b.count[0])};
}

}  // namespace

void resize_window(const Image& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h, std::vector<uint8_t>& out) {
  resize_window(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}, g, crop_w, crop_h, out);
}

// The kernel of both passes: dst[i] = clip8(sum over t of src[t * stride + i] * w[t], with PIL's
// rounding bias) for i in [0, n) — a weighted sum of `taps` byte rows `stride` apart. Blocks of
// kLanes outputs keep their sums in vector registers across all taps (in AVX2 and SSE4.1 clones,
// common/simd_clones.h; x86-64's baseline lacks the 32-bit vector multiply), so each input byte is
// loaded once per tap and each sum is stored once. Integer arithmetic identical to PIL's.
JOADER_CLONES
void weighted_rows(const uint8_t* src, size_t stride, const int32_t* w, int taps, uint8_t* dst, int64_t n) {
  constexpr int kLanes = 32;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    int32_t acc[kLanes];
    for (int l = 0; l < kLanes; ++l) acc[l] = 1 << (kPrecisionBits - 1);
    for (int t = 0; t < taps; ++t) {
      const uint8_t* s = src + static_cast<size_t>(t) * stride + i;
      const int32_t wt = w[t];
      for (int l = 0; l < kLanes; ++l) acc[l] += s[l] * wt;
    }
    for (int l = 0; l < kLanes; ++l) {
      const int32_t v = acc[l] >> kPrecisionBits;
      dst[i + l] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
  for (; i < n; ++i) {
    int32_t acc = 1 << (kPrecisionBits - 1);
    for (int t = 0; t < taps; ++t) acc += src[static_cast<size_t>(t) * stride + i] * w[t];
    dst[i] = clip8(acc);
  }
}

// A pixel moved as one 4-byte word: the caller makes sure the fourth byte may be read and written.
inline void move_word(uint8_t* dst, const uint8_t* src) {
  uint32_t word;
  std::memcpy(&word, src, 4);
  std::memcpy(dst, &word, 4);
}

// The horizontal pass, computed on the transposed input so that it becomes the same contiguous
// weighted sum as the vertical pass. The rows are taken in bands of kBand: a band's input columns
// [x0, x1) are laid out column by column (each column: the band's rows' RGB in order, 3 × kBand
// bytes and a spare byte), every output column is then a weighted sum of whole input columns, and
// its pixels are written back into their rows. A band's transposed copy ((x1 - x0) × 97 bytes)
// stays in the core's cache, which a copy of the whole window did not right after a decode.
// Pixels are moved as 4-byte words (one load and one store instead of two of each): each word's
// fourth byte lands where a later store writes, or in a spare byte. Integer arithmetic identical
// to PIL's, so the bytes are too.
void horizontal_pass_by_columns(const ImageView& img, const Coefficients& h, int row_first, int row_last, int64_t nx,
                                uint8_t* rows) {
  constexpr int kBand = 32;
  const int x0 = h.first[0], x1 = h.first[nx - 1] + h.count[nx - 1];
  thread_local std::vector<uint8_t> columns;
  columns.resize(static_cast<size_t>(x1 - x0) * (kBand * 3 + 1));
  uint8_t out_column[kBand * 3 + 1] = {};  // a spare byte for the last pixel's 4-byte load
  const size_t row_bytes = static_cast<size_t>(nx) * 3;
  for (int y0 = row_first; y0 < row_last; y0 += kBand) {
    const int band = std::min(kBand, row_last - y0);
    const size_t column = static_cast<size_t>(band) * 3;  // bytes per transposed column
    const size_t stride = column + 1;
    for (int r = 0; r < band; ++r) {
      const uint8_t* in =
          img.rgb + static_cast<size_t>(y0 + r - img.top) * img.stride + static_cast<size_t>(x0 - img.left) * 3;
      uint8_t* dst = columns.data() + static_cast<size_t>(r) * 3;
      int x = 0;
      for (; x < x1 - x0 - 1; ++x, in += 3, dst += stride) move_word(dst, in);
      std::memcpy(dst, in, 3);  // the byte after a row's last pixel may lie outside the image
    }
    uint8_t* out_rows = rows + static_cast<size_t>(y0 - row_first) * row_bytes;
    for (int64_t i = 0; i < nx; ++i) {
      weighted_rows(columns.data() + static_cast<size_t>(h.first[i] - x0) * stride, stride,
                    &h.weights[static_cast<size_t>(i * h.ksize)], h.count[i], out_column,
                    static_cast<int64_t>(column));
      // 4-byte words again, except for a row's last pixel: its fourth byte would be the next row's
      // first, written already.
      uint8_t* dst = out_rows + static_cast<size_t>(i) * 3;
      if (i + 1 < nx) {
        for (size_t r = 0; r < column; r += 3, dst += row_bytes) move_word(dst, out_column + r);
      } else {
        for (size_t r = 0; r < column; r += 3, dst += row_bytes) std::memcpy(dst, out_column + r, 3);
      }
    }
  }
  release_if_large(columns);
}

// The horizontal pass as PIL runs it: row by row, each output pixel a short scalar sum.
void horizontal_pass_by_rows(const ImageView& img, const Coefficients& h, int row_first, int row_last, int64_t nx,
                             uint8_t* rows) {
  for (int y = row_first; y < row_last; ++y) {
    const uint8_t* in = img.rgb + static_cast<size_t>(y - img.top) * img.stride;
    uint8_t* dst = rows + static_cast<size_t>((y - row_first) * nx * 3);
    for (int64_t i = 0; i < nx; ++i) {
      const int32_t* k = &h.weights[static_cast<size_t>(i * h.ksize)];
      const uint8_t* src = in + static_cast<size_t>(h.first[i] - static_cast<int>(img.left)) * 3;
      int32_t r = 1 << (kPrecisionBits - 1), gg = r, b = r;
      for (int x = 0; x < h.count[i]; ++x) {
        r += src[3 * x] * k[x];
        gg += src[3 * x + 1] * k[x];
        b += src[3 * x + 2] * k[x];
      }
      dst[3 * i] = clip8(r);
      dst[3 * i + 1] = clip8(gg);
      dst[3 * i + 2] = clip8(b);
    }
  }
}

void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h,
                   std::vector<uint8_t>& out, HorizontalPass pass) {
  out.resize(static_cast<size_t>(crop_w * crop_h * 3));
  resize_window(img, g, crop_w, crop_h, std::span<uint8_t>(out), pass);
}

void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h,
                   std::span<uint8_t> out, HorizontalPass pass) {
  if (out.size() != static_cast<size_t>(crop_w * crop_h * 3)) {
    throw PrepError("resize_window: the output holds " + std::to_string(out.size()) + " bytes, not " +
                    std::to_string(crop_w * crop_h * 3));
  }
  const auto W = static_cast<int64_t>(g.resized_width), H = static_cast<int64_t>(g.resized_height);
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, W);
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, H);
  // Every byte of the window inside the resized image is written below; only padding needs zeros.
  const bool padded = ox0 > g.crop_left || oy0 > g.crop_top || ox1 < g.crop_left + crop_w || oy1 < g.crop_top + crop_h;
  if (padded) std::memset(out.data(), 0, out.size());
  if (ox1 <= ox0 || oy1 <= oy0) return;
  const int64_t nx = ox1 - ox0, ny = oy1 - oy0;
  const Coefficients h = resize_coefficients(g.filter, img.width, W, ox0, nx);
  const Coefficients v = resize_coefficients(g.filter, img.height, H, oy0, ny);
  const int row_first = v.first[0];
  const int row_last = v.first[ny - 1] + v.count[ny - 1];
  // Horizontal pass over the input rows the window needs.
  thread_local std::vector<uint8_t> rows;
  rows.resize(static_cast<size_t>((row_last - row_first) * nx * 3));
  if (pass == HorizontalPass::kByColumns) {
    horizontal_pass_by_columns(img, h, row_first, row_last, nx, rows.data());
  } else {
    horizontal_pass_by_rows(img, h, row_first, row_last, nx, rows.data());
  }
  // Vertical pass, straight into the output window.
  for (int64_t j = 0; j < ny; ++j) {
    weighted_rows(&rows[static_cast<size_t>((v.first[j] - row_first) * nx * 3)], static_cast<size_t>(nx * 3),
                  &v.weights[static_cast<size_t>(j * v.ksize)], v.count[j],
                  &out[static_cast<size_t>(((oy0 - g.crop_top + j) * crop_w + (ox0 - g.crop_left)) * 3)], nx * 3);
  }
  release_if_large(rows);
}

PixelRect window_source(uint32_t width, uint32_t height, const PrepGeometry& g, int64_t crop_w, int64_t crop_h) {
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, static_cast<int64_t>(g.resized_width));
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, static_cast<int64_t>(g.resized_height));
  if (ox1 <= ox0 || oy1 <= oy0) return {};
  const auto [left, right] = input_span(g.filter, width, static_cast<int64_t>(g.resized_width), ox0, ox1);
  const auto [top, bottom] = input_span(g.filter, height, static_cast<int64_t>(g.resized_height), oy0, oy1);
  return {left, top, right, bottom};
}

std::string PrepSpec::describe() const {
  if (raw) return "raw";
  if (crop == 0) {
    return resize ? "decode, resize " + std::to_string(resize) + ", uint8 HWC RGB at each image's size"
                  : "decode, uint8 HWC RGB at each image's own size";
  }
  return "decode, resize " + std::to_string(resize ? resize : crop) + ", center crop " +
         std::to_string(crop) + ", uint8 HWC RGB";
}

ImageSize probe_image(std::span<const uint8_t> prefix, uint64_t max_pixels) {
  if (prefix.empty()) throw PrepError("empty file (0 bytes)");
  ImageSize size;
  if (is_jpeg(prefix)) {
    int width = 0, height = 0, subsamp = -1, colorspace = -1;
    tjDecompressHeader3(decompressor(), prefix.data(), prefix.size(), &width, &height, &subsamp, &colorspace);
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

ImageSize stored_size(const PrepSpec& spec, uint32_t width, uint32_t height) {
  if (spec.resize == 0 || width == 0 || height == 0) return {width, height};
  return shorter_side_to(spec.resize, width, height);
}

size_t prepared_size(const PrepSpec& spec) {
  return spec.raw ? 0 : static_cast<size_t>(spec.crop) * spec.crop * 3;
}

namespace {

// decode_image into img, whose buffer is reused (grown, never shrunk).
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

}  // namespace

Image decode_image(std::span<const uint8_t> encoded, uint64_t max_pixels) {
  Image img;
  decode_into(encoded, max_pixels, img);
  return img;
}

int64_t center_offset(uint64_t d, uint64_t c) {
  if (d < c) return -static_cast<int64_t>((c - d) / 2);
  // round((d - c) / 2.0) with Python's ties-to-even: n/2, plus one when n is odd and n/2 is odd.
  const uint64_t n = d - c;
  return static_cast<int64_t>(n / 2 + ((n & 1) & ((n / 2) & 1)));
}

PrepGeometry prep_geometry(const PrepSpec& spec, uint32_t width, uint32_t height) {
  check_decode_spec(spec);
  if (width == 0 || height == 0) throw PrepError("image has no pixels");
  const ImageSize resized = shorter_side_to(spec.resize ? spec.resize : spec.crop, width, height);
  PrepGeometry g;
  g.resized_width = resized.width;
  g.resized_height = resized.height;
  g.crop_left = center_offset(g.resized_width, spec.crop);
  g.crop_top = center_offset(g.resized_height, spec.crop);
  return g;
}

namespace {

// The resized image's pixel limit; it also keeps the sizes within an int.
uint64_t resize_limit(const PrepSpec& spec) { return std::min<uint64_t>(spec.max_pixels, INT_MAX); }

bool resize_fits(const PrepSpec& spec, const PrepGeometry& g) {
  return g.resized_width <= resize_limit(spec) / g.resized_height;
}

}  // namespace

namespace {

// Decode mode with a crop, into `out`: a vector (resized) or a span of exactly crop² · 3 bytes.
template <class Out>
ImageSize prepare_crop(const PrepSpec& spec, std::span<const uint8_t> encoded, Out& out) {
  check_decode_spec(spec);
  if (is_jpeg(encoded)) {
    PrepGeometry g;
    ImageRegion& region = scratch_region();
    const auto choose = [&](uint32_t width, uint32_t height) {
      g = prep_geometry(spec, width, height);
      if (!resize_fits(spec, g)) return PixelRect{};  // the full path reports it
      return window_source(width, height, g, spec.crop, spec.crop);
    };
    if (decode_jpeg_region(encoded, spec.max_pixels, choose, region)) {
      const ImageView view{region.rgb.data(), region.full_width, region.full_height, size_t{region.width} * 3,
                           region.left, region.top};
      resize_window(view, g, spec.crop, spec.crop, out);
      release_if_large(region.rgb);
      return {spec.crop, spec.crop};
    }
  }
  Image& img = scratch_image();
  decode_into(encoded, spec.max_pixels, img);
  const PrepGeometry g = prep_geometry(spec, img.width, img.height);
  if (!resize_fits(spec, g))
    throw PrepError("image of " + std::to_string(img.width) + "×" + std::to_string(img.height) +
                    " pixels would resize to " + std::to_string(g.resized_width) + "×" +
                    std::to_string(g.resized_height) + ", more than the limit of " +
                    std::to_string(resize_limit(spec)));
  // torchvision leaves an image that already has the target size alone; the filter is then the
  // identity, bit for bit, so one path serves both.
  resize_window(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}, g, spec.crop, spec.crop, out);
  release_if_large(img.rgb);
  return {spec.crop, spec.crop};
}

}  // namespace

ImageSize prepare(const PrepSpec& spec, std::span<const uint8_t> encoded, std::vector<uint8_t>& out) {
  if (spec.raw) {
    out.assign(encoded.begin(), encoded.end());
    return {};
  }
  if (!own_size(spec)) return prepare_crop(spec, encoded, out);
  Image& img = scratch_image();
  decode_into(encoded, spec.max_pixels, img);
  if (img.width == 0 || img.height == 0) throw PrepError("image has no pixels");
  const ImageSize stored = stored_size(spec, img.width, img.height);
  if (stored.width == img.width && stored.height == img.height) {
    out.swap(img.rgb);  // the caller's old buffer becomes the next call's
  } else {
    if (uint64_t{stored.width} * stored.height > spec.max_pixels) throw_too_large(stored.width, stored.height, spec.max_pixels);
    PrepGeometry g;
    g.resized_width = stored.width;
    g.resized_height = stored.height;
    resize_window(img, g, stored.width, stored.height, out);
  }
  release_if_large(img.rgb);
  return stored;
}

ImageSize prepare_into(const PrepSpec& spec, std::span<const uint8_t> encoded, std::span<uint8_t> out) {
  if (spec.raw || own_size(spec)) throw PrepError("prepare_into: the spec has no crop, so items have no one size");
  if (out.size() != prepared_size(spec)) {
    throw PrepError("prepare_into: the output holds " + std::to_string(out.size()) + " bytes, an item " +
                    std::to_string(prepared_size(spec)));
  }
  return prepare_crop(spec, encoded, out);
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality) {
  if (img.width == 0 || img.height == 0 ||
      img.rgb.size() != static_cast<size_t>(img.width) * img.height * 3)
    throw PrepError("cannot encode JPEG: the buffer does not hold width×height RGB pixels");
  tjhandle tj = compressor();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, img.rgb.data(), static_cast<int>(img.width), 0, static_cast<int>(img.height),
                  TJPF_RGB, &jpeg, &size, TJSAMP_420, quality, TJFLAG_ACCURATEDCT);
  const std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(jpeg, tjFree);
  if (rc != 0) throw PrepError(std::string("cannot encode JPEG: ") + tjGetErrorStr2(tj));
  return std::vector<uint8_t>(jpeg, jpeg + size);
}

}  // namespace joader
