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
                            !f->rows_read == !f->rows_from && !f->params == !f->set_params;
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

void check_size(const AugmentOp& op) {
  if (op.size == 0 || op.size > kMaxAugmentSize) {
    invalid(op, "size must be in 1.." + std::to_string(kMaxAugmentSize) + ", not " + std::to_string(op.size));
  }
}

void check_padding(const AugmentOp& op) {
  for (uint32_t pad : op.padding) {
    if (pad > kMaxAugmentSize) invalid(op, "padding must be at most " + std::to_string(kMaxAugmentSize));
  }
}

double whole(const AugmentOp& op, double v, double hi, const char* what) {
  if (!(v >= 0 && v <= hi) || v != std::floor(v)) invalid(op, std::string(what) + " out of range");
  return v;
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

std::vector<double> interpolation_params(const AugmentOp& op) {
  return op.interpolation == Interpolation::kBilinear ? std::vector<double>{}
                                                      : std::vector<double>{double(static_cast<int>(op.interpolation))};
}

void set_interpolation_params(AugmentOp& op, const std::vector<double>& values) {
  if (values.size() > 1 || (values.size() == 1 && values[0] != 0 && values[0] != 2 && values[0] != 3)) {
    invalid(op, "interpolation must be nearest (0), bilinear (2) or bicubic (3)");
  }
  op.interpolation =
      values.empty() ? Interpolation::kBilinear : static_cast<Interpolation>(static_cast<int>(values[0]));
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
