// The table of op families (ops/list.h) and the helpers they share.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "prep/ops/list.h"
#include "prep/ops/op_family.h"

namespace joader {

#define JOADER_DECLARE_FAMILY(kind, family) extern const OpFamily family;
JOADER_OP_FAMILIES(JOADER_DECLARE_FAMILY)
#undef JOADER_DECLARE_FAMILY

const std::vector<const OpFamily*>& op_families() {
  static const std::vector<const OpFamily*> table = [] {
    std::vector<const OpFamily*> t;
#define JOADER_LIST_FAMILY(kind, family) t.push_back(&family);
    JOADER_OP_FAMILIES(JOADER_LIST_FAMILY)
#undef JOADER_LIST_FAMILY
    // What the pipeline calls without asking: a family that lacks it is a bug of this build.
    for (const OpFamily* f : t) {
      const bool complete = f->name && f->validate && f->describe && f->apply && !f->streams == !f->stream &&
                            !f->rows_read == !f->rows_from && f->to_wire && f->from_wire &&
                            (f->sizing == OpFamily::Sizing::kFixes) == (f->fixed_size != nullptr);
      if (!complete) throw std::logic_error(std::string("op family ") + (f->name ? f->name : "?") + " is incomplete");
    }
    return t;
  }();
  return table;
}

const OpFamily& family_of(AugmentOp::Kind kind) {
  const auto& table = op_families();
  if (size_t(kind) >= table.size()) throw PrepError("unknown op kind " + std::to_string(int(kind)));
  return *table[size_t(kind)];
}

namespace ops {

void invalid(const AugmentOp& op, const std::string& what) {
  const OpFamily& family = family_of(op);
  throw PrepError(std::string(family.name_of ? family.name_of(op) : family.name) + ": " + what);
}

void check_size(const AugmentOp& op, uint32_t size) {
  if (size == 0 || size > kMaxAugmentSize) {
    invalid(op, "size must be in 1.." + std::to_string(kMaxAugmentSize) + ", not " + std::to_string(size));
  }
}

void check_padding(const AugmentOp& op, const std::array<uint32_t, 4>& padding) {
  for (uint32_t pad : padding) {
    if (pad > kMaxAugmentSize) invalid(op, "padding must be at most " + std::to_string(kMaxAugmentSize));
  }
}

std::string padding_text(const std::array<uint32_t, 4>& padding) {
  std::string text = "(";
  for (size_t k = 0; k < padding.size(); ++k) {
    if (k > 0) text += ", ";
    text += std::to_string(padding[k]);
  }
  return text + ")";
}

void check_pixels(const AugmentOp& op, uint64_t width, uint64_t height, uint64_t w, uint64_t h) {
  const uint64_t limit = PrepSpec().max_pixels;
  if (w * h > limit) {
    invalid(op, "a " + std::to_string(width) + "×" + std::to_string(height) + " image would become " +
                    std::to_string(w) + "×" + std::to_string(h) + " pixels, more than the limit of " +
                    std::to_string(limit));
  }
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string interpolation_text(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return ", interpolation=nearest";
    case Interpolation::kBicubic:
      return ", interpolation=bicubic";
    case Interpolation::kBilinear:
      break;
  }
  return "";
}

v1::AugmentOp::Interpolation wire_interpolation(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return v1::AugmentOp::NEAREST;
    case Interpolation::kBicubic:
      return v1::AugmentOp::BICUBIC;
    case Interpolation::kBilinear:
      break;
  }
  return v1::AugmentOp::BILINEAR;
}

Interpolation interpolation_of(const AugmentOp& op, v1::AugmentOp::Interpolation wire) {
  switch (wire) {
    case v1::AugmentOp::NEAREST:
      return Interpolation::kNearest;
    case v1::AugmentOp::BICUBIC:
      return Interpolation::kBicubic;
    case v1::AugmentOp::DEFAULT:
    case v1::AugmentOp::BILINEAR:
      return Interpolation::kBilinear;
    default:
      invalid(op, "interpolation must be nearest, bilinear or bicubic");
  }
}

v1::AugmentOp::Interpolation wire_resample(Resample resample) {
  return resample == Resample::kBilinear ? v1::AugmentOp::BILINEAR : v1::AugmentOp::NEAREST;
}

Resample resample_of(const AugmentOp& op, v1::AugmentOp::Interpolation wire) {
  if (wire == v1::AugmentOp::DEFAULT || wire == v1::AugmentOp::NEAREST) return Resample::kNearest;
  if (wire != v1::AugmentOp::BILINEAR) invalid(op, "interpolation must be nearest or bilinear");
  return Resample::kBilinear;
}

void set_wire_fill(const std::array<uint8_t, 3>& fill, google::protobuf::RepeatedField<uint32_t>* wire) {
  wire->Clear();
  if (fill != std::array<uint8_t, 3>{0, 0, 0}) wire->Add(fill.begin(), fill.end());
}

std::array<uint8_t, 3> fill_of(const AugmentOp& op, const google::protobuf::RepeatedField<uint32_t>& wire) {
  std::array<uint8_t, 3> fill{0, 0, 0};
  if (wire.empty()) return fill;
  if (wire.size() != 3) invalid(op, "fill takes 3 values, not " + std::to_string(wire.size()));
  for (int k = 0; k < 3; ++k) {
    if (wire[k] > 255) invalid(op, "fill values must be in 0..255, not " + std::to_string(wire[k]));
    fill[k] = static_cast<uint8_t>(wire[k]);
  }
  return fill;
}

void set_wire_range(double min, double max, v1::AugmentOp::Range* wire) {
  wire->set_min(min);
  wire->set_max(max);
}

void set_wire_padding(const std::array<uint32_t, 4>& padding, v1::AugmentOp::Padding* wire) {
  wire->set_left(padding[0]);
  wire->set_top(padding[1]);
  wire->set_right(padding[2]);
  wire->set_bottom(padding[3]);
}

std::array<uint32_t, 4> padding_of(const v1::AugmentOp::Padding& wire) {
  return {wire.left(), wire.top(), wire.right(), wire.bottom()};
}

ResizeFilter filter_of(Interpolation interpolation) {
  return interpolation == Interpolation::kBicubic ? ResizeFilter::kBicubic : ResizeFilter::kBilinear;
}

ImageView view_of(const Image& img) { return ImageView{img.rgb.data(), img.width, img.height, size_t{img.width} * 3}; }

Image copy_of(const ImageView& v) {
  Image out;
  out.width = v.width;
  out.height = v.height;
  out.rgb.resize(size_t{v.width} * v.height * 3);
  for (uint32_t y = 0; y < v.height; ++y) {
    std::memcpy(&out.rgb[size_t(y) * v.width * 3], v.rgb + size_t(y) * v.stride, size_t{v.width} * 3);
  }
  return out;
}

Image& own(const ImageView& in, Image& cur) {
  if (in.rgb != cur.rgb.data()) cur = copy_of(in);
  return cur;
}

void flip_rows(Image& img) {
  for (uint32_t y = 0; y < img.height; ++y) {
    uint8_t* row = &img.rgb[static_cast<size_t>(y) * img.width * 3];
    for (uint32_t a = 0, b = img.width - 1; a < b; ++a, --b) {
      for (int c = 0; c < 3; ++c) std::swap(row[3 * a + c], row[3 * b + c]);
    }
  }
}

int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

}  // namespace ops

}  // namespace joader
