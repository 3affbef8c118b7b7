#include "client/batch_builder.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/layout.h"
#include "ipc/shared_arena.h"

namespace joader {
namespace {

// Runs fn(i) for i in [0, n) on up to `threads` threads (the calling one included); rethrows the
// first exception once all have stopped.
void parallel_for(size_t n, unsigned threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lk(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// A buffer of at least n bytes of the calling thread, not zeroed (its readers read only what was
// written into it). It lasts, so the thread that calls gather() (and every batch's single
// augmentation thread) reuses its pages; parallel_for's other threads are new for each batch.
uint8_t* thread_buffer(uint64_t n) {
  thread_local std::unique_ptr<uint8_t[]> buffer;
  thread_local uint64_t capacity = 0;
  if (capacity < n) {
    buffer = std::make_unique_for_overwrite<uint8_t[]>(n);
    capacity = n;
  }
  return buffer.get();
}

// One image's pixels written into its slot as `format` says.
void write_image(const uint8_t* src, size_t pixels, const BatchFormat& format, void* slot, uint64_t seed,
                 uint32_t epoch, uint32_t id, uint32_t width, uint32_t height) {
  if (format.floats) {
    float* image = static_cast<float*>(slot);
    to_float(src, pixels, format.chw, format.mean(), format.stdev(), image);
    if (format.erase) random_erasing(image, width, height, format.chw, *format.erase, seed, epoch, id);
  } else if (format.chw) {
    hwc_to_chw(src, pixels, static_cast<uint8_t*>(slot));  // one pass, no HWC copy to permute
  } else {
    std::memcpy(slot, src, pixels * 3);
  }
}

}  // namespace

void BatchFormat::check() const {
  if ((normalize || erase) && !floats) {
    throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, "normalize and erase need float batches");
  }
  if (erase) {
    try {
      validate_erasing(*erase);
    } catch (const PrepError& e) {
      throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, std::string("augment: ") + e.what());
    }
  }
}

BatchBuilder::BatchBuilder(Job& job, std::vector<AugmentOp> ops, uint64_t seed, unsigned threads)
    : job_(job), ops_(std::move(ops)), seed_(seed), threads_(std::max(1u, threads)) {
  const v1::Registered& r = job_.registered();
  shape_ = {r.height(), r.width(), r.channels()};
  kind_ = !ops_.empty() || shape_[0] != 0 ? BatchKind::kImages : shape_[2] == 3 ? BatchKind::kOwnSize : BatchKind::kRaw;
  if (!ops_.empty()) out_size_ = pipeline_output_size(ops_);
  // The builder copies each item new to this process as it writes it into the batch (readable),
  // not the whole batch first in next(): the copy is then read from this core's cache, or lands in
  // its final place; a pipeline whose first op reads only some rows (RandomResizedCrop's box)
  // copies only those (read_rows).
  some_rows_ = reads_some_rows(ops_);
  job_.set_copies(false);
}

std::array<size_t, 4> BatchBuilder::shape(size_t n, const BatchFormat& format) const {
  if (!ops_.empty()) {
    const size_t s = out_size_;
    return format.chw ? std::array<size_t, 4>{n, 3, s, s} : std::array<size_t, 4>{n, s, s, 3};
  }
  const auto [h, w, c] = shape_;
  return format.chw && c == 3 ? std::array<size_t, 4>{n, c, h, w} : std::array<size_t, 4>{n, h, w, c};
}

bool BatchBuilder::floats(const BatchFormat& format) const {
  return format.floats && (!ops_.empty() || shape_[2] == 3);
}

size_t BatchBuilder::elements(size_t n, const BatchFormat& format) const {
  const std::array<size_t, 4> s = shape(n, format);
  return s[0] * s[1] * s[2] * s[3];
}

void BatchBuilder::gather(const Batch& b, const BatchFormat& format, void* dst) {
  if (kind_ != BatchKind::kImages) {
    throw ClientError(grpc::StatusCode::FAILED_PRECONDITION, "this job's items have no fixed size: copy_items()");
  }
  if (!ops_.empty()) {
    gather_augmented(b, format, dst);
  } else {
    gather_stored(b, format, dst);
  }
}

void BatchBuilder::gather_augmented(const Batch& b, const BatchFormat& format, void* dst) {
  const uint32_t S = out_size_;
  const size_t pixels = size_t{S} * S;
  std::string failure;
  try {
    parallel_for(b.items.size(), threads_, [&](size_t i) {
      const ItemView& it = b.items[i];
      try {
        ImageView img;  // read in place, or copied (readable); only the rows the first op reads for read_rows
        img.rgb = some_rows_ ? it.data : readable(it.data, it.size);
        img.width = it.width != 0 ? it.width : shape_[1];
        img.height = it.height != 0 ? it.height : shape_[0];
        img.stride = size_t{img.width} * 3;
        if (uint64_t{img.width} * img.height * 3 != it.size) throw PrepError("its size does not match its image");
        std::vector<OpDraw> draws = draw_augment(ops_, img.width, img.height, seed_, b.epoch, it.id);
        if (some_rows_) img = read_rows(img, draws);
        if (format.floats) {
          float* image = static_cast<float*>(dst) + i * pixels * 3;
          FloatRows rows(image, S, format.chw, format.mean(), format.stdev());
          apply_augment(img, ops_, draws, rows);
          if (format.erase) random_erasing(image, S, S, format.chw, *format.erase, seed_, b.epoch, it.id);
        } else {
          ByteRows rows(static_cast<uint8_t*>(dst) + i * pixels * 3, S, format.chw);
          apply_augment(img, ops_, draws, rows);
        }
      } catch (const std::exception& e) {
        throw PrepError("augment: item " + std::to_string(it.id) + ": " + e.what());
      }
    });
  } catch (const std::exception& e) {
    failure = e.what();
  }
  job_.ack(b);  // whatever happened: the batch's items must not stay pinned
  if (!failure.empty()) {
    job_.close();
    throw ClientError(grpc::StatusCode::DATA_LOSS, failure);
  }
}

void BatchBuilder::gather_stored(const Batch& b, const BatchFormat& format, void* dst) {
  const auto [h, w, c] = shape_;
  const uint64_t item_bytes = uint64_t{h} * w * c;
  const bool converts = c == 3 && (format.floats || format.chw);
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t slot_bytes = item_bytes * (c == 3 && format.floats ? sizeof(float) : 1);
  for (const ItemView& it : b.items) {
    if (it.size != item_bytes)
      throw ClientError(grpc::StatusCode::INTERNAL, "item size does not match the dataset's shape");
    if (converts) {
      write_image(readable(it.data, it.size), size_t{h} * w, format, out, seed_, b.epoch, it.id, w, h);
    } else {
      copy_out(it.data, it.size, out);
    }
    out += slot_bytes;
  }
  job_.ack(b);
}

void BatchBuilder::copy_items(const Batch& b, const std::vector<uint8_t*>& dst) {
  for (size_t i = 0; i < b.items.size(); ++i) copy_out(b.items[i].data, b.items[i].size, dst[i]);
  job_.ack(b);
}

// For a pipeline whose first op reads only some rows of its input (RandomResizedCrop's box): those
// rows copied with pread into a buffer of this thread where the process copies the item's pages
// (ArenaReads: fewer bytes than the whole image, and no trap), the draws then counted from the
// copy's first row; else `img`, read in place. The same pixels either way.
ImageView BatchBuilder::read_rows(const ImageView& img, std::vector<OpDraw>& draws) {
  int64_t top = 0, height = 0;
  rows_read(ops_, draws, &top, &height);
  if (top < 0 || height <= 0 || top + height > int64_t{img.height}) return img;  // the op refuses it
  const uint8_t* first = img.rgb + static_cast<uint64_t>(top) * img.stride;
  const uint8_t* rows = readable(first, static_cast<uint64_t>(height) * img.stride);
  if (rows == first) return img;
  rows_from(ops_, draws, top);
  return ImageView{rows, img.width, static_cast<uint32_t>(height), img.stride};
}

// The n bytes of an item at `data` to read from: in place, or, where this process copies the
// pages new to it (ArenaReads), a copy in the calling thread's buffer.
const uint8_t* BatchBuilder::readable(const uint8_t* data, uint64_t n) {
  uint64_t offset;
  if (!copies(data, n, &offset)) return data;
  uint8_t* buffer = thread_buffer(n);
  copy(offset, n, buffer);
  return buffer;
}

// The n bytes of an item at `data` written to `dst`: copied with pread where this process copies
// the pages new to it (ArenaReads), else from its own mapping.
void BatchBuilder::copy_out(const uint8_t* data, uint64_t n, uint8_t* dst) {
  uint64_t offset;
  if (copies(data, n, &offset)) {
    copy(offset, n, dst);
  } else {
    std::memcpy(dst, data, n);
  }
}

// Whether the n bytes at `data` are to be copied rather than read in place (counting this read,
// ArenaReads::copy), and where they are in the arena. Items next() copied already (split between
// blocks) are outside it: read where they are.
bool BatchBuilder::copies(const uint8_t* data, uint64_t n, uint64_t* offset) {
  ArenaView& arena = job_.arena();
  if (arena.reads().copy_reads() == 0 || data < arena.data() || data >= arena.data() + arena.size()) return false;
  *offset = static_cast<uint64_t>(data - arena.data());
  return arena.reads().copy(*offset, n);
}

void BatchBuilder::copy(uint64_t offset, uint64_t n, uint8_t* dst) {
  try {
    job_.arena().copy(offset, n, dst);
  } catch (const std::runtime_error& e) {
    throw ClientError(grpc::StatusCode::INTERNAL, e.what());  // as next() reports its copies' failures
  }
}

void convert_images(const uint8_t* src, size_t n, uint32_t height, uint32_t width, const BatchFormat& format, void* dst,
                    unsigned threads, uint64_t seed, uint32_t epoch, const std::vector<uint32_t>& ids) {
  if (format.erase && ids.size() != n) {
    throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, "erase needs an item id per image");
  }
  const size_t pixels = size_t{height} * width;
  const size_t slot_bytes = pixels * 3 * (format.floats ? sizeof(float) : 1);
  parallel_for(n, threads, [&](size_t i) {
    write_image(src + i * pixels * 3, pixels, format, static_cast<uint8_t*>(dst) + i * slot_bytes, seed, epoch,
                format.erase ? ids[i] : 0, width, height);
  });
}

}  // namespace joader
