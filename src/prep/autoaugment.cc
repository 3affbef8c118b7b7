#include "prep/autoaugment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "prep/color.h"
#include "prep/counter_rng.h"
#include "prep/pil/point_ops.h"

namespace joader {
namespace {

[[noreturn]] void bad(const AutoAugmentSpec& spec, const std::string& what) {
  static const char* families[] = {"TrivialAugmentWide", "RandAugment", "AutoAugment", "RandomApply"};
  throw PrepError(std::string(spec.family <= AutoAugmentSpec::kRandomApply ? families[spec.family] : "AutoAugment") +
                  ": " + what);
}

}  // namespace

const char* image_op_name(ImageOp op) {
  static const char* names[kImageOpCount] = {
      "Identity",  "ShearX",   "ShearY",       "TranslateX", "TranslateY", "Rotate",    "Brightness", "Color",
      "Contrast",  "Sharpness", "Posterize",   "Solarize",   "AutoContrast", "Equalize", "Invert",     "Grayscale",
      "VerticalFlip"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < kImageOpCount ? names[i] : "?";
}

void apply_image_op(Image& img, ImageOp op, double magnitude, Resample interpolation, const Fill& fill) {
  const double cx = img.width * 0.5, cy = img.height * 0.5;
  switch (op) {
    case ImageOp::kIdentity: break;
    case ImageOp::kShearX:
      img = affine_pil(img, inverse_affine(0, 0, 0.0, 0, 0, std::atan(magnitude) * kRadToDeg, 0.0), interpolation, fill);
      break;
    case ImageOp::kShearY:
      img = affine_pil(img, inverse_affine(0, 0, 0.0, 0, 0, 0.0, std::atan(magnitude) * kRadToDeg), interpolation, fill);
      break;
    case ImageOp::kTranslateX:
      img = affine_pil(img, inverse_affine(cx, cy, 0.0, std::trunc(magnitude), 0, 0.0, 0.0), interpolation, fill);
      break;
    case ImageOp::kTranslateY:
      img = affine_pil(img, inverse_affine(cx, cy, 0.0, 0, std::trunc(magnitude), 0.0, 0.0), interpolation, fill);
      break;
    case ImageOp::kRotate: img = rotate_pil(img, magnitude, interpolation, fill); break;
    case ImageOp::kBrightness: adjust_brightness(img, 1.0 + magnitude); break;
    case ImageOp::kColor: adjust_saturation(img, 1.0 + magnitude); break;
    case ImageOp::kContrast: adjust_contrast(img, 1.0 + magnitude); break;
    case ImageOp::kSharpness:
      if (static_cast<float>(1.0 + magnitude) != 1.0f) blend_from(img, smooth(img), 1.0 + magnitude);
      break;
    case ImageOp::kPosterize: {
      const int bits = std::clamp(static_cast<int>(std::clamp(magnitude, 0.0, 8.0)), 0, 8);  // validated: 0..8
      const int mask = ~((1 << (8 - bits)) - 1);
      std::array<uint8_t, 256> lut;
      for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i & mask);
      apply_lut(img, lut);
      break;
    }
    case ImageOp::kSolarize: {
      std::array<uint8_t, 256> lut;
      for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i < magnitude ? i : 255 - i);
      apply_lut(img, lut);
      break;
    }
    case ImageOp::kAutoContrast: autocontrast(img); break;
    case ImageOp::kEqualize: equalize(img); break;
    case ImageOp::kInvert:
      for (uint8_t& v : img.rgb) v = static_cast<uint8_t>(255 - v);
      break;
    case ImageOp::kGrayscale: to_grayscale(img); break;
    case ImageOp::kVerticalFlip: {
      const size_t row = size_t(img.width) * 3;
      for (uint32_t top = 0, bottom = img.height ? img.height - 1 : 0; top < bottom; ++top, --bottom) {
        std::swap_ranges(img.rgb.begin() + top * row, img.rgb.begin() + (top + 1) * row, img.rgb.begin() + bottom * row);
      }
      break;
    }
  }
}

std::vector<AppliedOp> draw_auto_augment(const AutoAugmentSpec& spec, CounterRng& rng) {
  std::vector<AppliedOp> out;
  const auto signed_magnitude = [&](const AutoAugmentSpec::Entry& e, double magnitude, bool negate) {
    return AppliedOp{e.op, e.is_signed && negate ? -magnitude : magnitude};
  };
  if (spec.family == AutoAugmentSpec::kRandomApply) {
    for (const AutoAugmentSpec::Entry& e : spec.entries) {
      if (rng.uniform() < e.p) out.push_back({e.op, e.magnitudes.empty() ? 0.0 : e.magnitudes[0]});
    }
    return out;
  }
  if (spec.family == AutoAugmentSpec::kAutoAugment) {
    const size_t policies = spec.entries.size() / spec.policy_size;
    const size_t first = rng.below(policies) * spec.policy_size;
    for (size_t k = first; k < first + spec.policy_size; ++k) {
      const AutoAugmentSpec::Entry& e = spec.entries[k];
      const double u = rng.uniform();
      const bool negate = rng.below(2) == 0;  // torchvision negates when its sign draw is 0
      if (u <= e.p) out.push_back(signed_magnitude(e, e.magnitudes.empty() ? 0.0 : e.magnitudes[0], negate));
    }
    return out;
  }
  const uint32_t times = spec.family == AutoAugmentSpec::kRandAugment ? spec.num_ops : 1;
  for (uint32_t t = 0; t < times; ++t) {
    const AutoAugmentSpec::Entry& e = spec.entries[rng.below(spec.entries.size())];
    const double magnitude = e.magnitudes.empty() ? 0.0 : e.magnitudes[rng.below(e.magnitudes.size())];
    const bool negate = e.is_signed && rng.below(2) == 1;  // torchvision negates when its sign draw is 1
    out.push_back(signed_magnitude(e, magnitude, negate));
  }
  return out;
}

std::string AutoAugmentSpec::describe() const {
  const char* interp = interpolation == Resample::kBilinear ? "bilinear" : "nearest";
  switch (family) {
    case kTrivialAugmentWide:
      return "TrivialAugmentWide(" + std::to_string(entries.size()) + " ops, interpolation=" + interp + fill_text(fill) + ")";
    case kRandAugment:
      return "RandAugment(num_ops=" + std::to_string(num_ops) + ", " + std::to_string(entries.size()) +
             " ops, interpolation=" + interp + fill_text(fill) + ")";
    case kAutoAugment:
      return "AutoAugment(" + std::to_string(policy_size ? entries.size() / policy_size : 0) +
             " sub-policies, interpolation=" + interp + fill_text(fill) + ")";
    case kRandomApply: {
      std::string text;
      for (const Entry& e : entries) {
        char p[32];
        std::snprintf(p, sizeof p, "%.6g", e.p);
        std::string op = image_op_name(e.op);
        if (!e.magnitudes.empty()) {
          char m[32];
          std::snprintf(m, sizeof m, "%.6g", e.magnitudes[0]);
          op += std::string("(") + m + ")";
        }
        text += (text.empty() ? "" : ", ") + std::string("RandomApply(") + op + ", p=" + p + ")";
      }
      return text;
    }
  }
  return "AutoAugment(?)";
}

void AutoAugmentSpec::validate() const {
  if (family > kRandomApply) throw PrepError("AutoAugment: unknown policy family " + std::to_string(family));
  if (entries.empty()) bad(*this, "the op space is empty");
  if (entries.size() > 4096) bad(*this, "the op space holds at most 4096 ops");
  if (policy_size > 16) bad(*this, "policy_size must be at most 16");
  if (interpolation != Resample::kNearest && interpolation != Resample::kBilinear) {
    bad(*this, "interpolation must be nearest or bilinear");
  }
  if (family == kRandAugment && num_ops > 64) bad(*this, "num_ops must be at most 64, not " + std::to_string(num_ops));
  if (family == kAutoAugment && (policy_size == 0 || entries.size() % policy_size != 0)) {
    bad(*this, "the sub-policies must each have " + std::to_string(policy_size) + " ops");
  }
  for (const Entry& e : entries) {
    if (static_cast<int>(e.op) >= kImageOpCount) bad(*this, "unknown op " + std::to_string(int(e.op)));
    if (!(e.p >= 0 && e.p <= 1)) bad(*this, std::string(image_op_name(e.op)) + ": p must be in [0, 1]");
    if (e.magnitudes.size() > 1024) bad(*this, std::string(image_op_name(e.op)) + ": at most 1024 magnitudes");
    for (double m : e.magnitudes) {
      if (!std::isfinite(m)) bad(*this, std::string(image_op_name(e.op)) + ": magnitudes must be finite");
      if (e.op == ImageOp::kPosterize && !(m >= 0 && m < 9)) bad(*this, "Posterize: bits must be in 0..8");
      if ((e.op == ImageOp::kBrightness || e.op == ImageOp::kColor || e.op == ImageOp::kContrast ||
           e.op == ImageOp::kSharpness) &&
          !(std::fabs(m) < 1e6)) {
        bad(*this, std::string(image_op_name(e.op)) + ": magnitude out of range");
      }
      if ((e.op == ImageOp::kShearX || e.op == ImageOp::kShearY || e.op == ImageOp::kTranslateX ||
           e.op == ImageOp::kTranslateY) &&
          !(std::fabs(m) < 1e6)) {
        bad(*this, std::string(image_op_name(e.op)) + ": magnitude out of range");
      }
    }
  }
}

}  // namespace joader
