// libFuzzer harness: image preparation on arbitrary bytes. Any input must end in a PrepError or
// a correctly sized output, never a crash, a hang or a sanitizer report.
#include <cstdint>
#include <vector>

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
  }
  return 0;
}
