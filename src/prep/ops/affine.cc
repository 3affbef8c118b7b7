// RandomAffine(degrees, translate, scale, shear, interpolation, fill, center) and
// RandomRotation(degrees, interpolation, expand=False, center, fill): get_params's law, then
// F.affine / F.rotate on the PIL image (prep/pil/geometry.h: PIL's pixels).
#include <algorithm>
#include <cmath>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

// torchvision's ranges, as given.
struct RandomAffineParams : OpParams {
  bool rotation = false;  // RandomRotation: F.rotate (PIL's rotate); else F.affine
  double degrees_min = 0, degrees_max = 0;
  bool has_translate = false;
  double translate_x = 0, translate_y = 0;  // fractions of the width and height
  bool has_scale = false;
  double scale_min = 1, scale_max = 1;
  int shear_count = 0;  // 0, 2 (x) or 4 (x then y)
  std::array<double, 4> shear{0, 0, 0, 0};
  Resample interpolation = Resample::kNearest;
  std::array<uint8_t, 3> fill{0, 0, 0};
  bool has_center = false;
  double center_x = 0, center_y = 0;
};

const RandomAffineParams& params_of(const AugmentOp& op) { return op.as<RandomAffineParams>(); }

void validate(const AugmentOp& op) {
  const RandomAffineParams& a = params_of(op);
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
  if (a.has_center && !(std::fabs(a.center_x) <= 1e6 && std::fabs(a.center_y) <= 1e6))
    invalid(op, "center out of range");
}

std::string describe(const AugmentOp& op) {
  const RandomAffineParams& a = params_of(op);
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
  text += fill_text(a.fill);
  if (a.has_center) text += ", center=(" + number(a.center_x) + ", " + number(a.center_y) + ")";
  return text + ")";
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  const RandomAffineParams& a = params_of(op);
  v1::AugmentOp::RandomAffine& wire = *m.mutable_random_affine();
  wire.set_rotation(a.rotation);
  set_wire_range(a.degrees_min, a.degrees_max, wire.mutable_degrees());
  if (a.has_translate) {
    wire.mutable_translate()->set_x(a.translate_x);
    wire.mutable_translate()->set_y(a.translate_y);
  }
  if (a.has_scale) set_wire_range(a.scale_min, a.scale_max, wire.mutable_scale());
  wire.mutable_shear()->Add(a.shear.begin(), a.shear.begin() + a.shear_count);
  wire.set_interpolation(wire_resample(a.interpolation));
  set_wire_fill(a.fill, wire.mutable_fill());
  if (a.has_center) {
    wire.mutable_center()->set_x(a.center_x);
    wire.mutable_center()->set_y(a.center_y);
  }
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  const v1::AugmentOp::RandomAffine& wire = m.random_affine();
  auto params = std::make_shared<RandomAffineParams>();
  RandomAffineParams& a = *params;
  a.rotation = wire.rotation();  // (first: the errors below name RandomRotation by it)
  op.params = params;
  a.degrees_min = wire.degrees().min();
  a.degrees_max = wire.degrees().max();
  a.has_translate = wire.has_translate();
  a.translate_x = wire.translate().x();
  a.translate_y = wire.translate().y();
  a.has_scale = wire.has_scale();
  a.scale_min = a.has_scale ? wire.scale().min() : 1;
  a.scale_max = a.has_scale ? wire.scale().max() : 1;
  const int shears = wire.shear_size();
  if (shears != 0 && shears != 2 && shears != 4) invalid(op, "shear takes 0, 2 or 4 values");
  a.shear_count = shears;
  a.shear = {0, 0, 0, 0};
  std::copy(wire.shear().begin(), wire.shear().end(), a.shear.begin());
  a.interpolation = resample_of(op, wire.interpolation());
  a.fill = fill_of(op, wire.fill());
  a.has_center = wire.has_center();
  a.center_x = wire.center().x();
  a.center_y = wire.center().y();
}

// RandomAffine.get_params / RandomRotation.get_params, in their order.
void draw(const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& d) {
  const RandomAffineParams& a = params_of(op);
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
  const RandomAffineParams& a = params_of(op);
  const AffineParams& p = d.affine;
  if (a.rotation) {
    const double center[2] = {p.center_x, p.center_y};
    cur = rotate_pil(cur, p.angle, a.interpolation, a.fill, p.has_center ? center : nullptr);
  } else {
    cur = affine_transform(cur, p, a.interpolation, a.fill);
  }
}

}  // namespace

extern const OpFamily kRandomAffineFamily{
    .name = "RandomAffine",
    .validate = validate,
    .describe = describe,
    .to_wire = to_wire,
    .from_wire = from_wire,
    .name_of = [](const AugmentOp& op) { return params_of(op).rotation ? "RandomRotation" : "RandomAffine"; },
    .draw = draw,
    .apply = apply,
};

}  // namespace joader
