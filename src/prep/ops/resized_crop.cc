// RandomResizedCrop(size, scale, ratio, interpolation).
#include "prep/ops/resized_crop.h"

#include <cmath>
#include <cstring>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

struct ResizedCropParams : OpParams {
  uint32_t size = 0;
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4, ratio_max = 4.0 / 3;
  Interpolation interpolation = Interpolation::kBilinear;
};

const ResizedCropParams& params_of(const AugmentOp& op) { return op.as<ResizedCropParams>(); }

// The box of img as an image of its own, which is what PIL's crop gives resize to read whole.
ImageView box_of(const ImageView& img, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.width <= 0 || box.height <= 0 || box.top + box.height > img.height ||
      box.left + box.width > img.width) {
    throw PrepError("crop box outside the image");
  }
  return ImageView{img.rgb + size_t(box.top) * img.stride + size_t(box.left) * 3, uint32_t(box.width),
                   uint32_t(box.height), img.stride};
}

PrepGeometry resized_to(uint32_t size, Interpolation interpolation) {
  PrepGeometry g;
  g.resized_width = g.resized_height = size;
  g.filter = filter_of(interpolation);
  return g;
}

// Hands each row on mirrored (F.hflip), through one row of scratch.
class MirroredRows final : public RowSink {
 public:
  MirroredRows(RowSink& to, uint32_t width) : to_(to), width_(width), row_(size_t{width} * 3) {}
  void row(int64_t y, const uint8_t* rgb) override {
    uint8_t* out = row_.data();
    for (const uint8_t* in = rgb + (size_t{width_} - 1) * 3; in >= rgb; in -= 3, out += 3) std::memcpy(out, in, 3);
    to_.row(y, row_.data());
  }

 private:
  RowSink& to_;
  uint32_t width_;
  std::vector<uint8_t> row_;
};

void validate(const AugmentOp& op) {
  const ResizedCropParams& p = params_of(op);
  check_size(op, p.size);
  if (!(p.scale_min > 0) || !(p.scale_min <= p.scale_max) || !std::isfinite(p.scale_max)) {
    invalid(op, "scale (" + number(p.scale_min) + ", " + number(p.scale_max) +
                    ") must be a non-empty range of positive fractions");
  }
  if (!(p.ratio_min > 0) || !(p.ratio_min <= p.ratio_max) || !std::isfinite(p.ratio_max)) {
    invalid(op, "ratio (" + number(p.ratio_min) + ", " + number(p.ratio_max) +
                    ") must be a non-empty range of positive aspect ratios");
  }
}

std::string describe(const AugmentOp& op) {
  const ResizedCropParams& p = params_of(op);
  return "RandomResizedCrop(" + std::to_string(p.size) + ", scale=(" + number(p.scale_min) + ", " +
         number(p.scale_max) + "), ratio=(" + number(p.ratio_min) + ", " + number(p.ratio_max) + ")" +
         interpolation_text(p.interpolation) + ")";
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  const ResizedCropParams& p = params_of(op);
  v1::AugmentOp::RandomResizedCrop& crop = *m.mutable_random_resized_crop();
  crop.set_size(p.size);
  set_wire_range(p.scale_min, p.scale_max, crop.mutable_scale());
  set_wire_range(p.ratio_min, p.ratio_max, crop.mutable_ratio());
  crop.set_interpolation(wire_interpolation(p.interpolation));
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  const v1::AugmentOp::RandomResizedCrop& crop = m.random_resized_crop();
  auto p = std::make_shared<ResizedCropParams>();
  op.params = p;
  p->size = crop.size();
  if (crop.has_scale()) {
    p->scale_min = crop.scale().min();
    p->scale_max = crop.scale().max();
  }
  if (crop.has_ratio()) {
    p->ratio_min = crop.ratio().min();
    p->ratio_max = crop.ratio().max();
  }
  p->interpolation = interpolation_of(op, crop.interpolation());
}

}  // namespace

CropBox random_resized_crop_box(uint32_t width, uint32_t height, const AugmentOp& crop, CounterRng& rng) {
  const ResizedCropParams& op = params_of(crop);
  const double area = double(width) * double(height);
  const double log_lo = std::log(op.ratio_min), log_hi = std::log(op.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(op.scale_min, op.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int64_t w = py_round(std::sqrt(target_area * aspect));
    const int64_t h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropBox box{0, 0, h, w};
      box.top = static_cast<int64_t>(rng.below(uint64_t(height - h + 1)));
      box.left = static_cast<int64_t>(rng.below(uint64_t(width - w + 1)));
      return box;
    }
  }
  // torchvision's fallback: the central crop, clamped to the ratio range.
  const double in_ratio = double(width) / double(height);
  CropBox box;
  if (in_ratio < op.ratio_min) {
    box.width = width;
    box.height = py_round(box.width / op.ratio_min);
  } else if (in_ratio > op.ratio_max) {
    box.height = height;
    box.width = py_round(box.height * op.ratio_max);
  } else {
    box.width = width;
    box.height = height;
  }
  box.top = (int64_t(height) - box.height) / 2;
  box.left = (int64_t(width) - box.width) / 2;
  return box;
}

Image resized_crop(const ImageView& img, const CropBox& box, uint32_t size, bool flip, Interpolation interpolation) {
  const ImageView cropped = box_of(img, box);
  Image out;
  if (interpolation == Interpolation::kNearest) {
    out = resize_nearest(copy_of(cropped), size, size);
  } else {
    out.width = out.height = size;
    resize_window(cropped, resized_to(size, interpolation), size, size, out.rgb);
  }
  if (flip) flip_rows(out);
  return out;
}

Image resized_crop(const Image& img, const CropBox& box, uint32_t size, bool flip, Interpolation interpolation) {
  return resized_crop(view_of(img), box, size, flip, interpolation);
}

extern const OpFamily kRandomResizedCropFamily{
    .name = "RandomResizedCrop",
    .sizing = OpFamily::Sizing::kFixes,
    .fixed_size = [](const AugmentOp& op) { return params_of(op).size; },
    .validate = validate,
    .describe = describe,
    .to_wire = to_wire,
    .from_wire = from_wire,
    .draw =
        [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& draw) {
          draw.box = random_resized_crop_box(width, height, op, rng);
          width = height = params_of(op).size;
        },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw& draw) {
          const ResizedCropParams& p = params_of(op);
          cur = resized_crop(in, draw.box, p.size, false, p.interpolation);
        },
    // Bilinear and bicubic resample row by row (resize_window); PIL's nearest is computed whole.
    .streams = [](const AugmentOp& op) { return params_of(op).interpolation != Interpolation::kNearest; },
    .stream =
        [](const ImageView& in, const AugmentOp& op, const OpDraw& draw, bool mirrored, RowSink& sink) {
          const ResizedCropParams& p = params_of(op);
          const ImageView cropped = box_of(in, draw.box);
          const PrepGeometry g = resized_to(p.size, p.interpolation);
          if (mirrored) {
            MirroredRows rows(sink, p.size);
            resize_window(cropped, g, p.size, p.size, rows);
          } else {
            resize_window(cropped, g, p.size, p.size, sink);
          }
        },
    .rows_read =
        [](const OpDraw& draw, int64_t* top, int64_t* height) {
          *top = draw.box.top;
          *height = draw.box.height;
        },
    .rows_from = [](OpDraw& draw, int64_t top) { draw.box.top -= top; },
};

}  // namespace joader
