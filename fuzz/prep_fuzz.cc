// libFuzzer harness: image preparation on arbitrary bytes, then one op of the AutoAugment family
// (prep/autoaugment.h) on the result, chosen with its magnitude and resampling by the input's
// first bytes, and for half the inputs a RandomAffine matrix with extreme shears and scales. Any input must end in a PrepError or a correctly sized output, never a crash, a
// hang or a sanitizer report.
#include <cstdint>
#include <vector>

#include "prep/autoaugment.h"
#include "prep/image_prep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  joader::PrepSpec spec;
  spec.raw = false;
  spec.resize = 40;
  spec.crop = 32;
  spec.max_pixels = 1 << 22;  // keep the fuzzer fast: 4 Mpixel images at most
  std::vector<uint8_t> out;
  try {
    joader::prepare(spec, {data, size}, out);
    if (out.size() != 32 * 32 * 3) __builtin_trap();
  } catch (const joader::PrepError&) {
    return 0;
  }
  if (size < 3) return 0;
  joader::Image img;
  img.width = img.height = 32;
  img.rgb = std::move(out);
  const auto op = static_cast<joader::ImageOp>(data[0] % joader::kImageOpCount);
  const double magnitude = static_cast<int8_t>(data[1]) * 1.7;  // -218 .. 216: past every op's range
  const auto resample = (data[2] & 1) ? joader::Resample::kBilinear : joader::Resample::kNearest;
  joader::apply_image_op(img, op, magnitude, resample, {data[2], data[1], data[0]});
  if (data[0] & 0x80) {  // RandomAffine's matrix too, shears up to ±89°, scales from 0.001
    joader::AffineParams p;
    p.angle = static_cast<int8_t>(data[1]) * 3.0;
    p.shear_x = static_cast<int8_t>(data[2]) * 0.7;
    p.shear_y = -p.shear_x / 2;
    p.scale = 0.001 + data[1] / 255.0 * 3;
    p.translate_x = static_cast<int8_t>(data[2]) / 4;
    img = joader::affine_transform(img, p, resample, {0, 0, 0});
  }
  if (img.width != 32 || img.height != 32 || img.rgb.size() != 32 * 32 * 3) __builtin_trap();
  return 0;
}
