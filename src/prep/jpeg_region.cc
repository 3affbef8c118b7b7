#include "prep/jpeg_region.h"

// jpeglib.h needs FILE and size_t declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <memory>

#include "prep/pil_cmyk.h"
#include "prep/scratch.h"

namespace joader {
namespace {

// libjpeg reports errors through callbacks that must not return: jump back to the call's setjmp.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errors{};
  std::jmp_buf jump{};
  bool created = false;
  std::vector<uint8_t> cmyk_row, last_row;

  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  std::longjmp(static_cast<Decoder*>(cinfo->client_data)->jump, 1);
}

// Level -1 is a warning (corrupt data libjpeg recovered from, a truncated file): the full decode
// decides what it means, so give up. Other levels are trace messages, off by default.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0) std::longjmp(static_cast<Decoder*>(cinfo->client_data)->jump, 1);
}

// The work between setjmp and a possible longjmp; only `d` (on the heap, not in this frame) and
// `out` (the caller's) change, so nothing here is left indeterminate by a jump.
bool decode(Decoder* d, std::span<const uint8_t> data, uint64_t max_pixels,
            const std::function<PixelRect(uint32_t, uint32_t)>& choose, ImageRegion& out) {
  jpeg_decompress_struct* cinfo = &d->cinfo;
  cinfo->client_data = d;  // kept by jpeg_create_decompress, read by the error callbacks
  jpeg_create_decompress(cinfo);
  d->created = true;
  jpeg_mem_src(cinfo, data.data(), static_cast<unsigned long>(data.size()));
  if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) return false;
  const uint32_t width = cinfo->image_width, height = cinfo->image_height;
  if (width == 0 || height == 0 || uint64_t{width} * height > max_pixels) return false;
  PixelRect want;
  try {
    want = choose(width, height);
  } catch (...) {
    return false;
  }
  if (want.left >= want.right || want.top >= want.bottom || want.right > width || want.bottom > height) return false;

  // What decode_image gets from TurboJPEG with flags 0: accurate integer DCT, fancy upsampling
  // (libjpeg's defaults, which PIL uses too), RGB out, CMYK converted afterwards.
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  jpeg_start_decompress(cinfo);

  // One pixel more on each side than asked: the band's own edge pixels may be upsampled as the
  // image's edges are, and are then not part of the rectangle.
  JDIMENSION left = want.left > 0 ? want.left - 1 : 0;
  JDIMENSION band = std::min(width, want.right + 1) - left;
  // libjpeg-turbo 2.1 upsamples a 4:2:0 band 2 pixels wide wrongly (found by the tests: every
  // row but the first differs); 3 is the narrowest band that was exact for every kind and place.
  while (band < 3 && band < width) {
    if (left + band < width) {
      ++band;
    } else {
      --left;
      ++band;
    }
  }
  if (band < cinfo->output_width) jpeg_crop_scanline(cinfo, &left, &band);  // moves left to an iMCU edge

  out.full_width = width;
  out.full_height = height;
  out.left = left;
  out.top = want.top;
  out.width = cinfo->output_width;
  out.height = want.bottom - want.top;
  reserve_decode_memory(uint64_t{out.width} * out.height * 3);
  out.rgb.resize(size_t{out.width} * out.height * 3);
  if (cmyk) d->cmyk_row.resize(size_t{out.width} * 4);

  if (want.top > 0) jpeg_skip_scanlines(cinfo, want.top);
  for (uint32_t y = 0; y < out.height; ++y) {
    uint8_t* row = &out.rgb[size_t{y} * out.width * 3];
    JSAMPROW target = cmyk ? d->cmyk_row.data() : row;
    if (jpeg_read_scanlines(cinfo, &target, 1) != 1) return false;
    if (cmyk) pil_cmyk_to_rgb(d->cmyk_row.data(), row, out.width);
  }
  // The rows below are entropy-decoded but not transformed, and the last one is read, so that
  // damage anywhere in the file (a truncated file) still warns and the full decode then gives its
  // verdict, as without the fast path. (Skipping to the very end would not read the data at all.)
  if (cinfo->output_scanline + 1 < cinfo->output_height)
    jpeg_skip_scanlines(cinfo, cinfo->output_height - 1 - cinfo->output_scanline);
  if (cinfo->output_scanline < cinfo->output_height) {
    d->last_row.resize(size_t{out.width} * (cmyk ? 4 : 3));
    JSAMPROW target = d->last_row.data();
    if (jpeg_read_scanlines(cinfo, &target, 1) != 1) return false;
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

bool decode_jpeg_region(std::span<const uint8_t> data, uint64_t max_pixels,
                        const std::function<PixelRect(uint32_t, uint32_t)>& choose, ImageRegion& out) {
  auto d = std::make_unique<Decoder>();
  d->cinfo.err = jpeg_std_error(&d->errors);
  d->errors.error_exit = on_error;
  d->errors.emit_message = on_message;
  if (setjmp(d->jump) != 0) return false;  // ~Decoder destroys the decompressor
  return decode(d.get(), data, max_pixels, choose, out);
}

}  // namespace joader
