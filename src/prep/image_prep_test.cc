#include "prep/image_prep.h"

#include <png.h>
#include <turbojpeg.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>
// OpenCV 4.6's headers do arithmetic across enum types, which C++20 deprecates: not our warning.

#include <gtest/gtest.h>

#include "prep/scratch.h"

namespace joader {
namespace {

using Bytes = std::vector<uint8_t>;

// Smooth content (JPEG's easy case), so a round trip stays close to the original.
Image gradient_image(uint32_t width, uint32_t height) {
  Image img{width, height, Bytes(size_t{width} * height * 3)};
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) {
      uint8_t* px = &img.rgb[(size_t{y} * width + x) * 3];
      px[0] = static_cast<uint8_t>(x * 255 / (width - 1));
      px[1] = static_cast<uint8_t>(y * 255 / (height - 1));
      px[2] = static_cast<uint8_t>((x + y) * 127 / (width + height));
    }
  return img;
}

// Pseudo-random bytes, so that a window off by one pixel shows.
Image noise_image(uint32_t width, uint32_t height) {
  Image img{width, height, Bytes(size_t{width} * height * 3)};
  uint32_t state = 12345;
  for (uint8_t& b : img.rgb) b = static_cast<uint8_t>((state = state * 1103515245 + 12345) >> 16);
  return img;
}

// A PNG written by libpng's simplified API; `format` is a PNG_FORMAT_* value.
Bytes write_png(const void* pixels, uint32_t width, uint32_t height, uint32_t format,
                const void* colormap = nullptr, uint32_t colormap_entries = 0) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  image.colormap_entries = colormap_entries;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, colormap))
      << image.message;
  Bytes out(size);
  EXPECT_TRUE(png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, colormap))
      << image.message;
  out.resize(size);
  return out;
}

// A JPEG of another pixel format than encode_jpeg's RGB (grayscale, CMYK), written by TurboJPEG.
Bytes compress_jpeg(const Bytes& pixels, int width, int height, int pixel_format, int subsamp) {
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, pixels.data(), width, 0, height, pixel_format, &jpeg, &size, subsamp, 100, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  Bytes out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  return out;
}

std::string prep_error(std::span<const uint8_t> data, uint64_t max_pixels = PrepSpec().max_pixels) {
  try {
    decode_image(data, max_pixels);
  } catch (const PrepError& e) {
    return e.what();
  }
  return "no error";
}

double mean_abs_diff(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{b[i]});
  return sum / static_cast<double>(a.size());
}

// PNG chunk CRC (ISO 3309), to patch a header by hand.
uint32_t png_crc(const uint8_t* data, size_t n) {
  uint32_t crc = 0xFFFFFFFF;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

TEST(DecodeImage, JpegRoundTripStaysCloseToTheOriginal) {
  const Image original = gradient_image(64, 48);
  const Image decoded = decode_image(encode_jpeg(original, 95), PrepSpec().max_pixels);
  EXPECT_EQ(decoded.width, 64u);
  EXPECT_EQ(decoded.height, 48u);
  EXPECT_LT(mean_abs_diff(decoded.rgb, original.rgb), 2.0);
}

TEST(DecodeImage, EightBitRgbPngDecodesExactly) {
  const Image original = noise_image(7, 5);
  const Image decoded = decode_image(write_png(original.rgb.data(), 7, 5, PNG_FORMAT_RGB), 1000);
  EXPECT_EQ(decoded.width, 7u);
  EXPECT_EQ(decoded.height, 5u);
  EXPECT_EQ(decoded.rgb, original.rgb);
}

TEST(DecodeImage, SixteenBitRgbPngKeepsTheHighByteLikePil) {
  const std::vector<uint16_t> pixels = {0x0000, 0x00ff, 0x0100, 0x1234, 0xabff, 0xffff};
  const Image decoded = decode_image(write_png(pixels.data(), 2, 1, PNG_FORMAT_LINEAR_RGB), 1000);
  EXPECT_EQ(decoded.rgb, (Bytes{0x00, 0x00, 0x01, 0x12, 0xab, 0xff}));
}

TEST(DecodeImage, SixteenBitGrayPngClipsAt255LikePil) {
  const std::vector<uint16_t> pixels = {0, 100, 255, 256, 0x1234, 0xffff};
  const Image decoded = decode_image(write_png(pixels.data(), 6, 1, PNG_FORMAT_LINEAR_Y), 1000);
  EXPECT_EQ(decoded.rgb, (Bytes{0, 0, 0, 100, 100, 100, 255, 255, 255, 255, 255, 255, 255, 255, 255,
                                255, 255, 255}));
}

TEST(DecodeImage, GrayPngGetsEqualChannels) {
  const Bytes pixels = {0, 17, 128, 255};
  const Image decoded = decode_image(write_png(pixels.data(), 2, 2, PNG_FORMAT_GRAY), 1000);
  EXPECT_EQ(decoded.rgb, (Bytes{0, 0, 0, 17, 17, 17, 128, 128, 128, 255, 255, 255}));
}

TEST(DecodeImage, PalettePngGetsItsColoursAndDropsTransparency) {
  const Bytes indices = {0, 1, 2, 1};
  const Bytes expected = {255, 0, 0, 0, 255, 0, 10, 20, 30, 0, 255, 0};
  const Bytes rgb_palette = {255, 0, 0, 0, 255, 0, 10, 20, 30};
  const Bytes png = write_png(indices.data(), 4, 1, PNG_FORMAT_RGB_COLORMAP, rgb_palette.data(), 3);
  EXPECT_EQ(decode_image(png, 1000).rgb, expected);
  // Entries with alpha make a tRNS chunk; PIL's convert('RGB') ignores it.
  const Bytes rgba_palette = {255, 0, 0, 0, 0, 255, 0, 128, 10, 20, 30, 255};
  const Bytes png_trns =
      write_png(indices.data(), 4, 1, PNG_FORMAT_RGBA_COLORMAP, rgba_palette.data(), 3);
  EXPECT_EQ(decode_image(png_trns, 1000).rgb, expected);
}

TEST(DecodeImage, AlphaIsDroppedNotComposited) {
  const Bytes rgba = {200, 100, 50, 0, 10, 20, 30, 128};
  EXPECT_EQ(decode_image(write_png(rgba.data(), 2, 1, PNG_FORMAT_RGBA), 1000).rgb,
            (Bytes{200, 100, 50, 10, 20, 30}));
  const Bytes gray_alpha = {90, 0, 250, 77};
  EXPECT_EQ(decode_image(write_png(gray_alpha.data(), 2, 1, PNG_FORMAT_GA), 1000).rgb,
            (Bytes{90, 90, 90, 250, 250, 250}));
}

TEST(DecodeImage, GrayscaleJpegGetsEqualChannels) {
  Bytes gray(16 * 16);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<uint8_t>(i);
  const Image decoded = decode_image(compress_jpeg(gray, 16, 16, TJPF_GRAY, TJSAMP_GRAY), 1000);
  ASSERT_EQ(decoded.rgb.size(), 16u * 16 * 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    EXPECT_EQ(decoded.rgb[3 * i], decoded.rgb[3 * i + 1]);
    EXPECT_EQ(decoded.rgb[3 * i], decoded.rgb[3 * i + 2]);
    EXPECT_NEAR(decoded.rgb[3 * i], gray[i], 2);
  }
}

TEST(DecodeImage, CmykJpegConvertsLikePil) {
  // Stored samples (Adobe-inverted): PIL's inks are C=0, M=255, Y=127, K=55, so
  // R = 200 - 0, G = 200 - 200, B = 200 - MULDIV255(127, 200) = 100.
  Bytes cmyk;
  for (int i = 0; i < 16 * 16; ++i) cmyk.insert(cmyk.end(), {255, 0, 128, 200});
  const Image decoded = decode_image(compress_jpeg(cmyk, 16, 16, TJPF_CMYK, TJSAMP_444), 1000);
  ASSERT_EQ(decoded.rgb.size(), 16u * 16 * 3);
  EXPECT_NEAR(decoded.rgb[0], 200, 1);
  EXPECT_NEAR(decoded.rgb[1], 0, 1);
  EXPECT_NEAR(decoded.rgb[2], 100, 1);
}

TEST(DecodeImage, RejectsEmptyInput) { EXPECT_EQ(prep_error({}), "empty file (0 bytes)"); }

TEST(DecodeImage, RejectsWhatIsNeitherJpegNorPng) {
  const std::string html = "<html><body>404</body></html>";
  EXPECT_EQ(prep_error({reinterpret_cast<const uint8_t*>(html.data()), html.size()}),
            "not a JPEG, PNG, WEBP, TIFF, BMP, PPM or GIF image (starts with 3c 68 74 6d)");
  EXPECT_EQ(prep_error(Bytes{0x42, 0x4d}), "corrupt or truncated BMP: header cut short");
}

TEST(DecodeImage, RejectsATruncatedJpeg) {
  const Bytes jpeg = encode_jpeg(noise_image(64, 64), 90);
  EXPECT_EQ(prep_error(std::span(jpeg).first(jpeg.size() / 2)),
            "corrupt or truncated JPEG: Premature end of JPEG file");
  EXPECT_EQ(prep_error(std::span(jpeg).first(100)),
            "corrupt or truncated JPEG: Premature end of JPEG file");  // cut inside the header
}

TEST(DecodeImage, AcceptsAJpegWithRecoverableDamageLikePil) {
  const Bytes jpeg = encode_jpeg(noise_image(32, 32), 90);
  Bytes damaged = jpeg;  // libjpeg warns "Corrupt JPEG data: 3 extraneous bytes before marker 0xd9"
  damaged.insert(damaged.end() - 2, {0x00, 0x01, 0x02});
  EXPECT_EQ(decode_image(damaged, 1024).rgb, decode_image(jpeg, 1024).rgb);
  // libjpeg reports only a stream's first warning; this thread's decoder must start afresh.
  EXPECT_EQ(prep_error(std::span(damaged).first(damaged.size() / 2)),
            "corrupt or truncated JPEG: Premature end of JPEG file");
}

TEST(DecodeImage, RejectsATruncatedPng) {
  const Image img = noise_image(32, 32);
  const Bytes png = write_png(img.rgb.data(), 32, 32, PNG_FORMAT_RGB);
  EXPECT_EQ(prep_error(std::span(png).first(png.size() / 2)),
            "corrupt or truncated PNG: unexpected end of data");
}

TEST(DecodeImage, RejectsAJpegDeclaringTooManyPixelsBeforeDecodingIt) {
  Bytes jpeg = encode_jpeg(gradient_image(16, 16), 90);
  size_t sof = 0;
  while (!(jpeg[sof] == 0xFF && jpeg[sof + 1] == 0xC0)) ++sof;
  for (const size_t at : {sof + 5, sof + 7}) {  // height, width
    jpeg[at] = 60000 >> 8;
    jpeg[at + 1] = 60000 & 0xFF;
  }
  EXPECT_EQ(prep_error(jpeg),
            "image declares 60000×60000 pixels, more than the limit of 178956970");
}

TEST(DecodeImage, RejectsAPngDeclaringTooManyPixelsBeforeDecodingIt) {
  const Image img = gradient_image(16, 16);
  Bytes png = write_png(img.rgb.data(), 16, 16, PNG_FORMAT_RGB);
  // Signature (8), IHDR length (4), "IHDR" at 12, width at 16, height at 20, CRC of 12..28 at 29.
  put_be32(&png[16], 100000);
  put_be32(&png[20], 100000);
  put_be32(&png[29], png_crc(&png[12], 17));
  EXPECT_EQ(prep_error(png),
            "image declares 100000×100000 pixels, more than the limit of 178956970");
}

TEST(DecodeImage, PixelLimitIsInclusive) {
  const Bytes jpeg = encode_jpeg(gradient_image(16, 16), 90);
  EXPECT_EQ(decode_image(jpeg, 256).width, 16u);
  EXPECT_EQ(prep_error(jpeg, 255), "image declares 16×16 pixels, more than the limit of 255");
}

PrepSpec decode_spec(uint32_t resize, uint32_t crop) {
  PrepSpec spec;
  spec.raw = false;
  spec.resize = resize;
  spec.crop = crop;
  return spec;
}

void expect_geometry(const PrepSpec& spec, uint32_t w, uint32_t h, uint64_t rw, uint64_t rh,
                     int64_t left, int64_t top) {
  const PrepGeometry g = prep_geometry(spec, w, h);
  EXPECT_EQ(g.resized_width, rw) << w << "x" << h;
  EXPECT_EQ(g.resized_height, rh) << w << "x" << h;
  EXPECT_EQ(g.crop_left, left) << w << "x" << h;
  EXPECT_EQ(g.crop_top, top) << w << "x" << h;
}

TEST(PrepGeometry, FollowsTorchvisionResizeAndCenterCropArithmetic) {
  // Resize(256): longer side int(256 * 500 / 375) = int(341.33); CenterCrop(224): round(58.5) = 58.
  expect_geometry(decode_spec(256, 224), 500, 375, 341, 256, 58, 16);
  expect_geometry(decode_spec(256, 224), 375, 500, 256, 341, 16, 58);
  expect_geometry(decode_spec(256, 224), 300, 200, 384, 256, 80, 16);
  expect_geometry(decode_spec(224, 224), 333, 500, 224, 336, 0, 56);  // int(336.34)
  // resize 0 means "to the crop size"; an image of that size is left alone.
  expect_geometry(decode_spec(0, 224), 224, 225, 224, 225, 0, 0);  // round(0.5) = 0
  expect_geometry(decode_spec(0, 224), 224, 227, 224, 227, 0, 2);  // round(1.5) = 2
  expect_geometry(decode_spec(0, 224), 224, 229, 224, 229, 0, 2);  // round(2.5) = 2
}

TEST(PrepGeometry, NegativeOffsetsPadLikeCenterCrop) {
  // 100x80 -> 80x64; CenterCrop(96) first pads (96 - 80) // 2 = 8 columns, (96 - 64) // 2 = 16
  // rows.
  expect_geometry(decode_spec(64, 96), 100, 80, 80, 64, -8, -16);
  expect_geometry(decode_spec(64, 96), 80, 100, 64, 80, -16, -8);
}

TEST(Prepare, RawPassesTheBytesThrough) {
  const Bytes stored = {1, 2, 3, 4, 5};
  Bytes out = {9};
  prepare(PrepSpec(), stored, out);
  EXPECT_EQ(out, stored);
}

TEST(Prepare, CropsTheCentreOfAnImageAlreadyAtTheTargetSize) {
  const Image img = noise_image(300, 224);
  Bytes out;
  prepare(decode_spec(0, 224), write_png(img.rgb.data(), 300, 224, PNG_FORMAT_RGB), out);
  ASSERT_EQ(out.size(), 224u * 224 * 3);
  for (size_t y = 0; y < 224; ++y)  // left = round((300 - 224) / 2) = 38
    ASSERT_EQ(0, std::memcmp(&out[y * 224 * 3], &img.rgb[(y * 300 + 38) * 3], 224 * 3))
        << "row " << y;
}

TEST(Prepare, ShrinksWithPilsAntialiasedBilinearFilter) {
  // A 4x2 image whose rows are 0, 100, 200, 255 (grey). Resize(1) makes it 2x1, CenterCrop(1)
  // keeps column 0. PIL's filter at scale 2 is a triangle of support 2: column 0 averages input
  // columns 0..2 with weights 3/7, 3/7, 1/7 -> 100·3/7 + 200/7 = 71.43 -> 71.
  Bytes rgb;
  for (int y = 0; y < 2; ++y)
    for (uint8_t v : {0, 100, 200, 255}) rgb.insert(rgb.end(), {v, v, v});
  Bytes out;
  prepare(decode_spec(1, 1), write_png(rgb.data(), 4, 2, PNG_FORMAT_RGB), out);
  EXPECT_EQ(out, (Bytes{71, 71, 71}));
  // 6x2 -> 3x1; column 1 is centred on input x = 3: weights 1/8, 3/8, 3/8, 1/8 over input
  // columns 1..4 = 100, 200, 255, 255 -> 215. (Pillow 9.4 gives [71 209] and [71 215 255].)
  Bytes wide;
  for (int y = 0; y < 2; ++y)
    for (uint8_t v : {0, 100, 200, 255, 255, 255}) wide.insert(wide.end(), {v, v, v});
  const PrepGeometry g = prep_geometry(decode_spec(1, 1), 6, 2);  // 6x2 -> 3x1, crop at column 1
  ASSERT_EQ(g.crop_left, 1);
  prepare(decode_spec(1, 1), write_png(wide.data(), 6, 2, PNG_FORMAT_RGB), out);
  EXPECT_EQ(out, (Bytes{215, 215, 215}));
}

TEST(Prepare, ResizesTheShorterSideThenCropsTheCentre) {
  const Bytes jpeg = encode_jpeg(noise_image(500, 375), 90);
  Bytes out;
  prepare(decode_spec(256, 224), jpeg, out);
  ASSERT_EQ(out.size(), 224u * 224 * 3);
  // A flat image stays flat through the filter (weights sum to one after rounding).
  Image flat{500, 375, Bytes(500 * 375 * 3, 123)};
  prepare(decode_spec(256, 224), write_png(flat.rgb.data(), 500, 375, PNG_FORMAT_RGB), out);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t v) { return v == 123; }));
}

TEST(Prepare, PadsWithZerosWhereTheResizedImageIsSmallerThanTheCrop) {
  Image img{100, 80, Bytes(100 * 80 * 3, 200)};
  Bytes out(96 * 96 * 3, 7);  // stale content from a previous item must not survive
  prepare(decode_spec(64, 96), write_png(img.rgb.data(), 100, 80, PNG_FORMAT_RGB), out);
  ASSERT_EQ(out.size(), 96u * 96 * 3);
  // The 80x64 image sits at columns 8..87 and rows 16..79.
  for (size_t y = 0; y < 96; ++y)
    for (size_t x = 0; x < 96; ++x) {
      const bool inside = x >= 8 && x < 88 && y >= 16 && y < 80;
      ASSERT_EQ(out[(y * 96 + x) * 3], inside ? 200 : 0) << x << "," << y;
    }
}

// The daemon prepares crops straight into an item's arena block: the bytes must be prepare()'s,
// whatever was in the block before (padding included), for JPEGs decoded in part or whole and PNGs.
TEST(Prepare, IntoAFixedBlockWritesTheSameBytesAsIntoABuffer) {
  const std::vector<std::pair<PrepSpec, Bytes>> cases = {
      {decode_spec(256, 224), encode_jpeg(noise_image(500, 375), 90)},
      {decode_spec(64, 96), write_png(noise_image(100, 80).rgb.data(), 100, 80, PNG_FORMAT_RGB)},  // padded
      {decode_spec(256, 224), encode_jpeg(gradient_image(40, 30), 90)},                            // enlarged
      {decode_spec(0, 32), encode_jpeg(noise_image(97, 131), 75)},
  };
  for (const auto& [spec, encoded] : cases) {
    Bytes expected;
    prepare(spec, encoded, expected);
    Bytes block(prepared_size(spec), 7);  // stale bytes of an evicted item
    EXPECT_EQ(prepare_into(spec, encoded, block), (ImageSize{spec.crop, spec.crop}));
    EXPECT_EQ(block, expected) << spec.describe();
  }
}

// Images stored at their own size are prepared into a block of the size their header gave: the
// bytes must be prepare()'s for a JPEG decoded straight into the block (RGB, grayscale, CMYK) and
// for the forms decoded into a buffer first (PNG; any format with a resize).
TEST(Prepare, AtItsOwnSizeIntoABlockWritesTheSameBytesAsIntoABuffer) {
  PrepSpec own;
  own.raw = false;
  PrepSpec resized = own;
  resized.resize = 40;
  Bytes cmyk;
  for (int i = 0; i < 24 * 20; ++i) cmyk.insert(cmyk.end(), {uint8_t(i), 0, 128, 200});
  const std::vector<std::pair<PrepSpec, Bytes>> cases = {
      {own, encode_jpeg(noise_image(97, 131), 75)},
      {own, compress_jpeg(cmyk, 24, 20, TJPF_CMYK, TJSAMP_444)},
      {own, write_png(noise_image(100, 80).rgb.data(), 100, 80, PNG_FORMAT_RGB)},
      {resized, encode_jpeg(noise_image(97, 131), 75)},
      {resized, write_png(noise_image(100, 80).rgb.data(), 100, 80, PNG_FORMAT_RGB)},
  };
  for (const auto& [spec, encoded] : cases) {
    Bytes expected;
    const ImageSize size = prepare(spec, encoded, expected);
    Bytes block(expected.size(), 7);  // stale bytes of an evicted item
    EXPECT_EQ(prepare_into(spec, encoded, block), size);
    EXPECT_EQ(block, expected) << spec.describe();
  }
}

TEST(Prepare, IntoABlockRefusesAWrongSizeNamingBothOrARawSpec) {
  const Bytes jpeg = encode_jpeg(noise_image(64, 48), 90);
  Bytes block(prepared_size(decode_spec(32, 32)) - 1);
  EXPECT_THROW(prepare_into(decode_spec(32, 32), jpeg, block), PrepError);
  PrepSpec own;
  own.raw = false;
  try {
    prepare_into(own, jpeg, block);  // a file that changed since its header was probed
    FAIL() << "a 64×48 image prepared into " << block.size() << " bytes";
  } catch (const PrepError& e) {
    EXPECT_NE(std::string(e.what()).find("64×48"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(block.size())), std::string::npos) << e.what();
  }
  PrepSpec resized = own;
  resized.resize = 24;
  EXPECT_THROW(prepare_into(resized, write_png(noise_image(64, 48).rgb.data(), 64, 48, PNG_FORMAT_RGB), block),
               PrepError);
  EXPECT_THROW(prepare_into(PrepSpec{}, jpeg, block), PrepError);  // raw
}

// The size only: that the enlarged pixels equal torchvision's is checked against torchvision itself
// in tests/python/test_joader.py (test_enlarged_and_noisy_images_equal_torchvisions_pipeline).
TEST(Prepare, EnlargesImagesSmallerThanTheTargetToTheCropSize) {
  Bytes out;
  prepare(decode_spec(256, 224), encode_jpeg(gradient_image(40, 30), 90), out);
  EXPECT_EQ(out.size(), 224u * 224 * 3);
}

TEST(Prepare, RejectsAnAspectRatioWhoseResizeWouldExceedThePixelLimit) {
  const Image img = gradient_image(200, 2);
  PrepSpec spec = decode_spec(64, 64);
  spec.max_pixels = 10000;
  Bytes out;
  try {
    prepare(spec, write_png(img.rgb.data(), 200, 2, PNG_FORMAT_RGB), out);
    FAIL() << "prepare accepted a 6400x64 resize";
  } catch (const PrepError& e) {
    EXPECT_EQ(std::string(e.what()),
              "image of 200×2 pixels would resize to 6400×64, more than the limit of 10000");
  }
}

TEST(Prepare, WithoutACropStoresTheDecodedImageAtItsOwnOrItsResizedSize) {
  const Bytes jpeg = encode_jpeg(gradient_image(120, 90), 90);
  const Image decoded = decode_image(jpeg, 1 << 20);
  Bytes out;
  const ImageSize own = prepare(decode_spec(0, 0), jpeg, out);
  EXPECT_EQ(own.width, 120u);
  EXPECT_EQ(own.height, 90u);
  EXPECT_EQ(out, decoded.rgb);
  // Resize(45) alone: shorter side 45, longer int(45 * 120 / 90) = 60, the same bytes as the
  // center crop of the whole resized image.
  const ImageSize resized = prepare(decode_spec(45, 0), jpeg, out);
  EXPECT_EQ(resized.width, 60u);
  EXPECT_EQ(resized.height, 45u);
  PrepGeometry g;
  g.resized_width = 60;
  g.resized_height = 45;
  Bytes expected;
  resize_window(decoded, g, 60, 45, expected);
  EXPECT_EQ(out, expected);
  EXPECT_EQ(stored_size(decode_spec(45, 0), 120, 90).width, 60u);
}

TEST(ProbeImage, ReadsTheSizeFromTheFirstBytesOrAsksForMore) {
  const Bytes jpeg = encode_jpeg(gradient_image(120, 90), 90);
  const ImageSize s = probe_image(jpeg, 1 << 20);
  EXPECT_EQ(s.width, 120u);
  EXPECT_EQ(s.height, 90u);
  EXPECT_EQ(probe_image(std::span(jpeg).first(4), 1 << 20).width, 0u);  // before the frame header
  EXPECT_THROW(probe_image(jpeg, 100), PrepError);                       // more pixels than allowed
  const Bytes html = {'<', 'h', 't', 'm', 'l'};
  EXPECT_THROW(probe_image(html, 1 << 20), PrepError);
}

TEST(Prepare, IsThreadSafe) {
  const Bytes jpeg = encode_jpeg(noise_image(120, 90), 90);
  const PrepSpec spec = decode_spec(64, 56);
  Bytes expected;
  prepare(spec, jpeg, expected);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Bytes out;
      for (int i = 0; i < 20; ++i) {
        prepare(spec, jpeg, out);
        mismatches[t] += out != expected;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// A JPEG whose frame header declares 65535×65535 pixels (libjpeg's limit is 65500): 600-odd bytes
// that fail at the header.
Bytes jpeg_bomb() {
  Bytes bytes = encode_jpeg(gradient_image(16, 16), 90);
  for (size_t i = 0; i + 8 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && bytes[i + 1] == 0xC0) {  // SOF0: length, precision, height, width
      bytes[i + 5] = bytes[i + 6] = bytes[i + 7] = bytes[i + 8] = 0xFF;
      return bytes;
    }
  }
  ADD_FAILURE() << "no SOF0 marker";
  return bytes;
}

TEST(Decode, AFailedFileLeavesNoStateBehindForTheNextFilesOnTheSameThread) {
  const Image a = gradient_image(40, 30), b = noise_image(33, 21);
  const Bytes bomb = jpeg_bomb(), valid_a = encode_jpeg(a, 90), valid_b = encode_jpeg(b, 95);
  Bytes truncated = valid_b;
  truncated.resize(truncated.size() / 2);
  // What a thread that never saw a bad file decodes.
  Image want_a, want_b;
  std::thread([&] { want_a = decode_image(valid_a, PrepSpec().max_pixels), want_b = decode_image(valid_b, PrepSpec().max_pixels); }).join();
  std::vector<uint8_t> want_crop;
  std::thread([&] { prepare(decode_spec(24, 16), valid_b, want_crop); }).join();

  std::thread([&] {  // one loader thread: every bad file, each followed by valid ones
    for (const Bytes* bad : std::vector<const Bytes*>{&bomb, &truncated, &bomb}) {
      EXPECT_THROW(decode_image(*bad, PrepSpec().max_pixels), PrepError);
      if (bad == &bomb) {  // a cut file's header is whole
        EXPECT_THROW(probe_image(*bad, PrepSpec().max_pixels), PrepError);
      }
      std::vector<uint8_t> out;
      EXPECT_THROW(prepare(decode_spec(24, 16), *bad, out), PrepError);
      for (int repeat = 0; repeat < 3; ++repeat) {
        EXPECT_EQ(decode_image(valid_a, PrepSpec().max_pixels).rgb, want_a.rgb);
        EXPECT_EQ(probe_image(valid_b, PrepSpec().max_pixels), (ImageSize{33, 21}));
        EXPECT_EQ(decode_image(valid_b, PrepSpec().max_pixels).rgb, want_b.rgb);
        prepare(decode_spec(24, 16), valid_b, out);
        EXPECT_EQ(out, want_crop);
      }
    }
  }).join();
}

TEST(Decode, NamesLibjpegsDimensionLimitForAHeaderAboveIt) {
  EXPECT_NE(prep_error(jpeg_bomb()).find("JPEG too large: Maximum supported image dimension is 65500 pixels"),
            std::string::npos)
      << prep_error(jpeg_bomb());
  try {
    probe_image(jpeg_bomb(), PrepSpec().max_pixels);
    ADD_FAILURE() << "the probe accepted the bomb";
  } catch (const PrepError& e) {
    EXPECT_NE(std::string(e.what()).find("65500"), std::string::npos) << e.what();
  }
}

// 4000×3000 gray pixels, decoded to 36 MB of RGB: a "large" decode for the budget.
Bytes large_png() {
  const Bytes gray(size_t{4000} * 3000, 0x80);
  return write_png(gray.data(), 4000, 3000, PNG_FORMAT_GRAY);
}

TEST(DecodeMemory, APreparationOfALargeImageWaitsForTheBudgetAndGivesItBackWhateverItsEnd) {
  const Bytes whole = large_png();
  Bytes cut = whole;
  cut.resize(cut.size() / 2);  // fails after its pixels were allocated
  const uint64_t saved = decode_memory_budget();
  set_decode_memory_budget(60 << 20);
  std::vector<uint8_t> out;
  EXPECT_THROW(prepare(decode_spec(24, 16), cut, out), PrepError);
  EXPECT_EQ(decode_memory_in_use(), 0u);
  std::promise<void> release, holding;
  std::thread other([&] {  // another thread's large decode holds 35 of the 60 MiB
    const DecodeMemoryScope scope;
    reserve_decode_memory(35 << 20);
    holding.set_value();
    release.get_future().wait();
  });
  holding.get_future().wait();
  std::atomic<bool> prepared = false;
  std::thread loader([&] {
    std::vector<uint8_t> crop;
    prepare(decode_spec(24, 16), whole, crop);
    prepared = crop == std::vector<uint8_t>(16 * 16 * 3, 0x80);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a preparation that went ahead fails
  EXPECT_FALSE(prepared);
  release.set_value();
  other.join();
  loader.join();
  EXPECT_TRUE(prepared);
  EXPECT_EQ(decode_memory_in_use(), 0u);
  set_decode_memory_budget(saved);
}

TEST(PrepSpec, SizeAndDescription) {
  EXPECT_EQ(prepared_size(PrepSpec()), 0u);
  EXPECT_EQ(prepared_size(decode_spec(256, 224)), 224u * 224 * 3);
  EXPECT_EQ(PrepSpec().describe(), "raw");
  EXPECT_EQ(decode_spec(256, 224).describe(), "decode, resize 256, center crop 224, uint8 HWC RGB");
  EXPECT_EQ(decode_spec(0, 224).describe(), "decode, resize 224, center crop 224, uint8 HWC RGB");
}

}  // namespace
}  // namespace joader
