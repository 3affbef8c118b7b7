// CenterCrop(C): torchvision's offsets, zero padding when smaller.
#include <algorithm>

#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

struct CenterCropParams : OpParams {
  uint32_t size = 0;
};

uint32_t size_of(const AugmentOp& op) { return op.as<CenterCropParams>().size; }

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
    .fixed_size = size_of,
    .validate = [](const AugmentOp& op) { check_size(op, size_of(op)); },
    .describe = [](const AugmentOp& op) { return "CenterCrop(" + std::to_string(size_of(op)) + ")"; },
    .to_wire = [](const AugmentOp& op, v1::AugmentOp& m) { m.mutable_center_crop()->set_size(size_of(op)); },
    .from_wire =
        [](const v1::AugmentOp& m, AugmentOp& op) {
          auto p = std::make_shared<CenterCropParams>();
          p->size = m.center_crop().size();
          op.params = p;
        },
    // torchvision would pad the smaller images with zeros, which a training job hardly wants.
    .refuses_input = [](const AugmentOp& op, uint32_t width, uint32_t height, const std::string& image,
                        const std::string& detail) -> std::string {
      const uint32_t size = size_of(op);
      if (size <= std::min(width, height)) return "";
      return "CenterCrop(" + std::to_string(size) + ") is larger than " + image + " (" + std::to_string(width) + "×" +
             std::to_string(height) + (detail.empty() ? "" : ", " + detail) + "): put a Resize first or crop less";
    },
    .draw = [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng&,
               OpDraw&) { width = height = size_of(op); },
    .apply = [](const ImageView& in, Image& cur, const AugmentOp& op,
                const OpDraw&) { cur = center_crop(in, size_of(op)); },
};

}  // namespace joader
