// Resize(S, interpolation): the shorter side to S, the longer int(S * long / short).
#include "prep/autoaugment.h"
#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;
namespace {

struct ResizeParams : OpParams {
  uint32_t size = 0;  // the shorter side's
  Interpolation interpolation = Interpolation::kBilinear;
};

PrepSpec resize_spec(uint32_t size) {
  PrepSpec spec;
  spec.raw = false;
  spec.resize = size;
  spec.crop = 1;  // unused: the window is the whole resized image
  return spec;
}

Image resize_shorter(const ImageView& img, uint32_t size, Interpolation interpolation) {
  PrepGeometry g = prep_geometry(resize_spec(size), img.width, img.height);
  g.crop_left = g.crop_top = 0;
  g.filter = filter_of(interpolation);
  const auto width = static_cast<uint32_t>(g.resized_width), height = static_cast<uint32_t>(g.resized_height);
  if (interpolation == Interpolation::kNearest) return resize_nearest(copy_of(img), width, height);
  Image out;
  out.width = width;
  out.height = height;
  resize_window(img, g, out.width, out.height, out.rgb);
  return out;
}

}  // namespace

extern const OpFamily kResizeFamily{
    .name = "Resize",
    .sizing = OpFamily::Sizing::kResizes,
    .validate = [](const AugmentOp& op) { check_size(op, op.as<ResizeParams>().size); },
    .describe =
        [](const AugmentOp& op) {
          const auto& p = op.as<ResizeParams>();
          return "Resize(" + std::to_string(p.size) + interpolation_text(p.interpolation) + ")";
        },
    .to_wire =
        [](const AugmentOp& op, v1::AugmentOp& m) {
          const auto& p = op.as<ResizeParams>();
          m.mutable_resize()->set_size(p.size);
          m.mutable_resize()->set_interpolation(wire_interpolation(p.interpolation));
        },
    .from_wire =
        [](const v1::AugmentOp& m, AugmentOp& op) {
          auto p = std::make_shared<ResizeParams>();
          op.params = p;
          p->size = m.resize().size();
          p->interpolation = interpolation_of(op, m.resize().interpolation());
        },
    .draw =
        [](const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng&, OpDraw&) {
          const PrepGeometry g = prep_geometry(resize_spec(op.as<ResizeParams>().size), width, height);
          check_pixels(op, width, height, g.resized_width, g.resized_height);
          width = static_cast<uint32_t>(g.resized_width);
          height = static_cast<uint32_t>(g.resized_height);
        },
    .apply =
        [](const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw&) {
          const auto& p = op.as<ResizeParams>();
          cur = resize_shorter(in, p.size, p.interpolation);
        },
};

}  // namespace joader
