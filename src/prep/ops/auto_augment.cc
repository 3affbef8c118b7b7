// AutoAugment(policy): TrivialAugmentWide, RandAugment, AutoAugment, and torchvision's single
// random ops as its RandomApply family (prep/autoaugment.h: their laws and PIL's pixels).
#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;

extern const OpFamily kAutoAugmentFamily{
    .name = "AutoAugment",
    .validate = [](const AugmentOp& op) { op.policy.validate(); },
    .describe = [](const AugmentOp& op) { return op.policy.describe(); },
    .params = [](const AugmentOp& op) { return op.policy.encode(); },
    .set_params = [](AugmentOp& op, const std::vector<double>& values) { op.policy = AutoAugmentSpec::decode(values); },
    .draw = [](const AugmentOp& op, uint32_t&, uint32_t&, CounterRng& rng,
               OpDraw& draw) { draw.applied = draw_auto_augment(op.policy, rng); },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw& draw) {
          own(in, cur);
          for (const AppliedOp& a : draw.applied)
            apply_image_op(cur, a.op, a.magnitude, op.policy.interpolation, op.policy.fill);
        },
};

}  // namespace joader
