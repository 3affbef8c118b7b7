// PIL's resampling of a crop window: resize_window and window_source (image_prep.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/simd_clones.h"
#include "prep/image_prep.h"
#include "prep/scratch.h"

namespace joader {
namespace {

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

namespace {

// Both passes over the part of the crop_w×crop_h window that lies inside the resized image: the
// horizontal pass into rows of scratch, then the vertical pass, which writes output row y's pixels
// [ox0, ox1) at out.row(y) + (ox0 - crop_left) × 3 and then calls out.done(y), for the window's
// rows inside the image in order. `Out` leaves the padding (rows and columns outside) to its caller.
template <class Out>
void resample_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h, HorizontalPass pass,
                     Out& out) {
  const auto W = static_cast<int64_t>(g.resized_width), H = static_cast<int64_t>(g.resized_height);
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, W);
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, H);
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
  // Vertical pass, straight into the output rows.
  for (int64_t j = 0; j < ny; ++j) {
    const int64_t y = oy0 - g.crop_top + j;
    weighted_rows(&rows[static_cast<size_t>((v.first[j] - row_first) * nx * 3)], static_cast<size_t>(nx * 3),
                  &v.weights[static_cast<size_t>(j * v.ksize)], v.count[j],
                  out.row(y) + static_cast<size_t>(ox0 - g.crop_left) * 3, nx * 3);
    out.done(y);
  }
  release_if_large(rows);
}

}  // namespace

void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h,
                   std::span<uint8_t> out, HorizontalPass pass) {
  if (out.size() != static_cast<size_t>(crop_w * crop_h * 3)) {
    throw PrepError("resize_window: the output holds " + std::to_string(out.size()) + " bytes, not " +
                    std::to_string(crop_w * crop_h * 3));
  }
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, static_cast<int64_t>(g.resized_width));
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, static_cast<int64_t>(g.resized_height));
  // Every byte of the window inside the resized image is written below; only padding needs zeros.
  const bool padded = ox0 > g.crop_left || oy0 > g.crop_top || ox1 < g.crop_left + crop_w || oy1 < g.crop_top + crop_h;
  if (padded) std::memset(out.data(), 0, out.size());
  struct {
    uint8_t* data;
    size_t row_bytes;
    uint8_t* row(int64_t y) const { return data + static_cast<size_t>(y) * row_bytes; }
    void done(int64_t) const {}
  } rows{out.data(), static_cast<size_t>(crop_w) * 3};
  resample_window(img, g, crop_w, crop_h, pass, rows);
}

void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h, RowSink& sink,
                   HorizontalPass pass) {
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, static_cast<int64_t>(g.resized_width));
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, static_cast<int64_t>(g.resized_height));
  // One row of scratch, zero where the window lies outside the resized image (never written).
  thread_local std::vector<uint8_t> scratch;
  scratch.assign(static_cast<size_t>(crop_w) * 3, 0);
  const bool empty = ox1 <= ox0 || oy1 <= oy0;
  const int64_t first = empty ? crop_h : std::clamp<int64_t>(oy0 - g.crop_top, 0, crop_h);  // padding above
  const int64_t last = empty ? crop_h : std::clamp<int64_t>(oy1 - g.crop_top, first, crop_h);  // below from here
  for (int64_t y = 0; y < first; ++y) sink.row(y, scratch.data());
  struct {
    RowSink& sink;
    uint8_t* scratch;
    uint8_t* row(int64_t) const { return scratch; }
    void done(int64_t y) const { sink.row(y, scratch); }
  } rows{sink, scratch.data()};
  resample_window(img, g, crop_w, crop_h, pass, rows);
  std::fill(scratch.begin(), scratch.end(), 0);
  for (int64_t y = last; y < crop_h; ++y) sink.row(y, scratch.data());
}

PixelRect window_source(uint32_t width, uint32_t height, const PrepGeometry& g, int64_t crop_w, int64_t crop_h) {
  const auto [ox0, ox1] = inside(g.crop_left, crop_w, static_cast<int64_t>(g.resized_width));
  const auto [oy0, oy1] = inside(g.crop_top, crop_h, static_cast<int64_t>(g.resized_height));
  if (ox1 <= ox0 || oy1 <= oy0) return {};
  const auto [left, right] = input_span(g.filter, width, static_cast<int64_t>(g.resized_width), ox0, ox1);
  const auto [top, bottom] = input_span(g.filter, height, static_cast<int64_t>(g.resized_height), oy0, oy1);
  return {left, top, right, bottom};
}

}  // namespace joader
