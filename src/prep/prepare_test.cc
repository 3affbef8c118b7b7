// Preparing an item: torchvision's Resize + CenterCrop arithmetic, PIL's resample, blocks.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "prep/image_prep.h"
#include "prep/scratch.h"
#include "prep/test_images.h"

namespace joader {
namespace {

using namespace test_images;

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
    ASSERT_EQ(0, std::memcmp(&out[y * 224 * 3], &img.rgb[(y * 300 + 38) * 3], 224 * 3)) << "row " << y;
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
    EXPECT_EQ(std::string(e.what()), "image of 200×2 pixels would resize to 6400×64, more than the limit of 10000");
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

TEST(PrepSpec, SizeAndDescription) {
  EXPECT_EQ(prepared_size(PrepSpec()), 0u);
  EXPECT_EQ(prepared_size(decode_spec(256, 224)), 224u * 224 * 3);
  EXPECT_EQ(PrepSpec().describe(), "raw");
  EXPECT_EQ(decode_spec(256, 224).describe(), "decode, resize 256, center crop 224, uint8 HWC RGB");
  EXPECT_EQ(decode_spec(0, 224).describe(), "decode, resize 224, center crop 224, uint8 HWC RGB");
}

}  // namespace
}  // namespace joader
