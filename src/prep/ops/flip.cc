// RandomHorizontalFlip(p).
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;

extern const OpFamily kRandomHorizontalFlipFamily{
    .name = "RandomHorizontalFlip",
    .validate =
        [](const AugmentOp& op) {
          if (!(op.p >= 0 && op.p <= 1)) invalid(op, "p must be in [0, 1], not " + number(op.p));
        },
    .describe = [](const AugmentOp& op) { return "RandomHorizontalFlip(p=" + number(op.p) + ")"; },
    .to_wire = [](const AugmentOp& op, v1::AugmentOp& m) { m.mutable_random_horizontal_flip()->set_p(op.p); },
    .from_wire =
        [](const v1::AugmentOp& m, AugmentOp& op) {
          if (m.random_horizontal_flip().has_p()) op.p = m.random_horizontal_flip().p();
        },
    .draw = [](const AugmentOp& op, uint32_t&, uint32_t&, CounterRng& rng,
               OpDraw& draw) { draw.flip = rng.uniform() < op.p; },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp&, const OpDraw& draw) {
          own(in, cur);
          if (draw.flip) flip_rows(cur);
        },
    .mirrors = true,
};

}  // namespace joader
