// RandomCrop(size, padding, pad_if_needed, fill): F.pad with the constant fill, then a size×size
// window at a uniform position (get_params).
#include "prep/ops/random_crop.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

struct RandomCropParams : OpParams {
  uint32_t size = 0;
  std::array<uint32_t, 4> padding{0, 0, 0, 0};  // left, top, right, bottom
  bool pad_if_needed = false;
  std::array<uint8_t, 3> fill{0, 0, 0};
};

const RandomCropParams& params_of(const AugmentOp& op) { return op.as<RandomCropParams>(); }

void validate(const AugmentOp& op) {
  check_padding(op, params_of(op).padding);
  check_size(op, params_of(op).size);
}

std::string describe(const AugmentOp& op) {
  const RandomCropParams& p = params_of(op);
  std::string text = "RandomCrop(" + std::to_string(p.size);
  if (p.padding != std::array<uint32_t, 4>{0, 0, 0, 0}) text += ", padding=" + padding_text(p.padding);
  if (p.pad_if_needed) text += ", pad_if_needed=True";
  text += fill_text(p.fill);
  return text + ")";
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  const RandomCropParams& p = params_of(op);
  v1::AugmentOp::RandomCrop& crop = *m.mutable_random_crop();
  crop.set_size(p.size);
  set_wire_padding(p.padding, crop.mutable_padding());
  crop.set_pad_if_needed(p.pad_if_needed);
  set_wire_fill(p.fill, crop.mutable_fill());
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  const v1::AugmentOp::RandomCrop& crop = m.random_crop();
  auto p = std::make_shared<RandomCropParams>();
  op.params = p;
  p->size = crop.size();
  p->padding = padding_of(crop.padding());
  p->pad_if_needed = crop.pad_if_needed();
  p->fill = fill_of(op, crop.fill());
}

void draw(const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& d) {
  const uint32_t size = params_of(op).size;
  const RandomCropPadding pad = random_crop_padding(op, width, height);
  d.box = CropBox{0, 0, size, size};
  if (pad.height != size || pad.width != size) {  // torchvision draws only then
    d.box.top = static_cast<int64_t>(rng.below(pad.height - size + 1));
    d.box.left = static_cast<int64_t>(rng.below(pad.width - size + 1));
  }
  width = height = size;
}

}  // namespace

RandomCropPadding random_crop_padding(const AugmentOp& op, uint32_t width, uint32_t height) {
  const RandomCropParams& c = params_of(op);
  RandomCropPadding p;
  p.left = c.padding[0];
  p.top = c.padding[1];
  p.width = uint64_t{width} + c.padding[0] + c.padding[2];
  p.height = uint64_t{height} + c.padding[1] + c.padding[3];
  if (c.pad_if_needed && p.width < c.size) {  // F.pad(img, [size - w, 0]): both sides
    const uint64_t more = c.size - p.width;
    p.left += more;
    p.width += 2 * more;
  }
  if (c.pad_if_needed && p.height < c.size) {
    const uint64_t more = c.size - p.height;
    p.top += more;
    p.height += 2 * more;
  }
  if (p.width < c.size || p.height < c.size) {
    invalid(op, "size " + std::to_string(c.size) + " is larger than the " + std::to_string(width) + "×" +
                    std::to_string(height) + " image" +
                    (p.width != width || p.height != height
                         ? " once padded to " + std::to_string(p.width) + "×" + std::to_string(p.height)
                         : std::string()) +
                    " (torchvision raises here too; give pad_if_needed=True or a Resize first)");
  }
  return p;
}

Image random_crop(const ImageView& img, const AugmentOp& crop, const CropBox& box) {
  const RandomCropPadding pad = random_crop_padding(crop, img.width, img.height);
  const RandomCropParams& op = params_of(crop);
  Image out = filled_image(op.size, op.size, op.fill);
  // Output (x, y) is padded (box.left + x, box.top + y), the source pixel (that - pad.left, - pad.top).
  const int64_t x0 = int64_t(box.left) - int64_t(pad.left), y0 = int64_t(box.top) - int64_t(pad.top);
  const int64_t x_lo = std::max<int64_t>(0, -x0), x_hi = std::min<int64_t>(op.size, int64_t(img.width) - x0);
  for (int64_t y = 0; y < op.size && x_lo < x_hi; ++y) {
    const int64_t sy = y0 + y;
    if (sy < 0 || sy >= int64_t(img.height)) continue;
    std::memcpy(&out.rgb[size_t(y * op.size + x_lo) * 3], img.rgb + size_t(sy) * img.stride + size_t(x0 + x_lo) * 3,
                size_t(x_hi - x_lo) * 3);
  }
  return out;
}

extern const OpFamily kRandomCropFamily{
    .name = "RandomCrop",
    .sizing = OpFamily::Sizing::kFixes,
    .fixed_size = [](const AugmentOp& op) { return params_of(op).size; },
    .validate = validate,
    .describe = describe,
    .to_wire = to_wire,
    .from_wire = from_wire,
    // One that cannot pad enough would fail on such an image (as torchvision's does).
    .refuses_input = [](const AugmentOp& op, uint32_t width, uint32_t height, const std::string& image,
                        const std::string& detail) -> std::string {
      try {
        random_crop_padding(op, width, height);
        return "";
      } catch (const PrepError& e) {
        return std::string(e.what()) + "; that is " + image + (detail.empty() ? "" : " (" + detail + ")");
      }
    },
    .draw = draw,
    .apply = [](const ImageView& in, Image& cur, const AugmentOp& op,
                const OpDraw& d) { cur = random_crop(in, op, d.box); },
};

}  // namespace joader
