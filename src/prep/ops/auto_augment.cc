// AutoAugment(policy): TrivialAugmentWide, RandAugment, AutoAugment, and torchvision's single
// random ops as its RandomApply family (prep/autoaugment.h: their laws and PIL's pixels).
#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

// The policy families as the protocol numbers them.
static_assert(int(AutoAugmentSpec::kTrivialAugmentWide) == v1::AugmentOp::AutoAugment::TRIVIAL_AUGMENT_WIDE &&
              int(AutoAugmentSpec::kRandAugment) == v1::AugmentOp::AutoAugment::RAND_AUGMENT &&
              int(AutoAugmentSpec::kAutoAugment) == v1::AugmentOp::AutoAugment::AUTO_AUGMENT &&
              int(AutoAugmentSpec::kRandomApply) == v1::AugmentOp::AutoAugment::RANDOM_APPLY);

struct AutoAugmentParams : OpParams {
  AutoAugmentSpec policy;
};

const AutoAugmentSpec& policy_of(const AugmentOp& op) { return op.as<AutoAugmentParams>().policy; }

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  const AutoAugmentSpec& spec = policy_of(op);
  v1::AugmentOp::AutoAugment& wire = *m.mutable_auto_augment();
  wire.set_family(static_cast<v1::AugmentOp::AutoAugment::Family>(spec.family));
  wire.set_num_ops(spec.num_ops);
  wire.set_interpolation(wire_resample(spec.interpolation));
  set_wire_fill(spec.fill, wire.mutable_fill());
  wire.set_policy_size(spec.policy_size);
  for (const AutoAugmentSpec::Entry& e : spec.entries) {
    v1::AugmentOp::AutoAugment::Entry& entry = *wire.add_entries();
    entry.set_op(static_cast<v1::AugmentOp::AutoAugment::ImageOp>(e.op));
    entry.set_p(e.p);
    entry.set_is_signed(e.is_signed);
    entry.mutable_magnitudes()->Add(e.magnitudes.begin(), e.magnitudes.end());
  }
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  const v1::AugmentOp::AutoAugment& wire = m.auto_augment();
  auto p = std::make_shared<AutoAugmentParams>();
  op.params = p;
  AutoAugmentSpec& spec = p->policy;
  if (!v1::AugmentOp::AutoAugment::Family_IsValid(wire.family())) invalid(op, "unknown policy family");
  spec.family = static_cast<AutoAugmentSpec::Family>(wire.family());
  spec.num_ops = wire.has_num_ops() ? wire.num_ops() : 1;
  spec.interpolation = resample_of(op, wire.interpolation());
  spec.fill = fill_of(op, wire.fill());
  spec.policy_size = wire.has_policy_size() ? wire.policy_size() : 2;
  spec.entries.clear();
  for (const v1::AugmentOp::AutoAugment::Entry& entry : wire.entries()) {
    if (!v1::AugmentOp::AutoAugment::ImageOp_IsValid(entry.op())) {
      invalid(op, "unknown image op " + std::to_string(entry.op()));
    }
    AutoAugmentSpec::Entry& e = spec.entries.emplace_back();
    e.op = static_cast<ImageOp>(entry.op());
    e.p = entry.has_p() ? entry.p() : 1.0;
    e.is_signed = entry.is_signed();
    e.magnitudes.assign(entry.magnitudes().begin(), entry.magnitudes().end());
  }
}

}  // namespace

extern const OpFamily kAutoAugmentFamily{
    .name = "AutoAugment",
    .validate = [](const AugmentOp& op) { policy_of(op).validate(); },
    .describe = [](const AugmentOp& op) { return policy_of(op).describe(); },
    .to_wire = to_wire,
    .from_wire = from_wire,
    .draw = [](const AugmentOp& op, uint32_t&, uint32_t&, CounterRng& rng,
               OpDraw& draw) { draw.applied = draw_auto_augment(policy_of(op), rng); },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw& draw) {
          own(in, cur);
          for (const AppliedOp& a : draw.applied)
            apply_image_op(cur, a.op, a.magnitude, policy_of(op).interpolation, policy_of(op).fill);
        },
};

}  // namespace joader
