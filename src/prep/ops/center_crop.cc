// CenterCrop(C): torchvision's offsets, zero padding when smaller.
#include <algorithm>

#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

Image center_crop(const ImageView& img, uint32_t size) {
  PrepGeometry g;
  g.resized_width = img.width;
  g.resized_height = img.height;
  g.crop_left = center_offset(img.width, size);
  g.crop_top = center_offset(img.height, size);
  Image out;
  out.width = out.height = size;
  resize_window(img, g, size, size, out.rgb);  // an identity resize: a copy of the window
  return out;
}

}  // namespace

extern const OpFamily kCenterCropFamily{
    .name = "CenterCrop",
    .sizing = OpFamily::Sizing::kFixes,
    .validate = check_size,
    .describe = [](const AugmentOp& op) { return "CenterCrop(" + std::to_string(op.size) + ")"; },
    .to_wire = [](const AugmentOp& op, v1::AugmentOp& m) { m.mutable_center_crop()->set_size(op.size); },
    .from_wire = [](const v1::AugmentOp& m, AugmentOp& op) { op.size = m.center_crop().size(); },
    // torchvision would pad the smaller images with zeros, which a training job hardly wants.
    .refuses_input = [](const AugmentOp& op, uint32_t width, uint32_t height, const std::string& image,
                        const std::string& detail) -> std::string {
      if (op.size <= std::min(width, height)) return "";
      return "CenterCrop(" + std::to_string(op.size) + ") is larger than " + image + " (" + std::to_string(width) +
             "×" + std::to_string(height) + (detail.empty() ? "" : ", " + detail) +
             "): put a Resize first or crop less";
    },
    .draw = [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng&,
               OpDraw&) { width = height = op.size; },
    .apply = [](const ImageView& in, Image& cur, const AugmentOp& op,
                const OpDraw&) { cur = center_crop(in, op.size); },
};

}  // namespace joader
