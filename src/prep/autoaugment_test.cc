#include "prep/autoaugment.h"

#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "prep/augment.h"

namespace joader {
namespace {

AutoAugmentSpec trivial_augment() {
  AutoAugmentSpec spec;
  spec.family = AutoAugmentSpec::kTrivialAugmentWide;
  spec.interpolation = Resample::kBilinear;
  spec.fill = {1, 2, 3};
  spec.entries.push_back({ImageOp::kIdentity, {}, false, 1.0});
  spec.entries.push_back({ImageOp::kRotate, {0.0, 4.5, 9.0}, true, 1.0});
  spec.entries.push_back({ImageOp::kPosterize, {8, 7, 6}, false, 1.0});
  return spec;
}

Image gradient(uint32_t w, uint32_t h) {
  Image img;
  img.width = w;
  img.height = h;
  for (uint32_t i = 0; i < w * h * 3; ++i) img.rgb.push_back(static_cast<uint8_t>(i * 7));
  return img;
}

TEST(AutoAugmentSpec, MalformedPoliciesAreRefusedNamingTheProblem) {
  // (Malformed messages on the wire: common/augment_wire_test.cc.)
  EXPECT_EQ(trivial_augment().describe(), "TrivialAugmentWide(3 ops, interpolation=bilinear, fill=(1, 2, 3))");
  EXPECT_NO_THROW(trivial_augment().validate());
  AutoAugmentSpec empty = trivial_augment();
  empty.entries.clear();
  EXPECT_THROW(empty.validate(), PrepError);
  AutoAugmentSpec posterize = trivial_augment();
  posterize.entries[2].magnitudes = {9};
  EXPECT_THROW(posterize.validate(), PrepError);
  AutoAugmentSpec odd_policy = trivial_augment();
  odd_policy.family = AutoAugmentSpec::kAutoAugment;  // 3 entries are not sub-policies of 2
  EXPECT_THROW(odd_policy.validate(), PrepError);
}

TEST(AutoAugment, DrawsAreFixedBySeedEpochAndItemAndComeFromTheSpace) {
  const AutoAugmentSpec spec = trivial_augment();
  std::set<std::pair<int, double>> seen;
  for (uint32_t item = 0; item < 500; ++item) {
    CounterRng a(5, 1, item), b(5, 1, item);
    const std::vector<AppliedOp> first = draw_auto_augment(spec, a);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first, draw_auto_augment(spec, b));
    seen.emplace(static_cast<int>(first[0].op), first[0].magnitude);
  }
  // Identity; Rotate at ±0, ±4.5, ±9; Posterize at 8, 7, 6: every value is drawn, nothing else.
  const std::set<std::pair<int, double>> space{{0, 0.0},  {5, 0.0},  {5, 4.5},  {5, -4.5}, {5, 9.0},
                                               {5, -9.0}, {10, 8.0}, {10, 7.0}, {10, 6.0}};
  EXPECT_EQ(seen, space);
}

TEST(AutoAugment, RandAugmentAppliesNumOpsOpsAndAutoAugmentOneSubPolicy) {
  AutoAugmentSpec ra = trivial_augment();
  ra.family = AutoAugmentSpec::kRandAugment;
  ra.num_ops = 3;
  CounterRng rng(1, 0, 0);
  EXPECT_EQ(draw_auto_augment(ra, rng).size(), 3u);
  AutoAugmentSpec aa;
  aa.family = AutoAugmentSpec::kAutoAugment;
  aa.entries = {{ImageOp::kInvert, {}, false, 1.0}, {ImageOp::kEqualize, {}, false, 0.0}};
  for (uint32_t item = 0; item < 50; ++item) {
    CounterRng r(2, 0, item);
    EXPECT_EQ(draw_auto_augment(aa, r), (std::vector<AppliedOp>{{ImageOp::kInvert, 0.0}})) << "p=1 always, p=0 never";
  }
}

TEST(AutoAugment, RotationsByQuarterTurnsMovePixelsAndAFullTurnIsTheIdentity) {
  const Image img = gradient(5, 5);
  Image turned = img;
  for (int k = 0; k < 4; ++k) apply_image_op(turned, ImageOp::kRotate, 90.0, Resample::kNearest, {0, 0, 0});
  EXPECT_EQ(turned.rgb, img.rgb);
  Image once = img;
  apply_image_op(once, ImageOp::kRotate, 90.0, Resample::kNearest, {0, 0, 0});
  EXPECT_NE(once.rgb, img.rgb);
  Image half = img;
  apply_image_op(half, ImageOp::kRotate, -180.0, Resample::kBilinear, {0, 0, 0});
  EXPECT_EQ(0, std::memcmp(&half.rgb[0], &img.rgb[img.rgb.size() - 3], 3)) << "the last pixel comes first";
}

TEST(AutoAugment, GeometricOpsKeepTheSizeAndFillWhatComesFromOutside) {
  const Image img = gradient(16, 12);
  for (ImageOp op :
       {ImageOp::kShearX, ImageOp::kShearY, ImageOp::kTranslateX, ImageOp::kTranslateY, ImageOp::kRotate}) {
    for (Resample r : {Resample::kNearest, Resample::kBilinear}) {
      Image out = img;
      apply_image_op(out, op, 50.0, r, {9, 8, 7});  // far past the image: all fill
      ASSERT_EQ(out.width, 16u);
      ASSERT_EQ(out.height, 12u);
      if (op == ImageOp::kTranslateX || op == ImageOp::kTranslateY) {
        for (size_t i = 0; i < out.rgb.size(); i += 3) {
          ASSERT_EQ(out.rgb[i], 9);
          ASSERT_EQ(out.rgb[i + 2], 7);
        }
      }
    }
  }
}

TEST(AutoAugment, LookupTableOpsDoWhatImageOpsSays) {
  Image img;
  img.width = 4;
  img.height = 1;
  img.rgb = {0, 10, 20, 100, 110, 120, 200, 210, 220, 255, 254, 253};
  Image inverted = img;
  apply_image_op(inverted, ImageOp::kInvert, 0, Resample::kNearest, {0, 0, 0});
  EXPECT_EQ(inverted.rgb[0], 255);
  EXPECT_EQ(inverted.rgb[11], 2);
  Image posterized = img;
  apply_image_op(posterized, ImageOp::kPosterize, 2, Resample::kNearest, {0, 0, 0});
  EXPECT_EQ(posterized.rgb[4], 64);  // 110 & 0b11000000
  Image solarized = img;
  apply_image_op(solarized, ImageOp::kSolarize, 128.0, Resample::kNearest, {0, 0, 0});
  EXPECT_EQ(solarized.rgb[3], 100);
  EXPECT_EQ(solarized.rgb[6], 55);
  Image stretched = img;
  apply_image_op(stretched, ImageOp::kAutoContrast, 0, Resample::kNearest, {0, 0, 0});
  EXPECT_EQ(stretched.rgb[1], 0) << "each band's darkest value becomes 0";
  EXPECT_EQ(stretched.rgb[10], 255) << "and its brightest 255";
}

}  // namespace
}  // namespace joader
