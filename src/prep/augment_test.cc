#include "prep/augment.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "common/augment_wire.h"

namespace joader {
namespace {

Image gradient(uint32_t w, uint32_t h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(x * 7 + y);
      p[1] = uint8_t(y * 5);
      p[2] = uint8_t((x ^ y) * 3);
    }
  }
  return img;
}

// An op as the protocol's JSON form writes it (common/augment_wire.h).
AugmentOp op(const std::string& json) { return ops_from_json({json})[0]; }

// RandomResizedCrop(size) with more fields of its message.
AugmentOp rrc(uint32_t size, const std::string& more = "") {
  return op(R"({"random_resized_crop": {"size": )" + std::to_string(size) + more + "}}");
}

AugmentOp sized(const std::string& field, uint32_t size) {
  return op(R"({")" + field + R"(": {"size": )" + std::to_string(size) + "}}");
}

const AugmentOp kFlip = op(R"({"random_horizontal_flip": {}})");

TEST(CounterRng, DrawsDependOnlyOnSeedEpochAndItem) {
  CounterRng a(7, 2, 11), b(7, 2, 11), other_seed(8, 2, 11), other_epoch(7, 3, 11), other_item(7, 2, 12);
  for (int i = 0; i < 5; ++i) {
    const uint64_t v = a.next();
    EXPECT_EQ(v, b.next());
    EXPECT_NE(v, other_seed.next());
    EXPECT_NE(v, other_epoch.next());
    EXPECT_NE(v, other_item.next());
  }
}

TEST(CounterRng, BoundedDrawsAreUniform) {
  // Chi-square over 7 cells, 70 000 draws from 70 000 keys: the 0.1 % critical value for 6
  // degrees of freedom is 22.46 (false failure rate 1e-3 for a fixed seed: it either passes or not).
  std::vector<double> count(7, 0);
  for (uint32_t item = 0; item < 70000; ++item) count[CounterRng(1, 0, item).below(7)] += 1;
  double chi2 = 0;
  for (double c : count) chi2 += (c - 10000) * (c - 10000) / 10000;
  EXPECT_LT(chi2, 22.46);
}

TEST(RandomResizedCrop, BoxesLieInsideTheImageAndCoverTheScaleRange) {
  const AugmentOp op = rrc(224);
  double smallest = 1, largest = 0;
  for (uint32_t item = 0; item < 2000; ++item) {
    CounterRng rng(3, 0, item);
    const CropBox b = random_resized_crop_box(500, 375, op, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 375);
    ASSERT_LE(b.left + b.width, 500);
    const double fraction = double(b.width * b.height) / (500.0 * 375.0);
    smallest = std::min(smallest, fraction);
    largest = std::max(largest, fraction);
  }
  EXPECT_LT(smallest, 0.1);
  EXPECT_GT(largest, 0.9);
}

TEST(RandomResizedCrop, FallsBackToTheClampedCentralCropLikeTorchvision) {
  // A 1000×10 strip: no box of 90-100 % of the area has an aspect ratio in [3/4, 4/3], so the ten
  // attempts fail and torchvision clamps: h = 10, w = round(10 * 4/3) = 13, centred.
  const AugmentOp op = rrc(8, R"(, "scale": {"min": 0.9, "max": 1})");
  CounterRng rng(1, 0, 0);
  EXPECT_EQ(random_resized_crop_box(1000, 10, op, rng), (CropBox{0, 493, 10, 13}));
  CounterRng tall(1, 0, 0);
  EXPECT_EQ(random_resized_crop_box(10, 1000, op, tall), (CropBox{493, 0, 13, 10}));
}

TEST(Augment, ResizeThenCenterCropIsTheDatasetPrepPipeline) {
  const Image img = gradient(97, 61);
  PrepSpec spec;
  spec.raw = false;
  spec.resize = 40;
  spec.crop = 32;
  std::vector<uint8_t> expected;
  resize_window(img, prep_geometry(spec, img.width, img.height), 32, 32, expected);
  const Image out = augment(img, {sized("resize", 40), sized("center_crop", 32)}, 1, 0, 0);
  EXPECT_EQ(out.width, 32u);
  EXPECT_EQ(out.rgb, expected);
}

TEST(Resample, ByColumnsGivesTheSameBytesAsByRows) {
  const Image img = gradient(173, 121);
  const ImageView view{img.rgb.data(), img.width, img.height, size_t{img.width} * 3};
  CounterRng rng(9, 0, 0);
  for (int n = 0; n < 300; ++n) {
    // Every 10th box is the whole image, whose last pixel ends its buffer (ASan checks that the
    // word-sized moves read nothing past it).
    const bool whole = n % 10 == 0;
    const uint32_t w = whole ? img.width : 1 + rng.below(img.width), h = whole ? img.height : 1 + rng.below(img.height);
    const uint32_t left = rng.below(img.width - w + 1), top = rng.below(img.height - h + 1);
    const ImageView box{view.rgb + size_t(top) * view.stride + size_t(left) * 3, w, h, view.stride};
    PrepGeometry g;  // shrink and enlarge, to square and to other shapes, whole or a window
    g.resized_width = 1 + rng.below(300);
    g.resized_height = 1 + rng.below(300);
    g.crop_left = int64_t(rng.below(g.resized_width)) - 5;
    g.crop_top = int64_t(rng.below(g.resized_height)) - 5;
    const int64_t cw = 1 + rng.below(g.resized_width), ch = 1 + rng.below(g.resized_height);
    std::vector<uint8_t> by_rows, by_columns;
    resize_window(box, g, cw, ch, by_rows, HorizontalPass::kByRows);
    resize_window(box, g, cw, ch, by_columns, HorizontalPass::kByColumns);
    ASSERT_EQ(by_rows, by_columns) << w << "x" << h << " -> " << g.resized_width << "x" << g.resized_height;
  }
}

TEST(Augment, AFlipMirrorsEachRow) {
  const Image img = gradient(9, 4);
  CropBox whole{0, 0, 4, 9};
  const Image plain = resized_crop(img, whole, 5, false), flipped = resized_crop(img, whole, 5, true);
  for (uint32_t y = 0; y < 5; ++y) {
    for (uint32_t x = 0; x < 5; ++x) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(flipped.rgb[(y * 5 + x) * 3 + c], plain.rgb[(y * 5 + (4 - x)) * 3 + c]);
      }
    }
  }
}

TEST(Augment, SameKeySameCropsOtherEpochOtherCrops) {
  const Image img = gradient(120, 90);
  const std::vector<AugmentOp> ops = {rrc(32), kFlip};
  EXPECT_EQ(augment(img, ops, 5, 1, 9).rgb, augment(img, ops, 5, 1, 9).rgb);
  std::set<std::vector<uint8_t>> distinct;
  for (uint32_t epoch = 0; epoch < 8; ++epoch) distinct.insert(augment(img, ops, 5, epoch, 9).rgb);
  EXPECT_GE(distinct.size(), 7u);
}

// Stores the rows a RowSink is given, checking that each comes once and in order.
class StoredRows final : public RowSink {
 public:
  explicit StoredRows(uint32_t size) : size_(size) {}
  void row(int64_t y, const uint8_t* rgb) override {
    EXPECT_EQ(y, next_++) << "rows out of order";
    bytes_.insert(bytes_.end(), rgb, rgb + size_t{size_} * 3);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  uint32_t size_;
  int64_t next_ = 0;
  std::vector<uint8_t> bytes_;
};

TEST(Augment, RowsHandedOverAreTheImageAugmentGivesForEveryPipelineShape) {
  // Pipelines that end in a resample the rows come straight from (bilinear / bicubic crops, with
  // zero, one or two flips after), and ones computed whole first (nearest, a ColorJitter last, a
  // crop with ops before it, a CenterCrop).
  const AugmentOp bicubic = rrc(24, R"(, "interpolation": "BICUBIC")"),
                  nearest = rrc(24, R"(, "interpolation": "NEAREST")");
  const AugmentOp jitter = op(R"({"color_jitter": {"brightness": {"min": 0.6, "max": 1.4},
      "contrast": {"min": 0.6, "max": 1.4}, "saturation": {"min": 0.6, "max": 1.4}, "hue": {"min": -0.1, "max": 0.1}}})");
  const AugmentOp flip = kFlip;
  const std::vector<std::vector<AugmentOp>> pipelines = {{rrc(24)},
                                                         {rrc(24), flip},
                                                         {rrc(24), flip, flip},
                                                         {bicubic, flip},
                                                         {nearest, flip},
                                                         {rrc(24), flip, jitter},
                                                         {jitter, rrc(24), flip},
                                                         {sized("resize", 30), sized("center_crop", 24)}};
  const Image img = gradient(97, 61);
  for (size_t p = 0; p < pipelines.size(); ++p) {
    for (uint32_t item = 0; item < 20; ++item) {
      StoredRows rows(24);
      augment(ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}, pipelines[p], 3, 1, item, rows);
      ASSERT_EQ(rows.bytes(), augment(img, pipelines[p], 3, 1, item).rgb) << "pipeline " << p << ", item " << item;
    }
  }
}

TEST(ResizeWindow, RowsHandedOverAreTheWindowWithItsZeroPadding) {
  const Image img = gradient(40, 30);
  const ImageView view{img.rgb.data(), img.width, img.height, size_t{img.width} * 3};
  // A window inside, one padded on every side, and one wholly outside the resized image.
  for (const auto& [left, top] : std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {-4, -3}, {100, 0}}) {
    PrepGeometry g;
    g.resized_width = 20;
    g.resized_height = 15;
    g.crop_left = left;
    g.crop_top = top;
    std::vector<uint8_t> stored;
    resize_window(view, g, 16, 21, stored);
    StoredRows rows(16);
    resize_window(view, g, 16, 21, rows);
    ASSERT_EQ(rows.bytes(), stored) << left << ", " << top;
  }
}

TEST(Augment, BadPipelinesAreRefusedNamingTheOpAndField) {
  auto message = [](std::vector<AugmentOp> ops) {
    try {
      validate_pipeline(ops);
    } catch (const PrepError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message({rrc(0)}), "RandomResizedCrop: size must be in 1..8192, not 0");
  EXPECT_EQ(message({rrc(9000)}), "RandomResizedCrop: size must be in 1..8192, not 9000");
  const AugmentOp empty_scale = rrc(8, R"(, "scale": {"min": 0.5, "max": 0.2})");
  EXPECT_EQ(message({empty_scale}),
            "RandomResizedCrop: scale (0.5, 0.2) must be a non-empty range of positive fractions");
  const AugmentOp bad_ratio = rrc(8, R"(, "ratio": {"min": 0, "max": 1.3333333333333333})");
  EXPECT_EQ(message({bad_ratio}),
            "RandomResizedCrop: ratio (0, 1.33333) must be a non-empty range of positive aspect ratios");
  const AugmentOp flip = op(R"({"random_horizontal_flip": {"p": 1.5}})");
  EXPECT_EQ(message({rrc(8), flip}), "RandomHorizontalFlip: p must be in [0, 1], not 1.5");
  EXPECT_NE(message({sized("resize", 8)}).find("must end in a fixed size"), std::string::npos);
  EXPECT_NE(message({}).find("at least one op"), std::string::npos);
  EXPECT_EQ(message({rrc(8), kFlip}), "accepted");
  EXPECT_EQ(pipeline_output_size({sized("resize", 40), sized("center_crop", 32)}), 32u);
}

TEST(RandomAffine, BadRangesAreRefusedNamingTheTransformAndField) {
  const AugmentOp backwards = op(R"({"random_affine": {"rotation": true, "degrees": {"min": 5, "max": 1}}})");
  try {
    validate_pipeline({backwards, sized("center_crop", 8)});
    ADD_FAILURE() << "accepted";
  } catch (const PrepError& e) {
    EXPECT_EQ(std::string(e.what()), "RandomRotation: degrees (5, 1) must be a range");
  }
  const AugmentOp affine =
      op(R"({"random_affine": {"rotation": true, "degrees": {"min": 5, "max": 10}, "interpolation": "BILINEAR"}})");
  validate_pipeline({affine, sized("center_crop", 8)});
  EXPECT_EQ(affine.describe(), "RandomRotation(degrees=(5, 10), interpolation=bilinear)");
  const AffineParams drawn = draw_augment({affine}, 20, 10, 1, 0, 3)[0].affine;
  EXPECT_GE(drawn.angle, 5);
  EXPECT_LT(drawn.angle, 10);
  const AugmentOp far = op(R"({"random_affine": {"degrees": {"min": 5, "max": 10}, "center": {"x": 1e7}}})");
  EXPECT_THROW(validate_pipeline({far, sized("center_crop", 8)}), PrepError) << "a centre out of range";
}

TEST(RandomCrop, PadsWithTheFillThenCropsTheDrawnWindow) {
  const Image img = gradient(6, 4);
  // left 2, top 3, right 0, bottom 1: 8×8 padded
  const AugmentOp crop =
      op(R"({"random_crop": {"size": 8, "padding": {"left": 2, "top": 3, "bottom": 1}, "fill": [9, 8, 7]}})");
  validate_pipeline({crop});
  const Image out = random_crop(ImageView{img.rgb.data(), 6, 4, 18}, crop, CropBox{0, 0, 8, 8});
  ASSERT_EQ(out.width, 8u);
  EXPECT_EQ(out.rgb[0], 9) << "the padding has the fill";
  EXPECT_EQ(out.rgb[2], 7);
  EXPECT_EQ(0, std::memcmp(&out.rgb[(3 * 8 + 2) * 3], &img.rgb[0], 3)) << "the image sits at (left, top)";
  std::set<std::pair<int64_t, int64_t>> windows;
  const AugmentOp small = sized("random_crop", 4);
  for (uint32_t item = 0; item < 400; ++item) {
    const CropBox b = draw_augment({small}, 6, 4, 1, 0, item)[0].box;
    windows.emplace(b.top, b.left);
  }
  EXPECT_EQ(windows.size(), 3u) << "every left in 0..2, top 0";
  EXPECT_THROW(draw_augment({sized("random_crop", 5)}, 6, 4, 1, 0, 0), PrepError) << "4 rows < 5";
  const AugmentOp needed = op(R"({"random_crop": {"size": 5, "pad_if_needed": true}})");
  EXPECT_EQ(random_crop_padding(needed, 6, 4).height, 6u) << "both sides padded by the missing row";
}

}  // namespace
}  // namespace joader
