// A job's batches as a training loop takes them: the items of a client Batch (in the daemon's
// shared-memory arena) written into one array in the caller's memory, augmented per item
// (prep/augment.h), converted to float32 and erased (prep/erasing.h) on the way, and the batch
// acknowledged, so that the caller never holds arena memory.
//
//   joader::BatchBuilder builder(*job, ops, seed, /*threads=*/4);
//   joader::BatchFormat format;
//   format.chw = format.floats = true;  // float32 [n, 3, S, S], as ToTensor gives
//   joader::Batch b;
//   while (job->next(&b)) {
//     std::vector<float> batch(builder.elements(b.items.size(), format));
//     builder.gather(b, format, batch.data());  // acknowledges b
//   }
//
// The Python binding (src/python/native.cc) allocates NumPy arrays and calls this with the GIL
// released; a C++ program calls it alike.
//
// Not thread-safe: one thread calls it per job, as Job (client/client.h) is called; gather()
// itself runs an augmenting job's items on up to `threads` threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "client/client.h"
#include "prep/augment.h"
#include "prep/erasing.h"

namespace joader {

// How a batch of fixed-size images is written.
struct BatchFormat {
  bool chw = false;                               // [n, C, H, W] (PyTorch's NCHW), else [n, H, W, C]
  bool floats = false;                            // float32 as torchvision's ToTensor (x / 255)...
  std::optional<std::array<float, 6>> normalize;  // ...then Normalize: mean[3], std[3] (floats only)
  std::optional<ErasingOp> erase;                 // ...then the tail's RandomErasing (floats only)

  // Throws ClientError INVALID_ARGUMENT for a format no batch can have (normalize or erase
  // without floats), and for an invalid erase (validate_erasing's words).
  void check() const;
  const float* mean() const { return normalize ? normalize->data() : nullptr; }
  const float* stdev() const { return normalize ? normalize->data() + 3 : nullptr; }
};

// What a job's items become.
enum class BatchKind {
  kImages,   // one array [n, ...] of fixed-size images (an augmenting job, or a dataset with a crop)
  kOwnSize,  // one [h, w, 3] uint8 image per item (a dataset stored at each image's own size)
  kRaw,      // one byte string per item (a raw dataset)
};

class BatchBuilder {
 public:
  // `ops`: the job's per-item pipeline (already valid, validate_pipeline; empty: none), drawn from
  // (seed, epoch, item). The builder reads the job's items itself, copying only what it reads of
  // those whose pages are new to this process (it turns the job's own copies off).
  BatchBuilder(Job& job, std::vector<AugmentOp> ops, uint64_t seed, unsigned threads);

  BatchKind kind() const { return kind_; }
  // For kImages: the array of a batch of n items in `format` — its shape and whether it holds
  // float32 (else uint8). Only 3-channel images are made planar or float; others keep [n, H, W, C]
  // bytes.
  std::array<size_t, 4> shape(size_t n, const BatchFormat& format) const;
  bool floats(const BatchFormat& format) const;
  size_t elements(size_t n, const BatchFormat& format) const;

  // For kImages: writes b's images into dst (an array of shape(b.items.size(), format), float or
  // uint8 as floats(format) says), then acknowledges b. An item that cannot be augmented ends the
  // job (b is acknowledged, its items are not consumed: a job resumed from what was consumed gets
  // them again) and throws ClientError DATA_LOSS naming the item, as a corrupt item in the daemon
  // does (for an augmenting job, also an item of the wrong size or a failed copy out of the arena).
  // Without ops, an item of another size than the dataset's, or a copy out of the arena that
  // fails, throws ClientError INTERNAL with b not acknowledged (the job's stream is then broken:
  // close it).
  void gather(const Batch& b, const BatchFormat& format, void* dst);

  // For kOwnSize and kRaw: item i's bytes (b.items[i].size of them) copied to dst[i], then b
  // acknowledged (not when a copy out of the arena fails: ClientError INTERNAL, as gather's).
  void copy_items(const Batch& b, const std::vector<uint8_t*>& dst);

 private:
  void gather_augmented(const Batch& b, const BatchFormat& format, void* dst);
  void gather_stored(const Batch& b, const BatchFormat& format, void* dst);
  ImageView read_rows(const ImageView& img, std::vector<OpDraw>& draws);
  const uint8_t* readable(const uint8_t* data, uint64_t n);
  void copy_out(const uint8_t* data, uint64_t n, uint8_t* dst);
  bool copies(const uint8_t* data, uint64_t n, uint64_t* offset);
  void copy(uint64_t offset, uint64_t n, uint8_t* dst);

  Job& job_;
  std::vector<AugmentOp> ops_;
  uint64_t seed_;
  unsigned threads_;
  std::array<uint32_t, 3> shape_;  // the dataset's stored items: height, width, channels (0 x 0: own size)
  BatchKind kind_;
  uint32_t out_size_ = 0;   // an augmenting job's output side
  bool some_rows_ = false;  // the first op reads only some rows of an item (reads_some_rows)
};

// The images a Python pipeline gave — n contiguous uint8 [h, w, 3] images at src — written into
// dst as `format` says ([n, 3, h, w] or [n, h, w, 3], float32 or uint8), on up to `threads`
// threads; an erase is drawn from (seed, epoch, ids[i]) as gather()'s.
void convert_images(const uint8_t* src, size_t n, uint32_t height, uint32_t width, const BatchFormat& format, void* dst,
                    unsigned threads, uint64_t seed, uint32_t epoch, const std::vector<uint32_t>& ids);

}  // namespace joader
