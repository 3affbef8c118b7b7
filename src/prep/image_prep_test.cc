// Decoding: JPEG and PNG kinds as PIL gives them, refusals, limits, and the decode memory budget.
#include "prep/image_prep.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "prep/scratch.h"
#include "prep/test_images.h"

namespace joader {
namespace {

using namespace test_images;

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
  EXPECT_EQ(decoded.rgb, (Bytes{0, 0, 0, 100, 100, 100, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}));
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
  const Bytes png_trns = write_png(indices.data(), 4, 1, PNG_FORMAT_RGBA_COLORMAP, rgba_palette.data(), 3);
  EXPECT_EQ(decode_image(png_trns, 1000).rgb, expected);
}

TEST(DecodeImage, AlphaIsDroppedNotComposited) {
  const Bytes rgba = {200, 100, 50, 0, 10, 20, 30, 128};
  EXPECT_EQ(decode_image(write_png(rgba.data(), 2, 1, PNG_FORMAT_RGBA), 1000).rgb, (Bytes{200, 100, 50, 10, 20, 30}));
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
  EXPECT_EQ(prep_error(std::span(png).first(png.size() / 2)), "corrupt or truncated PNG: unexpected end of data");
}

TEST(DecodeImage, RejectsAJpegDeclaringTooManyPixelsBeforeDecodingIt) {
  Bytes jpeg = encode_jpeg(gradient_image(16, 16), 90);
  size_t sof = 0;
  while (!(jpeg[sof] == 0xFF && jpeg[sof + 1] == 0xC0)) ++sof;
  for (const size_t at : {sof + 5, sof + 7}) {  // height, width
    jpeg[at] = 60000 >> 8;
    jpeg[at + 1] = 60000 & 0xFF;
  }
  EXPECT_EQ(prep_error(jpeg), "image declares 60000×60000 pixels, more than the limit of 178956970");
}

TEST(DecodeImage, RejectsAPngDeclaringTooManyPixelsBeforeDecodingIt) {
  const Image img = gradient_image(16, 16);
  Bytes png = write_png(img.rgb.data(), 16, 16, PNG_FORMAT_RGB);
  // Signature (8), IHDR length (4), "IHDR" at 12, width at 16, height at 20, CRC of 12..28 at 29.
  put_be32(&png[16], 100000);
  put_be32(&png[20], 100000);
  put_be32(&png[29], png_crc(&png[12], 17));
  EXPECT_EQ(prep_error(png), "image declares 100000×100000 pixels, more than the limit of 178956970");
}

TEST(DecodeImage, PixelLimitIsInclusive) {
  const Bytes jpeg = encode_jpeg(gradient_image(16, 16), 90);
  EXPECT_EQ(decode_image(jpeg, 256).width, 16u);
  EXPECT_EQ(prep_error(jpeg, 255), "image declares 16×16 pixels, more than the limit of 255");
}

TEST(ProbeImage, ReadsTheSizeFromTheFirstBytesOrAsksForMore) {
  const Bytes jpeg = encode_jpeg(gradient_image(120, 90), 90);
  const ImageSize s = probe_image(jpeg, 1 << 20);
  EXPECT_EQ(s.width, 120u);
  EXPECT_EQ(s.height, 90u);
  EXPECT_EQ(probe_image(std::span(jpeg).first(4), 1 << 20).width, 0u);  // before the frame header
  EXPECT_THROW(probe_image(jpeg, 100), PrepError);                      // more pixels than allowed
  const Bytes html = {'<', 'h', 't', 'm', 'l'};
  EXPECT_THROW(probe_image(html, 1 << 20), PrepError);
}

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
  std::thread([&] {
    want_a = decode_image(valid_a, PrepSpec().max_pixels), want_b = decode_image(valid_b, PrepSpec().max_pixels);
  }).join();
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
  })
      .join();
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

}  // namespace
}  // namespace joader
