#include "client/layout.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace joader {
namespace {

TEST(HwcToChw, PutsEachChannelInItsOwnPlaneForAnyPixelCount) {
  std::mt19937 rng(1);
  // Counts around the vector widths, a 224×224 image, and a large odd one.
  for (size_t pixels : {size_t{1}, size_t{2}, size_t{15}, size_t{16}, size_t{17}, size_t{31}, size_t{33},
                        size_t{64}, size_t{100}, size_t{224 * 224}, size_t{1000003}}) {
    std::vector<uint8_t> hwc(pixels * 3), chw(pixels * 3 + 1, 0xAB);  // one guard byte after
    for (uint8_t& b : hwc) b = static_cast<uint8_t>(rng());
    hwc_to_chw(hwc.data(), pixels, chw.data());
    for (size_t i = 0; i < pixels; ++i)
      for (size_t c = 0; c < 3; ++c) ASSERT_EQ(chw[c * pixels + i], hwc[3 * i + c]) << pixels << " pixels, " << i << ", " << c;
    EXPECT_EQ(chw.back(), 0xAB) << pixels;
  }
}

TEST(ToFloat, ScalesThenNormalisesEachChannelInFloat32IntoPlanesOrInterleaved) {
  const std::vector<uint8_t> hwc = {0, 128, 255, 51, 17, 200};  // two pixels
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> planes(6), interleaved(6), scaled(6);
  to_float(hwc.data(), 2, true, mean, stdev, planes.data());
  to_float(hwc.data(), 2, false, mean, stdev, interleaved.data());
  to_float(hwc.data(), 2, true, nullptr, nullptr, scaled.data());
  for (size_t i = 0; i < 2; ++i) {
    for (size_t c = 0; c < 3; ++c) {
      const float x = float(hwc[3 * i + c]) / 255.0f;  // torch: t.float() / 255, then (t - m) / s
      EXPECT_EQ(scaled[c * 2 + i], x);
      EXPECT_EQ(planes[c * 2 + i], (x - mean[c]) / stdev[c]);
      EXPECT_EQ(interleaved[3 * i + c], planes[c * 2 + i]);
    }
  }
}

TEST(Layout, RowsWrittenWithAPlaneStrideMakeTheSameImageAsOnePass) {
  // A 5×4 image written row by row into planes 20 apart equals the whole image in one pass.
  std::mt19937 rng(2);
  const size_t w = 5, h = 4, pixels = w * h;
  std::vector<uint8_t> hwc(pixels * 3);
  for (uint8_t& b : hwc) b = static_cast<uint8_t>(rng());
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<uint8_t> bytes(pixels * 3), bytes_by_rows(pixels * 3);
  std::vector<float> floats(pixels * 3), floats_by_rows(pixels * 3);
  hwc_to_chw(hwc.data(), pixels, bytes.data());
  to_float(hwc.data(), pixels, true, mean, stdev, floats.data());
  for (size_t y = 0; y < h; ++y) {
    hwc_to_chw(&hwc[y * w * 3], w, &bytes_by_rows[y * w], pixels);
    to_float(&hwc[y * w * 3], w, true, mean, stdev, &floats_by_rows[y * w], pixels);
  }
  EXPECT_EQ(bytes_by_rows, bytes);
  EXPECT_EQ(floats_by_rows, floats);
}

}  // namespace
}  // namespace joader
