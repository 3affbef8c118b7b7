// The image formats beyond JPEG and PNG that torchvision's ImageFolder lists (WEBP, TIFF, BMP,
// PPM/PGM) and GIF (for filelist: and tar: sources; imagefolder: skips .gif as torchvision does),
// decoded to 8-bit RGB with the pixels of PIL's `Image.open(f).convert("RGB")` (Pillow 9.4,
// Debian 12), which is what ImageFolder's loader returns:
//   - WEBP (libwebp, PIL's own decoder): the first frame of a still image, alpha dropped;
//     animated files are refused;
//   - TIFF (libtiff): 8-bit contiguous RGB, RGBA (alpha dropped, not premultiplied), grayscale
//     (min-is-black or min-is-white) and gray+alpha strips sample for sample, as PIL unpacks them;
//     other layouts (palette, 16-bit, tiles, YCbCr, planar) through libtiff's RGBA reader, whose
//     colours PIL may round differently (not checked);
//   - BMP: 1/4/8-bit palettes, 16-bit (5-5-5, or 5-6-5 bit fields, expanded as v·255/31 and
//     v·255/63), 24-bit and 32-bit (4th byte dropped), bottom-up or top-down; RLE is refused;
//   - PPM/PGM/PBM, binary (P4, P5, P6) and plain text (P1, P2, P3: '#' comments anywhere between
//     samples, P1's bits with or without spaces, a sample above maxval an error): maxval 255 as
//     is; other maxvals scaled as PIL does (round(v / maxval · 255), ties to even), except 16-bit
//     PGM, which PIL reads as mode I and then clips to 255 in convert("RGB");
//   - GIF (giflib): the first frame through its colour table (local, else global), on a canvas of
//     the logical screen's size filled with the background index where the frame does not cover it.
// EXIF orientation is never applied: PIL's loader does not apply it either.
//
// Every function is thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "prep/image_prep.h"

namespace joader {

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kTiff, kBmp, kPnm, kGif };

// The format PIL would recognise from the first bytes (its plugins' magic bytes); kUnknown if none.
ImageFormat sniff_format(std::span<const uint8_t> head);
// The versions of the libraries decoding these formats, as loaded (giflib's as built), e.g.
// "libwebp 1.2.4, libtiff 4.5.0, giflib 5.2.1".
std::string other_decoder_versions();
// "JPEG", "PNG", "WEBP", "TIFF", "BMP", "PPM", "GIF", "unknown".
const char* format_name(ImageFormat format);

// The size from the header of a WEBP, TIFF, BMP, PPM or GIF file; {0, 0} when `prefix` ends before
// it (read the whole file and ask again). Throws PrepError for a corrupt header or a declared size
// above max_pixels.
ImageSize probe_other_format(ImageFormat format, std::span<const uint8_t> prefix, uint64_t max_pixels);

// Decodes a WEBP, TIFF, BMP, PPM or GIF file into img (its buffer reused), as described above.
// Throws PrepError with a one-line reason ("corrupt or truncated TIFF: ...").
void decode_other_format(ImageFormat format, std::span<const uint8_t> encoded, uint64_t max_pixels, Image& img);

}  // namespace joader
