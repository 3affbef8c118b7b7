// Image preparation: the spec, the geometry of resize + center crop, and prepare() — decoding
// (codecs.h) only the window it needs where the format allows, then resampling it (resample.cc).
#include "prep/image_prep.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "prep/codecs.h"
#include "prep/jpeg_region.h"
#include "prep/scratch.h"

namespace joader {
namespace {

Image& scratch_image() {
  thread_local Image img;
  return img;
}

ImageRegion& scratch_region() {
  thread_local ImageRegion region;
  return region;
}

// One preparation's hold on the decode memory budget; on every exit, a failed decode's included,
// the scratch buffers a very large image grew are given back before the budget is.
class PreparationScope {
 public:
  ~PreparationScope() {
    release_if_large(scratch_image().rgb);
    release_if_large(scratch_region().rgb);
  }

 private:
  DecodeMemoryScope budget_;
};

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

}  // namespace

std::string PrepSpec::describe() const {
  if (raw) return "raw";
  if (crop == 0) {
    return resize ? "decode, resize " + std::to_string(resize) + ", uint8 HWC RGB at each image's size"
                  : "decode, uint8 HWC RGB at each image's own size";
  }
  return "decode, resize " + std::to_string(resize ? resize : crop) + ", center crop " +
         std::to_string(crop) + ", uint8 HWC RGB";
}

ImageSize stored_size(const PrepSpec& spec, uint32_t width, uint32_t height) {
  if (spec.resize == 0 || width == 0 || height == 0) return {width, height};
  return shorter_side_to(spec.resize, width, height);
}

size_t prepared_size(const PrepSpec& spec) {
  return spec.raw ? 0 : static_cast<size_t>(spec.crop) * spec.crop * 3;
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
  return {spec.crop, spec.crop};
}

}  // namespace

namespace {

// Own-size mode, into `out`: a vector (sized here) or a span that must hold exactly the stored
// image (an arena block sized from the image's header), where a JPEG at its own size is decoded
// directly.
template <class Out>
ImageSize prepare_own_size(const PrepSpec& spec, std::span<const uint8_t> encoded, Out& out) {
  constexpr bool into_block = std::is_same_v<Out, std::span<uint8_t>>;
  if constexpr (into_block) {
    if (spec.resize == 0 && is_jpeg(encoded)) return decode_jpeg_into(encoded, spec.max_pixels, out);
  }
  Image& img = scratch_image();
  decode_into(encoded, spec.max_pixels, img);
  if (img.width == 0 || img.height == 0) throw PrepError("image has no pixels");
  const ImageSize stored = stored_size(spec, img.width, img.height);
  if (uint64_t{stored.width} * stored.height > spec.max_pixels) throw_too_large(stored.width, stored.height, spec.max_pixels);
  if constexpr (into_block) check_block_fits(stored, out.size());
  if (stored.width == img.width && stored.height == img.height) {
    if constexpr (into_block) {
      std::memcpy(out.data(), img.rgb.data(), out.size());
    } else {
      out.swap(img.rgb);  // the caller's old buffer becomes the next call's
    }
  } else {
    PrepGeometry g;
    g.resized_width = stored.width;
    g.resized_height = stored.height;
    resize_window(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}, g, stored.width,
                  stored.height, out);
  }
  return stored;
}

}  // namespace

ImageSize prepare(const PrepSpec& spec, std::span<const uint8_t> encoded, std::vector<uint8_t>& out) {
  if (spec.raw) {
    out.assign(encoded.begin(), encoded.end());
    return {};
  }
  const PreparationScope scope;
  return own_size(spec) ? prepare_own_size(spec, encoded, out) : prepare_crop(spec, encoded, out);
}

ImageSize prepare_into(const PrepSpec& spec, std::span<const uint8_t> encoded, std::span<uint8_t> out) {
  if (spec.raw) throw PrepError("prepare_into: raw items are stored as read, not prepared");
  const PreparationScope scope;
  if (own_size(spec)) return prepare_own_size(spec, encoded, out);
  if (out.size() != prepared_size(spec)) {
    throw PrepError("prepare_into: the output holds " + std::to_string(out.size()) + " bytes, an item " +
                    std::to_string(prepared_size(spec)));
  }
  return prepare_crop(spec, encoded, out);
}

}  // namespace joader
