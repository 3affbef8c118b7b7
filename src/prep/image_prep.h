// Image preparation: turns an item's stored bytes into what a job receives, the way torchvision's
// ImageFolder loader (PIL `Image.open(f).convert('RGB')`) followed by `Resize(S)` and
// `CenterCrop(C)` would, so that a job sees the same pixels as its PyTorch pipeline.
//
// Every function is thread-safe: loader threads call prepare() concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "prep/jpeg_region.h"

namespace joader {

// Three stored forms: raw (bytes passed through), decoded and center-cropped to crop×crop (the
// evaluation pipeline, fixed size), or decoded at each image's own size, optionally resized (the
// form per-job augmentation starts from; items differ in size).
struct PrepSpec {
  bool raw = true;                  // true: the stored bytes pass through unchanged
  uint32_t resize = 0;              // decode modes: shorter side resized to this (0: to `crop`, or
                                    // left alone when crop is 0 too)
  uint32_t crop = 0;                // decode mode: center crop crop×crop; 0: stored at own size
  uint64_t max_pixels = 178956970;  // decompression-bomb limit on declared width*height; PIL's
                                    // error threshold (2 × Image.MAX_IMAGE_PIXELS)
  // "raw", or e.g. "decode, resize 256, center crop 224, uint8 HWC RGB".
  std::string describe() const;
};

// What the bytes prepare() gives for `spec` depend on: its description, the version of Joader's
// preparation code (bumped whenever the bytes for some spec change) and the decoders' versions
// (as loaded where the library can say; libjpeg-turbo's and giflib's as built).
// A copy of prepared bytes that outlives the daemon (the disk tier) is keyed by it, so that an
// upgrade never serves bytes another build prepared.
std::string prepared_bytes_identity(const PrepSpec& spec);

// Bad input (undecodable or oversized image, invalid spec). The message is one line meant for the
// user, e.g. "corrupt or truncated JPEG: Premature end of JPEG file".
class PrepError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Output bytes per item when fixed (crop*crop*3), 0 when variable (raw, own size).
size_t prepared_size(const PrepSpec& spec);

// True for the stored form of decoded images at their own (or resized) size.
inline bool own_size(const PrepSpec& spec) { return !spec.raw && spec.crop == 0; }

// Width and height of an image, from its header.
struct ImageSize {
  uint32_t width = 0, height = 0;
  bool operator==(const ImageSize&) const = default;
};

// Reads the size of an image (JPEG, PNG, or a format of prep/image_formats.h) from the first bytes of its file (the JPEG frame header may lie
// after large APP segments). Returns {0, 0} when `prefix` ends before the size: call again with
// the whole file. Throws PrepError as decode_image does for what is not an image, a corrupt
// header, or a declared size above max_pixels.
ImageSize probe_image(std::span<const uint8_t> prefix, uint64_t max_pixels);

// The size an own_size() spec stores a width×height image at: shorter side resized to
// spec.resize as torchvision's Resize does, or unchanged when resize is 0.
ImageSize stored_size(const PrepSpec& spec, uint32_t width, uint32_t height);

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height rows of width RGB pixels, no padding
};

// Decodes a JPEG or PNG (recognised by its magic bytes, as PIL does; WEBP, TIFF, BMP, PPM/PGM and
// GIF as prep/image_formats.h says) to 8-bit RGB, converting
// colour the way PIL's convert('RGB') does:
//   - grayscale → R = G = B;
//   - CMYK and YCCK JPEG: PIL reads every 4-component JPEG as Adobe-inverted CMYK and converts
//     with R = K' − C·K'/255 (K' = 255 − K, integer rounding as in Pillow's cmyk2rgb), which on
//     the values libjpeg returns (s = 255 − ink) is R ≈ s_C·s_K/255; no ICC profile is applied;
//   - PNG palette → its colours; alpha (and tRNS) is dropped, not composited;
//   - 16-bit PNG → the high byte of each sample, except 16-bit grayscale without alpha, which PIL
//     converts (via mode I;16) by clipping: min(v, 255);
//   - gAMA/sRGB/iCCP chunks and EXIF orientation are ignored, as PIL's loader ignores them.
// Checks the declared width*height against max_pixels from the header, before allocating.
// Throws PrepError with a one-line reason: "empty file (0 bytes)", "not a JPEG, PNG, WEBP, TIFF,
// BMP, PPM or GIF image (starts with 3c 68 74 6d)", "corrupt or truncated JPEG: <libjpeg message>", "corrupt or
// truncated PNG: <libpng message>", "image declares 60000×60000 pixels, more than the limit of
// 178956970". JPEG warnings are tolerated as PIL tolerates them (the image decodes), except
// "Premature end of JPEG file", where PIL reports a truncated file.
// Checked bit-identical to Pillow 9.4 (Debian 12) on baseline, progressive, 4:4:4, grayscale and
// CMYK JPEGs and on 1/2/4/8/16-bit gray, gray+alpha, RGB, RGBA, palette+tRNS and interlaced PNGs.
Image decode_image(std::span<const uint8_t> encoded, uint64_t max_pixels);

// Where torchvision's Resize(S) + CenterCrop(C) put a width×height image (S = spec.resize, or
// spec.crop when 0): resized to resized_width × resized_height, shorter side S and longer side
// int(S * long / short) (Python's truncating float arithmetic; the image is left alone when that
// is its size already), then the C×C window whose top-left corner is (crop_left, crop_top) in the
// resized image, round((D - C) / 2.0) with Python's ties-to-even round. A negative offset means
// the resized image is smaller than C in that dimension: CenterCrop then pads with zeros,
// (C - D) // 2 before and the rest after, so the offset is -((C - D) // 2).
// PIL's resampling filters for Image.resize (Resample.c), as resize_window applies them.
enum class ResizeFilter : uint8_t { kBilinear, kBicubic };

struct PrepGeometry {
  uint64_t resized_width = 0, resized_height = 0;
  int64_t crop_left = 0, crop_top = 0;
  ResizeFilter filter = ResizeFilter::kBilinear;  // datasets: bilinear; augmentation: the op's
};
PrepGeometry prep_geometry(const PrepSpec& spec, uint32_t width, uint32_t height);

// torchvision CenterCrop's offset of a C-wide window in a D-wide dimension, as PrepGeometry's
// crop_left/crop_top (negative: zero padding).
int64_t center_offset(uint64_t d, uint64_t c);

// img resized to g.resized_width×g.resized_height with PIL's antialiased bilinear (or bicubic:
// g.filter) filter (in its fixed-point arithmetic, computed only for the window), then the
// crop_w×crop_h window whose
// top-left corner is (g.crop_left, g.crop_top) written to out as HWC RGB, zeros where the window
// lies outside the resized image.
void resize_window(const Image& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h, std::vector<uint8_t>& out);

// Pixels read in place: `height` rows of `width` RGB pixels, `stride` bytes apart (a window of a
// larger image, or an image in shared memory). When left or top is set, only a region of the
// image is stored and `rgb` points at its first pixel, (left, top): resize_window reads no pixel
// outside window_source().
struct ImageView {
  const uint8_t* rgb = nullptr;
  uint32_t width = 0, height = 0;
  size_t stride = 0;
  uint32_t left = 0, top = 0;
};
// Two ways to run the horizontal pass, with the same bytes: row by row (PIL's way, kept as the
// reference the tests compare with), or on the transposed window in bands of rows, where it is the
// same vectorised weighted sum as the vertical pass, and faster (bench/prep_bench.cc measures both;
// docs/BENCHMARKS.md, "The resampler").
enum class HorizontalPass { kByRows, kByColumns };
void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h,
                   std::vector<uint8_t>& out, HorizontalPass pass = HorizontalPass::kByColumns);
// The same into `out`, which must hold exactly crop_w × crop_h × 3 bytes (throws PrepError if not).
void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h,
                   std::span<uint8_t> out, HorizontalPass pass = HorizontalPass::kByColumns);

// Takes an image's rows one at a time: row(y, rgb) with rgb the y-th row's width × 3 bytes (HWC),
// valid only during the call. For writers that lay the rows out elsewhere (a batch's planes, floats)
// while each row is still in the core's cache, instead of storing the image and reading it again.
class RowSink {
 public:
  virtual void row(int64_t y, const uint8_t* rgb) = 0;

 protected:
  ~RowSink() = default;
};
// The same pixels as resize_window into a buffer, handed to `sink` row by row, rows 0 .. crop_h - 1
// in order (padding rows as zeros).
void resize_window(const ImageView& img, const PrepGeometry& g, int64_t crop_w, int64_t crop_h, RowSink& sink,
                   HorizontalPass pass = HorizontalPass::kByColumns);

// The source pixels (of a width×height image) that resize_window(img, g, crop_w, crop_h) reads:
// the filter's support around the part of the window that lies inside the resized image. Empty
// when the window lies wholly outside it.
PixelRect window_source(uint32_t width, uint32_t height, const PrepGeometry& g, int64_t crop_w, int64_t crop_h);

// raw mode: out = encoded. Decode mode: decode_image, then resize and center crop as
// prep_geometry says (zero padding where the resized image is smaller than the crop, like
// CenterCrop) into out, crop×crop×3 bytes of HWC RGB. The resize is PIL's antialiased bilinear
// filter (what torchvision's Resize does to PIL images), reproduced in its fixed-point arithmetic
// and computed only for the crop window: the bytes equal torchvision's ImageFolder + Resize +
// CenterCrop + PILToTensor pipeline (tests/python checks it). A JPEG is decoded only as far as
// window_source() needs (decode_jpeg_region: the same bytes for less decoding work; docs/BENCHMARKS.md,
// "Targets, limits and where the time goes"); anything that path declines is decoded whole. Throws
// PrepError as decode_image does, when the spec is invalid (crop = 0 in decode mode), or when the
// resized image would exceed max_pixels (extreme aspect ratios).
// Own-size mode: decode_image, then the resize when spec.resize is set, stored whole as HWC RGB.
// Returns the stored image's size (crop×crop in crop mode, {0, 0} for raw).
ImageSize prepare(const PrepSpec& spec, std::span<const uint8_t> encoded, std::vector<uint8_t>& out);
// prepare() writing straight into `out` — e.g. an item's block of the daemon's shared-memory
// arena, saving the copy from a buffer; the same bytes. With a crop, `out` must hold exactly
// prepared_size(spec) bytes; at the image's own size, exactly its stored width · height · 3 (as
// probed from its header): PrepError naming both sizes otherwise (the file changed since). A JPEG
// stored at its own size is decoded into `out` directly. Throws PrepError as prepare() does, and
// for raw specs.
ImageSize prepare_into(const PrepSpec& spec, std::span<const uint8_t> encoded, std::span<uint8_t> out);

// Encodes img (RGB) as a baseline JPEG with 4:2:0 chroma subsampling (PIL's default) and the
// accurate DCT, at the given quality (1..100). For the synthetic source and tests.
std::vector<uint8_t> encode_jpeg(const Image& img, int quality);

}  // namespace joader
