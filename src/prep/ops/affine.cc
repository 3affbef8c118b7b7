// RandomAffine(degrees, translate, scale, shear, interpolation, fill, center) and
// RandomRotation(degrees, interpolation, expand=False, center, fill): get_params's law, then
// F.affine / F.rotate on the PIL image (prep/pil/geometry.h: PIL's pixels).
#include <cmath>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

void validate(const AugmentOp& op) {
  const AugmentOp::Affine& a = op.affine;
  const auto range = [&](double lo, double hi, const char* what) {
    if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi) || std::fabs(lo) > 1e6 || std::fabs(hi) > 1e6) {
      invalid(op, std::string(what) + " (" + number(lo) + ", " + number(hi) + ") must be a range");
    }
  };
  range(a.degrees_min, a.degrees_max, "degrees");
  if (a.has_translate && !(a.translate_x >= 0 && a.translate_x <= 1 && a.translate_y >= 0 && a.translate_y <= 1)) {
    invalid(op, "translate values must be fractions in [0, 1]");
  }
  if (a.has_scale) {
    range(a.scale_min, a.scale_max, "scale");
    if (!(a.scale_min >= 1e-3 && a.scale_max <= 1e3)) invalid(op, "scale values must be in [0.001, 1000]");
  }
  for (int k = 0; k < a.shear_count; k += 2) range(a.shear[k], a.shear[k + 1], "shear");
  if (a.has_center && (std::fabs(a.center_x) > 1e6 || std::fabs(a.center_y) > 1e6)) invalid(op, "center out of range");
}

std::string describe(const AugmentOp& op) {
  const AugmentOp::Affine& a = op.affine;
  std::string text = std::string(a.rotation ? "RandomRotation" : "RandomAffine") + "(degrees=(" +
                     number(a.degrees_min) + ", " + number(a.degrees_max) + ")";
  if (a.has_translate) text += ", translate=(" + number(a.translate_x) + ", " + number(a.translate_y) + ")";
  if (a.has_scale) text += ", scale=(" + number(a.scale_min) + ", " + number(a.scale_max) + ")";
  if (a.shear_count > 0) {
    text += ", shear=(";
    for (int k = 0; k < a.shear_count; ++k) text += (k ? ", " : "") + number(a.shear[k]);
    text += ")";
  }
  if (a.interpolation == Resample::kBilinear) text += ", interpolation=bilinear";
  text += fill_text(op.fill);
  if (a.has_center) text += ", center=(" + number(a.center_x) + ", " + number(a.center_y) + ")";
  return text + ")";
}

// [rotation, degrees min, max, has_translate, translate x, y, has_scale, scale min, max, shear
// count, shear x4, interpolation, fill x3, has_center, center x, y].
std::vector<double> params(const AugmentOp& op) {
  const AugmentOp::Affine& a = op.affine;
  return {a.rotation ? 1.0 : 0.0,
          a.degrees_min,
          a.degrees_max,
          a.has_translate ? 1.0 : 0.0,
          a.translate_x,
          a.translate_y,
          a.has_scale ? 1.0 : 0.0,
          a.scale_min,
          a.scale_max,
          double(a.shear_count),
          a.shear[0],
          a.shear[1],
          a.shear[2],
          a.shear[3],
          double(static_cast<int>(a.interpolation)),
          double(op.fill[0]),
          double(op.fill[1]),
          double(op.fill[2]),
          a.has_center ? 1.0 : 0.0,
          a.center_x,
          a.center_y};
}

void set_params(AugmentOp& op, const std::vector<double>& values) {
  if (values.size() != 21) invalid(op, "needs 21 values (AugmentOp::params)");
  for (double v : values) {
    if (!std::isfinite(v)) invalid(op, "values must be finite");
  }
  const auto flag = [&](double v) {
    if (v != 0 && v != 1) invalid(op, "a flag must be 0 or 1");
    return v == 1;
  };
  AugmentOp::Affine& a = op.affine;
  a.rotation = flag(values[0]);
  a.degrees_min = values[1];
  a.degrees_max = values[2];
  a.has_translate = flag(values[3]);
  a.translate_x = values[4];
  a.translate_y = values[5];
  a.has_scale = flag(values[6]);
  a.scale_min = values[7];
  a.scale_max = values[8];
  if (values[9] != 0 && values[9] != 2 && values[9] != 4) invalid(op, "shear takes 0, 2 or 4 values");
  a.shear_count = static_cast<int>(values[9]);
  for (int k = 0; k < 4; ++k) a.shear[k] = values[10 + k];
  if (values[14] != 0 && values[14] != 2) invalid(op, "interpolation must be nearest or bilinear");
  a.interpolation = static_cast<Resample>(static_cast<int>(values[14]));
  for (int k = 0; k < 3; ++k) {
    if (!(values[15 + k] >= 0 && values[15 + k] <= 255)) invalid(op, "fill out of range");
    op.fill[k] = static_cast<uint8_t>(values[15 + k]);
  }
  a.has_center = flag(values[18]);
  a.center_x = values[19];
  a.center_y = values[20];
}

// RandomAffine.get_params / RandomRotation.get_params, in their order.
void draw(const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& d) {
  const AugmentOp::Affine& a = op.affine;
  AffineParams& p = d.affine;
  p.angle = rng.uniform(a.degrees_min, a.degrees_max);
  if (!a.rotation) {
    if (a.has_translate) {
      const double max_dx = a.translate_x * width, max_dy = a.translate_y * height;
      p.translate_x = std::nearbyint(rng.uniform(-max_dx, max_dx));  // int(round(...)): ties to even
      p.translate_y = std::nearbyint(rng.uniform(-max_dy, max_dy));
    }
    if (a.has_scale) p.scale = rng.uniform(a.scale_min, a.scale_max);
    if (a.shear_count >= 2) p.shear_x = rng.uniform(a.shear[0], a.shear[1]);
    if (a.shear_count == 4) p.shear_y = rng.uniform(a.shear[2], a.shear[3]);
  }
  p.has_center = a.has_center;
  p.center_x = a.center_x;
  p.center_y = a.center_y;
}

void apply(const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw& d) {
  own(in, cur);
  const AffineParams& p = d.affine;
  if (op.affine.rotation) {
    const double center[2] = {p.center_x, p.center_y};
    cur = rotate_pil(cur, p.angle, op.affine.interpolation, op.fill, p.has_center ? center : nullptr);
  } else {
    cur = affine_transform(cur, p, op.affine.interpolation, op.fill);
  }
}

}  // namespace

extern const OpFamily kRandomAffineFamily{
    .name = "RandomAffine",
    .validate = validate,
    .describe = describe,
    .params = params,
    .set_params = set_params,
    .name_of = [](const AugmentOp& op) { return op.affine.rotation ? "RandomRotation" : "RandomAffine"; },
    .draw = draw,
    .apply = apply,
};

}  // namespace joader
