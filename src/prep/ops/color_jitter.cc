// ColorJitter(brightness, contrast, saturation, hue).
#include "prep/ops/color_jitter.h"

#include <array>
#include <cmath>
#include <utility>

#include "prep/color.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

const char* const kProperties[] = {"brightness", "contrast", "saturation", "hue"};

struct ColorJitterParams : OpParams {
  // (min, max) of each of kProperties; at its centre ((1, 1); (0, 0) for hue) it is not adjusted.
  std::array<double, 8> jitter{1, 1, 1, 1, 1, 1, 0, 0};

  bool jitters(int k) const {
    const double centre = k == 3 ? 0.0 : 1.0;
    return !(jitter[2 * k] == centre && jitter[2 * k + 1] == centre);
  }
};

const ColorJitterParams& params_of(const AugmentOp& op) { return op.as<ColorJitterParams>(); }

void validate(const AugmentOp& op) {
  const ColorJitterParams& p = params_of(op);
  for (int k = 0; k < 4; ++k) {
    const double lo = p.jitter[2 * k], hi = p.jitter[2 * k + 1];
    const bool ok = k == 3 ? (lo >= -0.5 && lo <= hi && hi <= 0.5) : (lo >= 0 && lo <= hi && std::isfinite(hi));
    if (!ok) {
      invalid(op, std::string(kProperties[k]) + " (" + number(lo) + ", " + number(hi) + ") must be a range " +
                      (k == 3 ? "in [-0.5, 0.5]" : "of non-negative factors"));
    }
  }
}

std::string describe(const AugmentOp& op) {
  const ColorJitterParams& p = params_of(op);
  std::string text;
  for (int k = 0; k < 4; ++k) {
    if (!p.jitters(k)) continue;
    text += std::string(text.empty() ? "" : ", ") + kProperties[k] + "=(" + number(p.jitter[2 * k]) + ", " +
            number(p.jitter[2 * k + 1]) + ")";
  }
  return "ColorJitter(" + text + ")";
}

// Each property's range in its own field of the message (in kProperties' order), absent when the
// property is not adjusted. (Plain accessors, not a table of pointers to member functions: GCC's
// bounds sanitizer reports a false out-of-bounds index when one such table is indexed in a call.)
using Range = v1::AugmentOp::Range;
using Jitter = v1::AugmentOp::ColorJitter;

std::array<const Range*, 4> wire_ranges(const Jitter& j) {
  return {j.has_brightness() ? &j.brightness() : nullptr, j.has_contrast() ? &j.contrast() : nullptr,
          j.has_saturation() ? &j.saturation() : nullptr, j.has_hue() ? &j.hue() : nullptr};
}

Range* mutable_wire_range(Jitter& j, int k) {
  return k == 0   ? j.mutable_brightness()
         : k == 1 ? j.mutable_contrast()
         : k == 2 ? j.mutable_saturation()
                  : j.mutable_hue();
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  const ColorJitterParams& p = params_of(op);
  Jitter& jitter = *m.mutable_color_jitter();
  for (int k = 0; k < 4; ++k) {
    if (p.jitters(k)) set_wire_range(p.jitter[2 * k], p.jitter[2 * k + 1], mutable_wire_range(jitter, k));
  }
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  auto p = std::make_shared<ColorJitterParams>();
  const std::array<const Range*, 4> ranges = wire_ranges(m.color_jitter());
  for (int k = 0; k < 4; ++k) {
    if (ranges[k] == nullptr) continue;
    p->jitter[2 * k] = ranges[k]->min();
    p->jitter[2 * k + 1] = ranges[k]->max();
  }
  op.params = p;
}

// torch.randperm(4), then each present factor uniform in its range, as get_params draws.
void draw(const AugmentOp& op, uint32_t&, uint32_t&, CounterRng& rng, OpDraw& d) {
  const ColorJitterParams& p = params_of(op);
  std::array<uint8_t, 4>& order = d.order;
  for (uint8_t k = 3; k > 0; --k) std::swap(order[k], order[rng.below(k + 1)]);
  for (int k = 0; k < 4; ++k) {
    if (p.jitters(k)) d.factors[k] = rng.uniform(p.jitter[2 * k], p.jitter[2 * k + 1]);
  }
}

}  // namespace

void color_jitter(Image& img, const AugmentOp& op, const OpDraw& draw) {
  const ColorJitterParams& p = params_of(op);
  for (uint8_t k : draw.order) {
    if (!p.jitters(k)) continue;
    switch (k) {
      case 0:
        adjust_brightness(img, draw.factors[0]);
        break;
      case 1:
        adjust_contrast(img, draw.factors[1]);
        break;
      case 2:
        adjust_saturation(img, draw.factors[2]);
        break;
      case 3:
        adjust_hue(img, draw.factors[3]);
        break;
    }
  }
}

extern const OpFamily kColorJitterFamily{
    .name = "ColorJitter",
    .validate = validate,
    .describe = describe,
    .to_wire = to_wire,
    .from_wire = from_wire,
    .draw = draw,
    .apply = [](const ImageView& in, Image& cur, const AugmentOp& op,
                const OpDraw& d) { color_jitter(own(in, cur), op, d); },
};

}  // namespace joader
