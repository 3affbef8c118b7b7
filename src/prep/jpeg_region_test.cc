#include "prep/jpeg_region.h"

#include <turbojpeg.h>

#include <random>
#include <string>

#include "prep/image_prep.h"

#include <gtest/gtest.h>

namespace joader {
namespace {

using Bytes = std::vector<uint8_t>;

// Noise over gradients: sharp chroma edges everywhere, so that a pixel upsampled as if at an
// edge, or a row off by one, shows.
Bytes test_pixels(int width, int height, int channels, uint32_t seed) {
  Bytes px(size_t(width) * height * channels);
  std::mt19937 rng(seed);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const int base = (c == 0 ? x * 255 / width : c == 1 ? y * 255 / height : (x ^ y) & 255);
        px[(size_t(y) * width + x) * channels + c] = static_cast<uint8_t>((base + int(rng() % 96)) & 255);
      }
  return px;
}

struct Kind {
  std::string name;
  int pixel_format, subsamp, flags;
};

// The JPEG kinds the decoder handles differently: every chroma subsampling libjpeg upsamples
// (h2v2, h2v1, h1v2 fancy; 4:1:1 plain), none, grayscale, CMYK, progressive.
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> all = {
      {"420", TJPF_RGB, TJSAMP_420, 0},        {"422", TJPF_RGB, TJSAMP_422, 0},
      {"440", TJPF_RGB, TJSAMP_440, 0},        {"411", TJPF_RGB, TJSAMP_411, 0},
      {"444", TJPF_RGB, TJSAMP_444, 0},        {"gray", TJPF_GRAY, TJSAMP_GRAY, 0},
      {"cmyk", TJPF_CMYK, TJSAMP_420, 0},      {"progressive420", TJPF_RGB, TJSAMP_420, TJFLAG_PROGRESSIVE},
      {"progressive444", TJPF_RGB, TJSAMP_444, TJFLAG_PROGRESSIVE},
  };
  return all;
}

Bytes encode(const Kind& kind, int width, int height, uint32_t seed) {
  const int channels = tjPixelSize[kind.pixel_format];
  const Bytes px = test_pixels(width, height, channels, seed);
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, px.data(), width, 0, height, kind.pixel_format, &jpeg, &size, kind.subsamp, 85,
                             kind.flags | TJFLAG_ACCURATEDCT);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  Bytes out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

const std::vector<std::pair<int, int>> kSizes = {{500, 375}, {375, 500}, {37, 53}, {333, 517}, {640, 17}, {17, 640}, {1, 1}};

TEST(DecodeJpegRegion, GivesThePixelsOfAFullDecodeForAnyRectangle) {
  std::mt19937 rng(7);
  for (const Kind& kind : kinds()) {
    for (const auto& [w, h] : kSizes) {
      const Bytes jpeg = encode(kind, w, h, static_cast<uint32_t>(w * 31 + h));
      const Image full = decode_image(jpeg, PrepSpec().max_pixels);
      for (int trial = 0; trial < 25; ++trial) {
        const uint32_t left = rng() % w, top = rng() % h;
        const uint32_t right = left + 1 + rng() % (w - left), bottom = top + 1 + rng() % (h - top);
        ImageRegion region;
        ASSERT_TRUE(decode_jpeg_region(jpeg, PrepSpec().max_pixels,
                                       [&](uint32_t width, uint32_t height) {
                                         EXPECT_EQ(width, uint32_t(w));
                                         EXPECT_EQ(height, uint32_t(h));
                                         return PixelRect{left, top, right, bottom};
                                       },
                                       region));
        ASSERT_LE(region.left, left);
        ASSERT_LE(right, region.left + region.width);
        ASSERT_EQ(region.top, top);
        ASSERT_EQ(region.height, bottom - top);
        for (uint32_t y = top; y < bottom; ++y) {
          const uint8_t* got = &region.rgb[(size_t(y - top) * region.width + (left - region.left)) * 3];
          const uint8_t* want = &full.rgb[(size_t(y) * w + left) * 3];
          ASSERT_TRUE(std::equal(got, got + (right - left) * 3, want))
              << kind.name << " " << w << "×" << h << " rect [" << left << ", " << right << ") × [" << top << ", "
              << bottom << "), row " << y;
        }
      }
    }
  }
}

// What prepare() gave before the fast path: the whole image decoded, then the window resized.
Bytes prepare_from_full_decode(const PrepSpec& spec, const Bytes& jpeg) {
  const Image img = decode_image(jpeg, spec.max_pixels);
  Bytes out;
  resize_window(img, prep_geometry(spec, img.width, img.height), spec.crop, spec.crop, out);
  return out;
}

TEST(DecodeJpegRegion, LeavesPreparedBytesAsAFullDecodeGivesThem) {
  const std::vector<PrepSpec> specs = {
      {.raw = false, .resize = 256, .crop = 224},  // the evaluation pipeline
      {.raw = false, .resize = 0, .crop = 224},    // Resize(224) + CenterCrop(224)
      {.raw = false, .resize = 64, .crop = 48},    // a small window: most of the image skipped
      {.raw = false, .resize = 600, .crop = 512},  // enlarging
      {.raw = false, .resize = 20, .crop = 30},    // crop larger than the resized image: padding
  };
  for (const Kind& kind : kinds()) {
    for (const auto& [w, h] : kSizes) {
      const Bytes jpeg = encode(kind, w, h, static_cast<uint32_t>(w + h));
      for (const PrepSpec& spec : specs) {
        Bytes out;
        prepare(spec, jpeg, out);
        ASSERT_EQ(out, prepare_from_full_decode(spec, jpeg))
            << kind.name << " " << w << "×" << h << " " << spec.describe();
      }
    }
  }
}

std::string prepare_error(const Bytes& jpeg) {
  const PrepSpec spec{.raw = false, .resize = 64, .crop = 32};
  try {
    Bytes out;
    prepare(spec, jpeg, out);
  } catch (const PrepError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DecodeJpegRegion, DeclinesDamageAnywhereInTheFileSoTheFullDecodeJudgesIt) {
  const Bytes jpeg = encode(kinds()[0], 300, 400, 3);
  const auto top_corner = [](uint32_t, uint32_t) { return PixelRect{0, 0, 16, 16}; };
  ImageRegion region;
  ASSERT_TRUE(decode_jpeg_region(jpeg, PrepSpec().max_pixels, top_corner, region));
  // Cut in its last rows, far below a top-left rectangle: still declined, and prepare reports the
  // truncation as the full decode (and PIL) would.
  const Bytes cut(jpeg.begin(), jpeg.end() - 200);
  EXPECT_FALSE(decode_jpeg_region(cut, PrepSpec().max_pixels, top_corner, region));
  EXPECT_EQ(prepare_error(cut), "corrupt or truncated JPEG: Premature end of JPEG file");
  // Damage libjpeg recovers from (a warning): declined, and prepared as the full decode prepares it.
  // (Garbage before the end marker, more than the entropy decoder reads ahead: "Corrupt JPEG data:
  // 1000 extraneous bytes before marker 0xd9".)
  Bytes damaged = jpeg;
  damaged.insert(damaged.end() - 2, 1000, 0x00);
  EXPECT_FALSE(decode_jpeg_region(damaged, PrepSpec().max_pixels, top_corner, region));
  const PrepSpec spec{.raw = false, .resize = 64, .crop = 32};
  Bytes out;
  prepare(spec, damaged, out);
  EXPECT_EQ(out, prepare_from_full_decode(spec, damaged));
}

TEST(DecodeJpegRegion, DeclinesOversizedImagesAndRectanglesOutsideTheImage) {
  const Bytes jpeg = encode(kinds()[0], 64, 48, 1);
  ImageRegion region;
  const auto whole = [](uint32_t w, uint32_t h) { return PixelRect{0, 0, w, h}; };
  EXPECT_TRUE(decode_jpeg_region(jpeg, 64 * 48, whole, region));
  EXPECT_FALSE(decode_jpeg_region(jpeg, 64 * 48 - 1, whole, region));
  EXPECT_FALSE(decode_jpeg_region(jpeg, 1 << 20, [](uint32_t, uint32_t) { return PixelRect{}; }, region));
  EXPECT_FALSE(decode_jpeg_region(jpeg, 1 << 20, [](uint32_t w, uint32_t h) { return PixelRect{0, 0, w + 1, h}; },
                                  region));
  EXPECT_FALSE(decode_jpeg_region(jpeg, 1 << 20, [](uint32_t, uint32_t) -> PixelRect { throw PrepError("no"); },
                                  region));
}

}  // namespace
}  // namespace joader
