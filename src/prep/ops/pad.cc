// Pad(padding, fill, padding_mode="constant"): F.pad on the PIL image (ImageOps.expand): the image
// inside a border of the constant fill, (left, top, right, bottom) pixels wide.
#include <cstring>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;

namespace {

struct PadParams : OpParams {
  std::array<uint32_t, 4> padding{0, 0, 0, 0};  // left, top, right, bottom
  std::array<uint8_t, 3> fill{0, 0, 0};
};

const PadParams& params_of(const AugmentOp& op) { return op.as<PadParams>(); }

std::string describe(const AugmentOp& op) {
  return "Pad(padding=" + padding_text(params_of(op).padding) + fill_text(params_of(op).fill) + ")";
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  v1::AugmentOp::Pad& pad = *m.mutable_pad();
  set_wire_padding(params_of(op).padding, pad.mutable_padding());
  set_wire_fill(params_of(op).fill, pad.mutable_fill());
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  auto p = std::make_shared<PadParams>();
  op.params = p;
  p->padding = padding_of(m.pad().padding());
  p->fill = fill_of(op, m.pad().fill());
}

void apply(const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw&) {
  const auto& p = params_of(op).padding;
  Image out = filled_image(in.width + p[0] + p[2], in.height + p[1] + p[3], params_of(op).fill);
  for (uint32_t y = 0; y < in.height; ++y) {
    std::memcpy(&out.rgb[(size_t{p[1] + y} * out.width + p[0]) * 3], in.rgb + size_t{y} * in.stride,
                size_t{in.width} * 3);
  }
  cur = std::move(out);
}

}  // namespace

extern const OpFamily kPadFamily{
    .name = "Pad",
    .sizing = OpFamily::Sizing::kResizes,
    .validate = [](const AugmentOp& op) { check_padding(op, params_of(op).padding); },
    .describe = describe,
    .to_wire = to_wire,
    .from_wire = from_wire,
    .draw =
        [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng&, OpDraw&) {
          const auto& p = params_of(op).padding;
          const uint64_t w = uint64_t{width} + p[0] + p[2];
          const uint64_t h = uint64_t{height} + p[1] + p[3];
          check_pixels(op, width, height, w, h);
          width = static_cast<uint32_t>(w);
          height = static_cast<uint32_t>(h);
        },
    .apply = apply,
};

}  // namespace joader
