// RandomHorizontalFlip(p).
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

struct FlipParams : OpParams {
  double p = 0.5;
};

double p_of(const AugmentOp& op) { return op.as<FlipParams>().p; }

}  // namespace

extern const OpFamily kRandomHorizontalFlipFamily{
    .name = "RandomHorizontalFlip",
    .validate =
        [](const AugmentOp& op) {
          if (!(p_of(op) >= 0 && p_of(op) <= 1)) invalid(op, "p must be in [0, 1], not " + number(p_of(op)));
        },
    .describe = [](const AugmentOp& op) { return "RandomHorizontalFlip(p=" + number(p_of(op)) + ")"; },
    .to_wire = [](const AugmentOp& op, v1::AugmentOp& m) { m.mutable_random_horizontal_flip()->set_p(p_of(op)); },
    .from_wire =
        [](const v1::AugmentOp& m, AugmentOp& op) {
          auto p = std::make_shared<FlipParams>();
          if (m.random_horizontal_flip().has_p()) p->p = m.random_horizontal_flip().p();
          op.params = p;
        },
    .draw = [](const AugmentOp& op, uint32_t&, uint32_t&, CounterRng& rng,
               OpDraw& draw) { draw.flip = rng.uniform() < p_of(op); },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp&, const OpDraw& draw) {
          own(in, cur);
          if (draw.flip) flip_rows(cur);
        },
    .mirrors = true,
};

}  // namespace joader
