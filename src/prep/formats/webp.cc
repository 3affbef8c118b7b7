// WEBP: prep/image_formats.h says what is decoded and how.
#include <webp/decode.h>

#include "prep/formats/decoders.h"

namespace joader::formats {

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
  if (status != VP8_STATUS_OK)
    throw PrepError("corrupt or truncated WEBP (libwebp status " + std::to_string(status) + ")");
}

}  // namespace joader::formats
