// Pixel layouts a client hands to its framework.
#pragma once

#include <cstddef>
#include <cstdint>

#include "prep/image_prep.h"

namespace joader {

// Copies `pixels` RGB pixels stored interleaved (HWC, as the daemon stores them) into three planes
// (CHW, as PyTorch's NCHW wants them): dst[c * pixels + i] = src[3 * i + c]. One pass over the
// bytes; the batch gather of the Python binding writes NCHW with it instead of copying HWC and
// then permuting. Vectorised only in its AVX2 / SSE4.1 clones (JOADER_CLONES on its definition); the
// scalar loop is several times slower (prep_bench's BM_Gather224; docs/BENCHMARKS.md, "The gather
// vectorised again").
void hwc_to_chw(const uint8_t* src, size_t pixels, uint8_t* dst);
// The same with the planes `plane` bytes apart (plane >= pixels): dst[c * plane + i]. For one row
// of an image: dst at the row's place in the first plane, plane the image's pixel count.
void hwc_to_chw(const uint8_t* src, size_t pixels, uint8_t* dst, size_t plane);

// The float conversion of torchvision's tensor tail, in one pass: each sample x becomes
// x / 255 (ToTensor), then, with `mean`/`std` (3 values each; nullptr for none), (x - mean[c]) /
// std[c] (Normalize), in float32 and in that order — the same arithmetic as torch's, so the
// result is bit for bit what `t.float() / 255` and `(t - mean) / std` give. Written as planes
// (chw: dst[c * pixels + i]) or interleaved (dst[3 * i + c]).
void to_float(const uint8_t* src, size_t pixels, bool chw, const float* mean, const float* std, float* dst);
// The same with the planes `plane` floats apart when chw (as hwc_to_chw's).
void to_float(const uint8_t* src, size_t pixels, bool chw, const float* mean, const float* std, float* dst,
              size_t plane);

// The rows of a size×size image written into its slot of a batch as they come
// (prep/image_prep.h's RowSink: e.g. from augment()), while each row is in the core's cache:
// bytes, HWC or as planes (CHW)...
class ByteRows final : public RowSink {
 public:
  ByteRows(uint8_t* slot, uint32_t size, bool chw) : slot_(slot), size_(size), chw_(chw) {}
  void row(int64_t y, const uint8_t* rgb) override;

 private:
  uint8_t* slot_;
  uint32_t size_;
  bool chw_;
};

// ...or as floats, converted (and normalised: mean, stdev as to_float's) as to_float does.
class FloatRows final : public RowSink {
 public:
  FloatRows(float* slot, uint32_t size, bool chw, const float* mean, const float* stdev)
      : slot_(slot), size_(size), chw_(chw), mean_(mean), stdev_(stdev) {}
  void row(int64_t y, const uint8_t* rgb) override;

 private:
  float* slot_;
  uint32_t size_;
  bool chw_;
  const float* mean_;
  const float* stdev_;
};

}  // namespace joader
