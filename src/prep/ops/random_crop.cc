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

void validate(const AugmentOp& op) {
  check_padding(op);
  check_size(op);
}

std::string describe(const AugmentOp& op) {
  std::string text = "RandomCrop(" + std::to_string(op.size);
  if (op.padding != std::array<uint32_t, 4>{0, 0, 0, 0}) {
    text += ", padding=(" + std::to_string(op.padding[0]) + ", " + std::to_string(op.padding[1]) + ", " +
            std::to_string(op.padding[2]) + ", " + std::to_string(op.padding[3]) + ")";
  }
  if (op.pad_if_needed) text += ", pad_if_needed=True";
  text += fill_text(op.fill);
  return text + ")";
}

void to_wire(const AugmentOp& op, v1::AugmentOp& m) {
  v1::AugmentOp::RandomCrop& crop = *m.mutable_random_crop();
  crop.set_size(op.size);
  set_wire_padding(op.padding, crop.mutable_padding());
  crop.set_pad_if_needed(op.pad_if_needed);
  set_wire_fill(op.fill, crop.mutable_fill());
}

void from_wire(const v1::AugmentOp& m, AugmentOp& op) {
  const v1::AugmentOp::RandomCrop& crop = m.random_crop();
  op.size = crop.size();
  op.padding = padding_of(crop.padding());
  op.pad_if_needed = crop.pad_if_needed();
  op.fill = fill_of(op, crop.fill());
}

void draw(const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& d) {
  const RandomCropPadding pad = random_crop_padding(op, width, height);
  d.box = CropBox{0, 0, op.size, op.size};
  if (pad.height != op.size || pad.width != op.size) {  // torchvision draws only then
    d.box.top = static_cast<int64_t>(rng.below(pad.height - op.size + 1));
    d.box.left = static_cast<int64_t>(rng.below(pad.width - op.size + 1));
  }
  width = height = op.size;
}

}  // namespace

RandomCropPadding random_crop_padding(const AugmentOp& op, uint32_t width, uint32_t height) {
  RandomCropPadding p;
  p.left = op.padding[0];
  p.top = op.padding[1];
  p.width = uint64_t{width} + op.padding[0] + op.padding[2];
  p.height = uint64_t{height} + op.padding[1] + op.padding[3];
  if (op.pad_if_needed && p.width < op.size) {  // F.pad(img, [size - w, 0]): both sides
    const uint64_t more = op.size - p.width;
    p.left += more;
    p.width += 2 * more;
  }
  if (op.pad_if_needed && p.height < op.size) {
    const uint64_t more = op.size - p.height;
    p.top += more;
    p.height += 2 * more;
  }
  if (p.width < op.size || p.height < op.size) {
    invalid(op, "size " + std::to_string(op.size) + " is larger than the " + std::to_string(width) + "×" +
                    std::to_string(height) + " image" +
                    (p.width != width || p.height != height
                         ? " once padded to " + std::to_string(p.width) + "×" + std::to_string(p.height)
                         : std::string()) +
                    " (torchvision raises here too; give pad_if_needed=True or a Resize first)");
  }
  return p;
}

Image random_crop(const ImageView& img, const AugmentOp& op, const CropBox& box) {
  const RandomCropPadding pad = random_crop_padding(op, img.width, img.height);
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
