// Pad(padding, fill, padding_mode="constant"): F.pad on the PIL image (ImageOps.expand): the image
// inside a border of the constant fill, (left, top, right, bottom) pixels wide.
#include <cstring>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;

namespace {

std::string describe(const AugmentOp& op) {
  const auto& p = op.padding;
  return "Pad(padding=(" + std::to_string(p[0]) + ", " + std::to_string(p[1]) + ", " + std::to_string(p[2]) + ", " +
         std::to_string(p[3]) + ")" + fill_text(op.fill) + ")";
}

// [left, top, right, bottom, fill x3].
std::vector<double> params(const AugmentOp& op) {
  const auto& p = op.padding;
  return {double(p[0]),       double(p[1]),       double(p[2]),      double(p[3]),
          double(op.fill[0]), double(op.fill[1]), double(op.fill[2])};
}

void set_params(AugmentOp& op, const std::vector<double>& values) {
  if (values.size() != 7) invalid(op, "needs padding (4) and a fill of 3 values");
  for (int k = 0; k < 4; ++k) op.padding[k] = static_cast<uint32_t>(whole(op, values[k], kMaxAugmentSize, "padding"));
  for (int k = 0; k < 3; ++k) op.fill[k] = static_cast<uint8_t>(whole(op, values[4 + k], 255, "fill"));
}

void apply(const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw&) {
  const auto& p = op.padding;
  Image out = filled_image(in.width + p[0] + p[2], in.height + p[1] + p[3], op.fill);
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
    .validate = check_padding,
    .describe = describe,
    .params = params,
    .set_params = set_params,
    .draw =
        [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng&, OpDraw&) {
          const uint64_t w = uint64_t{width} + op.padding[0] + op.padding[2];
          const uint64_t h = uint64_t{height} + op.padding[1] + op.padding[3];
          check_pixels(op, width, height, w, h);
          width = static_cast<uint32_t>(w);
          height = static_cast<uint32_t>(h);
        },
    .apply = apply,
};

}  // namespace joader
