#include "prep/erasing.h"

#include <vector>

#include <gtest/gtest.h>

namespace joader {
namespace {

TEST(RandomErasing, BadParametersAreErrorsNamingTheField) {
  ErasingOp op;
  op.p = 1.5;
  EXPECT_THROW(validate_erasing(op), PrepError);
  op = {};
  op.scale_min = 0.5;
  op.scale_max = 0.2;
  EXPECT_THROW(validate_erasing(op), PrepError);
  op = {};
  op.ratio_min = 0;
  EXPECT_THROW(validate_erasing(op), PrepError);
  EXPECT_NO_THROW(validate_erasing(ErasingOp{}));
}

TEST(RandomErasing, BoxesLieInsideTheImageAndFollowP) {
  ErasingOp op;
  op.p = 0.25;
  int erased = 0;
  for (uint32_t item = 0; item < 4000; ++item) {
    CounterRng rng(7, 0, item);
    const ErasingBox b = random_erasing_box(56, 40, op, rng);
    if (!b.erase) continue;
    ++erased;
    EXPECT_GE(b.top, 0);
    EXPECT_GE(b.left, 0);
    EXPECT_LT(b.height, 40);
    EXPECT_LT(b.width, 56);
    EXPECT_LE(b.top + b.height, 40);
    EXPECT_LE(b.left + b.width, 56);
  }
  EXPECT_NEAR(erased / 4000.0, 0.25, 0.03);  // some of the coins' boxes fail ten attempts: p is an upper bound
}

TEST(RandomErasing, FillsOnlyTheBoxWithTheValuePerChannelInEitherLayout) {
  ErasingOp op;
  op.p = 1;
  op.value = {1.5f, -2.0f, 0.25f};
  for (bool chw : {true, false}) {
    std::vector<float> img(3 * 20 * 16, 9.0f);
    random_erasing(img.data(), 20, 16, chw, op, 3, 1, 42);
    CounterRng rng(3 ^ 0x52616e6445726173ULL, 1, 42);
    const ErasingBox b = random_erasing_box(20, 16, op, rng);
    ASSERT_TRUE(b.erase);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 16; ++y) {
        for (int x = 0; x < 20; ++x) {
          const float v = img[chw ? c * 320 + y * 20 + x : (y * 20 + x) * 3 + c];
          const bool inside = y >= b.top && y < b.top + b.height && x >= b.left && x < b.left + b.width;
          EXPECT_EQ(v, inside ? op.value[c] : 9.0f) << chw << " " << c << " " << y << " " << x;
        }
      }
    }
  }
}

TEST(RandomErasing, TheSameSeedEpochAndItemGiveTheSameErasureOthersDiffer) {
  ErasingOp op;
  op.p = 1;
  op.random_fill = true;
  auto run = [&](uint64_t seed, uint32_t epoch, uint32_t item) {
    std::vector<float> img(3 * 32 * 32, 0.0f);
    random_erasing(img.data(), 32, 32, true, op, seed, epoch, item);
    return img;
  };
  EXPECT_EQ(run(1, 2, 3), run(1, 2, 3));
  EXPECT_NE(run(1, 2, 3), run(1, 2, 4));
  EXPECT_NE(run(1, 2, 3), run(1, 3, 3));
  EXPECT_NE(run(1, 2, 3), run(2, 2, 3));
}

}  // namespace
}  // namespace joader
