#include "prep/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "prep/color.h"

namespace joader {
namespace {

// SplitMix64's finaliser: a bijection on 64 bits with full avalanche.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

[[noreturn]] void invalid(const AugmentOp& op, const std::string& what) {
  static const char* names[] = {"RandomResizedCrop", "RandomHorizontalFlip", "Resize",       "CenterCrop",
                                "ColorJitter",       "AutoAugment",          "RandomCrop",   "RandomAffine"};
  const char* name = op.kind == AugmentOp::kRandomAffine && op.affine.rotation ? "RandomRotation" : names[op.kind];
  throw PrepError(std::string(name) + ": " + what);
}

// Python's round() of a non-negative double: to nearest, ties to even (the default FP mode).
int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

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

// ", interpolation=bicubic" for a describe(); nothing for bilinear, the default.
std::string interpolation_text(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest: return ", interpolation=nearest";
    case Interpolation::kBicubic: return ", interpolation=bicubic";
    case Interpolation::kBilinear: break;
  }
  return "";
}

ResizeFilter filter_of(Interpolation interpolation) {
  return interpolation == Interpolation::kBicubic ? ResizeFilter::kBicubic : ResizeFilter::kBilinear;
}

Image resize_shorter(const ImageView& img, uint32_t size, Interpolation interpolation) {
  PrepSpec spec;
  spec.raw = false;
  spec.resize = size;
  spec.crop = 1;  // unused: the window below is the whole resized image
  PrepGeometry g = prep_geometry(spec, img.width, img.height);
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

void flip_rows(Image& img) {
  for (uint32_t y = 0; y < img.height; ++y) {
    uint8_t* row = &img.rgb[static_cast<size_t>(y) * img.width * 3];
    for (uint32_t a = 0, b = img.width - 1; a < b; ++a, --b) {
      for (int c = 0; c < 3; ++c) std::swap(row[3 * a + c], row[3 * b + c]);
    }
  }
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
                    std::to_string(height) + " image" + (p.width != width || p.height != height ? " once padded to " +
                    std::to_string(p.width) + "×" + std::to_string(p.height) : std::string()) +
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

std::string AugmentOp::describe() const {
  switch (kind) {
    case kRandomResizedCrop:
      return "RandomResizedCrop(" + std::to_string(size) + ", scale=(" + number(scale_min) + ", " + number(scale_max) +
             "), ratio=(" + number(ratio_min) + ", " + number(ratio_max) + ")" + interpolation_text(interpolation) + ")";
    case kRandomHorizontalFlip: return "RandomHorizontalFlip(p=" + number(p) + ")";
    case kResize: return "Resize(" + std::to_string(size) + interpolation_text(interpolation) + ")";
    case kCenterCrop: return "CenterCrop(" + std::to_string(size) + ")";
    case kColorJitter: {
      static const char* names[] = {"brightness", "contrast", "saturation", "hue"};
      std::string text;
      for (int k = 0; k < 4; ++k) {
        if (!jitters(k)) continue;
        text += std::string(text.empty() ? "" : ", ") + names[k] + "=(" + number(jitter[2 * k]) + ", " +
                number(jitter[2 * k + 1]) + ")";
      }
      return "ColorJitter(" + text + ")";
    }
    case kAutoAugment: return policy.describe();
    case kRandomAffine: {
      const Affine& a = affine;
      std::string text = std::string(a.rotation ? "RandomRotation" : "RandomAffine") + "(degrees=(" +
                         number(a.degrees_min) + ", " + number(a.degrees_max) + ")";
      if (a.has_translate) text += ", translate=(" + number(a.translate_x) + ", " + number(a.translate_y) + ")";
      if (a.has_scale) text += ", scale=(" + number(a.scale_min) + ", " + number(a.scale_max) + ")";
      if (a.shear_count > 0) {
        text += ", shear=(";
        for (int k = 0; k < a.shear_count; ++k) text += (k ? ", " : "") + number(a.shear[k]);
        text += ")";
      }
      if (a.interpolation == Resample::kBilinear) text += ", interpolation=bilinear";
      text += fill_text(fill);
      if (a.has_center) text += ", center=(" + number(a.center_x) + ", " + number(a.center_y) + ")";
      return text + ")";
    }
    case kRandomCrop: {
      std::string text = "RandomCrop(" + std::to_string(size);
      if (padding != std::array<uint32_t, 4>{0, 0, 0, 0}) {
        text += ", padding=(" + std::to_string(padding[0]) + ", " + std::to_string(padding[1]) + ", " +
                std::to_string(padding[2]) + ", " + std::to_string(padding[3]) + ")";
      }
      if (pad_if_needed) text += ", pad_if_needed=True";
      text += fill_text(fill);
      return text + ")";
    }
  }
  return "?";
}

std::vector<double> AugmentOp::params() const {
  if (kind == kAutoAugment) return policy.encode();
  if (kind == kRandomResizedCrop || kind == kResize) {
    return interpolation == Interpolation::kBilinear ? std::vector<double>{}
                                                     : std::vector<double>{double(static_cast<int>(interpolation))};
  }
  if (kind == kRandomAffine) {
    const Affine& a = affine;
    return {a.rotation ? 1.0 : 0.0,
            a.degrees_min,
            a.degrees_max,
            a.has_translate ? 1.0 : 0.0,
            a.translate_x,
            a.translate_y,
            a.has_scale ? 1.0 : 0.0,
            a.scale_min,
            a.scale_max,
            double(a.shear_count),
            a.shear[0],
            a.shear[1],
            a.shear[2],
            a.shear[3],
            double(static_cast<int>(a.interpolation)),
            double(fill[0]),
            double(fill[1]),
            double(fill[2]),
            a.has_center ? 1.0 : 0.0,
            a.center_x,
            a.center_y};
  }
  if (kind != kRandomCrop) return {};
  return {double(padding[0]), double(padding[1]), double(padding[2]), double(padding[3]), pad_if_needed ? 1.0 : 0.0,
          double(fill[0]),    double(fill[1]),    double(fill[2])};
}

void AugmentOp::set_params(const std::vector<double>& values) {
  if (kind == kAutoAugment) {
    policy = AutoAugmentSpec::decode(values);
  } else if (kind == kRandomResizedCrop || kind == kResize) {
    if (values.size() > 1 || (values.size() == 1 && values[0] != 0 && values[0] != 2 && values[0] != 3)) {
      invalid(*this, "interpolation must be nearest (0), bilinear (2) or bicubic (3)");
    }
    interpolation = values.empty() ? Interpolation::kBilinear : static_cast<Interpolation>(static_cast<int>(values[0]));
  } else if (kind == kRandomAffine) {
    if (values.size() != 21) invalid(*this, "needs 21 values (AugmentOp::params)");
    for (double v : values) {
      if (!std::isfinite(v)) invalid(*this, "values must be finite");
    }
    const auto flag = [&](double v) {
      if (v != 0 && v != 1) invalid(*this, "a flag must be 0 or 1");
      return v == 1;
    };
    Affine& a = affine;
    a.rotation = flag(values[0]);
    a.degrees_min = values[1];
    a.degrees_max = values[2];
    a.has_translate = flag(values[3]);
    a.translate_x = values[4];
    a.translate_y = values[5];
    a.has_scale = flag(values[6]);
    a.scale_min = values[7];
    a.scale_max = values[8];
    if (values[9] != 0 && values[9] != 2 && values[9] != 4) invalid(*this, "shear takes 0, 2 or 4 values");
    a.shear_count = static_cast<int>(values[9]);
    for (int k = 0; k < 4; ++k) a.shear[k] = values[10 + k];
    if (values[14] != 0 && values[14] != 2) invalid(*this, "interpolation must be nearest or bilinear");
    a.interpolation = static_cast<Resample>(static_cast<int>(values[14]));
    for (int k = 0; k < 3; ++k) {
      if (!(values[15 + k] >= 0 && values[15 + k] <= 255)) invalid(*this, "fill out of range");
      fill[k] = static_cast<uint8_t>(values[15 + k]);
    }
    a.has_center = flag(values[18]);
    a.center_x = values[19];
    a.center_y = values[20];
  } else if (kind == kRandomCrop) {
    if (values.size() != 8) invalid(*this, "needs padding (4), pad_if_needed and a fill of 3 values");
    const auto whole = [&](double v, double hi, const char* what) {
      if (!(v >= 0 && v <= hi) || v != std::floor(v)) invalid(*this, std::string(what) + " out of range");
      return v;
    };
    for (int k = 0; k < 4; ++k) padding[k] = static_cast<uint32_t>(whole(values[k], kMaxAugmentSize, "padding"));
    pad_if_needed = whole(values[4], 1, "pad_if_needed") == 1;
    for (int k = 0; k < 3; ++k) fill[k] = static_cast<uint8_t>(whole(values[5 + k], 255, "fill"));
  } else if (!values.empty()) {
    invalid(*this, "takes no extra values");
  }
}

bool AugmentOp::jitters(int k) const {
  const double centre = k == 3 ? 0.0 : 1.0;
  return !(jitter[2 * k] == centre && jitter[2 * k + 1] == centre);
}

void color_jitter(Image& img, const AugmentOp& op, const OpDraw& draw) {
  for (uint8_t k : draw.order) {
    if (!op.jitters(k)) continue;
    switch (k) {
      case 0: adjust_brightness(img, draw.factors[0]); break;
      case 1: adjust_contrast(img, draw.factors[1]); break;
      case 2: adjust_saturation(img, draw.factors[2]); break;
      case 3: adjust_hue(img, draw.factors[3]); break;
    }
  }
}

void validate_pipeline(const std::vector<AugmentOp>& ops) {
  if (ops.empty()) throw PrepError("an augmentation pipeline needs at least one op");
  for (const AugmentOp& op : ops) {
    if (op.kind == AugmentOp::kColorJitter) {
      static const char* names[] = {"brightness", "contrast", "saturation", "hue"};
      for (int k = 0; k < 4; ++k) {
        const double lo = op.jitter[2 * k], hi = op.jitter[2 * k + 1];
        const bool ok = k == 3 ? (lo >= -0.5 && lo <= hi && hi <= 0.5) : (lo >= 0 && lo <= hi && std::isfinite(hi));
        if (!ok) {
          invalid(op, std::string(names[k]) + " (" + number(lo) + ", " + number(hi) + ") must be a range " +
                          (k == 3 ? "in [-0.5, 0.5]" : "of non-negative factors"));
        }
      }
      continue;
    }
    if (op.kind == AugmentOp::kAutoAugment) {
      op.policy.validate();
      continue;
    }
    if (op.kind == AugmentOp::kRandomAffine) {
      const AugmentOp::Affine& a = op.affine;
      const auto range = [&](double lo, double hi, const char* what) {
        if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi) || std::fabs(lo) > 1e6 || std::fabs(hi) > 1e6) {
          invalid(op, std::string(what) + " (" + number(lo) + ", " + number(hi) + ") must be a range");
        }
      };
      range(a.degrees_min, a.degrees_max, "degrees");
      if (a.has_translate && !(a.translate_x >= 0 && a.translate_x <= 1 && a.translate_y >= 0 && a.translate_y <= 1)) {
        invalid(op, "translate values must be fractions in [0, 1]");
      }
      if (a.has_scale) {
        range(a.scale_min, a.scale_max, "scale");
        if (!(a.scale_min >= 1e-3 && a.scale_max <= 1e3)) invalid(op, "scale values must be in [0.001, 1000]");
      }
      for (int k = 0; k < a.shear_count; k += 2) range(a.shear[k], a.shear[k + 1], "shear");
      if (a.has_center && (std::fabs(a.center_x) > 1e6 || std::fabs(a.center_y) > 1e6)) invalid(op, "center out of range");
      continue;
    }
    if (op.kind == AugmentOp::kRandomCrop) {
      for (uint32_t pad : op.padding) {
        if (pad > kMaxAugmentSize) invalid(op, "padding must be at most " + std::to_string(kMaxAugmentSize));
      }
    }
    if (op.kind != AugmentOp::kRandomHorizontalFlip && (op.size == 0 || op.size > kMaxAugmentSize)) {
      invalid(op, "size must be in 1.." + std::to_string(kMaxAugmentSize) + ", not " + std::to_string(op.size));
    }
    if (op.kind == AugmentOp::kRandomResizedCrop) {
      if (!(op.scale_min > 0) || !(op.scale_min <= op.scale_max) || !std::isfinite(op.scale_max)) {
        invalid(op, "scale (" + number(op.scale_min) + ", " + number(op.scale_max) +
                        ") must be a non-empty range of positive fractions");
      }
      if (!(op.ratio_min > 0) || !(op.ratio_min <= op.ratio_max) || !std::isfinite(op.ratio_max)) {
        invalid(op, "ratio (" + number(op.ratio_min) + ", " + number(op.ratio_max) +
                        ") must be a non-empty range of positive aspect ratios");
      }
    }
    if (op.kind == AugmentOp::kRandomHorizontalFlip && !(op.p >= 0 && op.p <= 1)) {
      invalid(op, "p must be in [0, 1], not " + number(op.p));
    }
  }
  pipeline_output_size(ops);
}

uint32_t pipeline_output_size(const std::vector<AugmentOp>& ops) {
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    if (it->kind == AugmentOp::kRandomResizedCrop || it->kind == AugmentOp::kCenterCrop ||
        it->kind == AugmentOp::kRandomCrop) {
      return it->size;
    }
    if (it->kind == AugmentOp::kResize) break;
  }
  throw PrepError("an augmentation pipeline must end in a fixed size (RandomResizedCrop, CenterCrop or RandomCrop "
                  "after the last Resize), so that batches are [B, 3, size, size]");
}

CounterRng::CounterRng(uint64_t seed, uint32_t epoch, uint32_t item)
    : key_(mix(mix(seed) ^ mix((uint64_t{epoch} << 32 | item) + 0x9e3779b97f4a7c15ULL))) {}

uint64_t CounterRng::next() { return mix(key_ + 0x9e3779b97f4a7c15ULL * ++counter_); }

double CounterRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double CounterRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

uint64_t CounterRng::below(uint64_t n) {
  // Rejection of the top partial block: exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    const uint64_t v = next();
    if (v < limit) return v % n;
  }
}

CropBox random_resized_crop_box(uint32_t width, uint32_t height, const AugmentOp& op, CounterRng& rng) {
  const double area = double(width) * double(height);
  const double log_lo = std::log(op.ratio_min), log_hi = std::log(op.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(op.scale_min, op.scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int64_t w = py_round(std::sqrt(target_area * aspect));
    const int64_t h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropBox box{0, 0, h, w};
      box.top = static_cast<int64_t>(rng.below(uint64_t(height - h + 1)));
      box.left = static_cast<int64_t>(rng.below(uint64_t(width - w + 1)));
      return box;
    }
  }
  // torchvision's fallback: the central crop, clamped to the ratio range.
  const double in_ratio = double(width) / double(height);
  CropBox box;
  if (in_ratio < op.ratio_min) {
    box.width = width;
    box.height = py_round(box.width / op.ratio_min);
  } else if (in_ratio > op.ratio_max) {
    box.height = height;
    box.width = py_round(box.height * op.ratio_max);
  } else {
    box.width = width;
    box.height = height;
  }
  box.top = (int64_t(height) - box.height) / 2;
  box.left = (int64_t(width) - box.width) / 2;
  return box;
}

namespace {

// The box of img as an image of its own, which is what PIL's crop gives resize to read whole.
ImageView box_of(const ImageView& img, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.width <= 0 || box.height <= 0 || box.top + box.height > img.height ||
      box.left + box.width > img.width) {
    throw PrepError("crop box outside the image");
  }
  return ImageView{img.rgb + size_t(box.top) * img.stride + size_t(box.left) * 3, uint32_t(box.width),
                   uint32_t(box.height), img.stride};
}

PrepGeometry resized_to(uint32_t size, Interpolation interpolation) {
  PrepGeometry g;
  g.resized_width = g.resized_height = size;
  g.filter = filter_of(interpolation);
  return g;
}

// Hands each row on mirrored (F.hflip), through one row of scratch.
class MirroredRows final : public RowSink {
 public:
  MirroredRows(RowSink& to, uint32_t width) : to_(to), width_(width), row_(size_t{width} * 3) {}
  void row(int64_t y, const uint8_t* rgb) override {
    uint8_t* out = row_.data();
    for (const uint8_t* in = rgb + (size_t{width_} - 1) * 3; in >= rgb; in -= 3, out += 3) std::memcpy(out, in, 3);
    to_.row(y, row_.data());
  }

 private:
  RowSink& to_;
  uint32_t width_;
  std::vector<uint8_t> row_;
};

}  // namespace

Image resized_crop(const ImageView& img, const CropBox& box, uint32_t size, bool flip, Interpolation interpolation) {
  const ImageView cropped = box_of(img, box);
  Image out;
  if (interpolation == Interpolation::kNearest) {
    out = resize_nearest(copy_of(cropped), size, size);
  } else {
    out.width = out.height = size;
    resize_window(cropped, resized_to(size, interpolation), size, size, out.rgb);
  }
  if (flip) flip_rows(out);
  return out;
}

Image resized_crop(const Image& img, const CropBox& box, uint32_t size, bool flip, Interpolation interpolation) {
  return resized_crop(view_of(img), box, size, flip, interpolation);
}

std::vector<OpDraw> draw_augment(const std::vector<AugmentOp>& ops, uint32_t width, uint32_t height, uint64_t seed,
                                 uint32_t epoch, uint32_t item) {
  if (width == 0 || height == 0) throw PrepError("image has no pixels");
  CounterRng rng(seed, epoch, item);
  std::vector<OpDraw> draws(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const AugmentOp& op = ops[i];
    switch (op.kind) {
      case AugmentOp::kRandomResizedCrop:
        draws[i].box = random_resized_crop_box(width, height, op, rng);
        width = height = op.size;
        break;
      case AugmentOp::kRandomHorizontalFlip: draws[i].flip = rng.uniform() < op.p; break;
      case AugmentOp::kResize: {
        PrepSpec spec;
        spec.raw = false;
        spec.resize = op.size;
        spec.crop = 1;
        const PrepGeometry g = prep_geometry(spec, width, height);
        if (g.resized_width * g.resized_height > spec.max_pixels) {
          invalid(op, "a " + std::to_string(width) + "×" + std::to_string(height) + " image would become " +
                          std::to_string(g.resized_width) + "×" + std::to_string(g.resized_height) +
                          " pixels, more than the limit of " + std::to_string(spec.max_pixels));
        }
        width = static_cast<uint32_t>(g.resized_width);
        height = static_cast<uint32_t>(g.resized_height);
        break;
      }
      case AugmentOp::kCenterCrop: width = height = op.size; break;
      case AugmentOp::kColorJitter: {
        // torch.randperm(4), then each present factor uniform in its range, as get_params draws.
        std::array<uint8_t, 4>& order = draws[i].order;
        for (uint8_t k = 3; k > 0; --k) std::swap(order[k], order[rng.below(k + 1)]);
        for (int k = 0; k < 4; ++k) {
          if (op.jitters(k)) draws[i].factors[k] = rng.uniform(op.jitter[2 * k], op.jitter[2 * k + 1]);
        }
        break;
      }
      case AugmentOp::kAutoAugment: draws[i].applied = draw_auto_augment(op.policy, rng); break;
      case AugmentOp::kRandomAffine: {
        // RandomAffine.get_params / RandomRotation.get_params, in their order.
        const AugmentOp::Affine& a = op.affine;
        AffineParams& p = draws[i].affine;
        p.angle = rng.uniform(a.degrees_min, a.degrees_max);
        if (!a.rotation) {
          if (a.has_translate) {
            const double max_dx = a.translate_x * width, max_dy = a.translate_y * height;
            p.translate_x = std::nearbyint(rng.uniform(-max_dx, max_dx));  // int(round(...)): ties to even
            p.translate_y = std::nearbyint(rng.uniform(-max_dy, max_dy));
          }
          if (a.has_scale) p.scale = rng.uniform(a.scale_min, a.scale_max);
          if (a.shear_count >= 2) p.shear_x = rng.uniform(a.shear[0], a.shear[1]);
          if (a.shear_count == 4) p.shear_y = rng.uniform(a.shear[2], a.shear[3]);
        }
        p.has_center = a.has_center;
        p.center_x = a.center_x;
        p.center_y = a.center_y;
        break;
      }
      case AugmentOp::kRandomCrop: {
        const RandomCropPadding pad = random_crop_padding(op, width, height);
        draws[i].box = CropBox{0, 0, op.size, op.size};
        if (pad.height != op.size || pad.width != op.size) {  // torchvision draws only then
          draws[i].box.top = static_cast<int64_t>(rng.below(pad.height - op.size + 1));
          draws[i].box.left = static_cast<int64_t>(rng.below(pad.width - op.size + 1));
        }
        width = height = op.size;
        break;
      }
    }
  }
  return draws;
}

namespace {

// The ops applied in order (apply_augment's loop) to a part of a pipeline.
Image apply_ops(const ImageView& img, std::span<const AugmentOp> ops, std::span<const OpDraw> draws) {
  Image cur;         // the output of the ops so far
  ImageView in = img;  // what the next op reads: the input until an op has produced an image
  for (size_t i = 0; i < ops.size(); ++i) {
    const AugmentOp& op = ops[i];
    if (in.width == 0 || in.height == 0) throw PrepError("image has no pixels");
    switch (op.kind) {
      case AugmentOp::kRandomResizedCrop:
        cur = resized_crop(in, draws[i].box, op.size, false, op.interpolation);
        break;
      case AugmentOp::kRandomHorizontalFlip:
        if (in.rgb != cur.rgb.data()) cur = copy_of(in);
        if (draws[i].flip) flip_rows(cur);
        break;
      case AugmentOp::kResize: cur = resize_shorter(in, op.size, op.interpolation); break;
      case AugmentOp::kCenterCrop: cur = center_crop(in, op.size); break;
      case AugmentOp::kColorJitter:
        if (in.rgb != cur.rgb.data()) cur = copy_of(in);
        color_jitter(cur, op, draws[i]);
        break;
      case AugmentOp::kRandomCrop: cur = random_crop(in, op, draws[i].box); break;
      case AugmentOp::kRandomAffine: {
        if (in.rgb != cur.rgb.data()) cur = copy_of(in);
        const AffineParams& p = draws[i].affine;
        if (op.affine.rotation) {
          const double center[2] = {p.center_x, p.center_y};
          cur = rotate_pil(cur, p.angle, op.affine.interpolation, op.fill, p.has_center ? center : nullptr);
        } else {
          cur = affine_transform(cur, p, op.affine.interpolation, op.fill);
        }
        break;
      }
      case AugmentOp::kAutoAugment:
        if (in.rgb != cur.rgb.data()) cur = copy_of(in);
        for (const AppliedOp& a : draws[i].applied) {
          apply_image_op(cur, a.op, a.magnitude, op.policy.interpolation, op.policy.fill);
        }
        break;
    }
    in = view_of(cur);
  }
  if (in.rgb != cur.rgb.data()) cur = copy_of(in);
  return cur;
}

}  // namespace

Image apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws) {
  return apply_ops(img, ops, draws);
}

void apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws,
                   RowSink& sink) {
  // A pipeline whose pixels are last made by a (bilinear or bicubic) RandomResizedCrop, perhaps
  // flipped after: its resample hands each row over while it is in the cache, mirrored on the way
  // when the flips say so. Any other pipeline is computed whole, then handed over row by row.
  size_t tail = ops.size();
  bool flip = false;
  while (tail > 0 && ops[tail - 1].kind == AugmentOp::kRandomHorizontalFlip) {
    --tail;
    flip = flip != draws[tail].flip;
  }
  const std::span<const AugmentOp> all(ops);
  if (tail == 0 || ops[tail - 1].kind != AugmentOp::kRandomResizedCrop ||
      ops[tail - 1].interpolation == Interpolation::kNearest) {
    const Image out = apply_ops(img, all, draws);
    for (uint32_t y = 0; y < out.height; ++y) sink.row(y, &out.rgb[size_t{y} * out.width * 3]);
    return;
  }
  const size_t crop = tail - 1;
  Image head;  // the ops before the crop, if any
  ImageView in = img;
  if (crop > 0) {
    head = apply_ops(img, all.first(crop), std::span<const OpDraw>(draws).first(crop));
    in = view_of(head);
  }
  if (in.width == 0 || in.height == 0) throw PrepError("image has no pixels");
  const AugmentOp& op = ops[crop];
  const ImageView cropped = box_of(in, draws[crop].box);
  const PrepGeometry g = resized_to(op.size, op.interpolation);
  if (flip) {
    MirroredRows mirrored(sink, op.size);
    resize_window(cropped, g, op.size, op.size, mirrored);
  } else {
    resize_window(cropped, g, op.size, op.size, sink);
  }
}

Image augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item) {
  return apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item));
}

Image augment(const Image& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item) {
  return augment(view_of(img), ops, seed, epoch, item);
}

void augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item,
             RowSink& sink) {
  apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item), sink);
}

}  // namespace joader
