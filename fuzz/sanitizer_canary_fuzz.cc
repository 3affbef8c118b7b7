// A canary, not a harness: it has undefined behaviour on purpose (a signed overflow) for inputs that
// start with "UB". `make fuzz` runs it on such an input and requires it to FAIL, which proves
// that a sanitizer report stops a fuzz run (and CI) rather than being printed and ignored.
#include <cstdint>
#include <cstring>
#include <limits>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && std::memcmp(data, "UB", 2) == 0) {
    volatile int big = std::numeric_limits<int>::max();
    volatile int one = static_cast<int>(size > 0);
    volatile int overflow = big + one;  // UBSan: signed integer overflow
    (void)overflow;
  }
  return 0;
}
