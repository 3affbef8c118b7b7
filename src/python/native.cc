// joader._native: the Python binding of the C++ client (pybind11). Batches are gathered from the
// daemon's shared memory into one contiguous numpy array with the GIL released, then
// acknowledged at once, so Python code never holds arena memory.
#include <grpc/fork.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "client/client.h"
#include "client/fork_safety.h"
#include "client/layout.h"
#include "client/report.h"
#include "ipc/paths.h"
#include "ipc/shared_arena.h"
#include "prep/augment.h"
#include "prep/color.h"
#include "prep/erasing.h"

namespace py = pybind11;

namespace joader {
namespace {

// Fork (src/client/fork_safety.h). gRPC can be carried into a child when its fork support is on,
// it polls with its "poll" engine (with "epoll1" the child's first channel took the parent's
// stream's events: the parent hung, with Debian's gRPC 1.51), no thread is inside gRPC at the fork
// and no job stream is open (a receiving stream is never paused across a fork): then
// grpc_prefork() stops its threads and grpc_postfork_child() restarts them in the child. Otherwise
// the fork leaves gRPC alone and the child may not use Joader. The module sets both variables
// before gRPC starts (unless the user set them), and every call into gRPC below runs inside a
// GrpcCall, so that fork_prepare() can tell whether one is in progress on another thread (with the
// GIL, which the fork's caller holds, nobody can start one).
std::atomic<int> calls_in_grpc{0};

// Counts a call into gRPC, and releases the GIL for it (in that order: the count is only ever
// changed with the GIL held).
class GrpcCall {
  struct Count {
    Count() { calls_in_grpc.fetch_add(1); }
    ~Count() { calls_in_grpc.fetch_sub(1); }
  } count_;
  py::gil_scoped_release nogil_;
};

// Why gRPC cannot be carried through a fork now ("" if it can).
std::string fork_obstacle() {
  const char* support = std::getenv("GRPC_ENABLE_FORK_SUPPORT");
  const char* strategy = std::getenv("GRPC_POLL_STRATEGY");
  if (support == nullptr || (std::string(support) != "true" && std::string(support) != "1")) {
    return "GRPC_ENABLE_FORK_SUPPORT is not true in its environment";
  }
  if (strategy == nullptr || std::string(strategy) != "poll") return "GRPC_POLL_STRATEGY is not poll in its environment";
  if (calls_in_grpc.load() != 0) return "another thread was in a Joader call";
  if (open_job_streams() != 0) return "a Joader job was open in it";
  return "";
}

using HwcArray = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

// An [H, W, 3] uint8 array as an Image, and back.
Image image_of(const HwcArray& hwc) {
  if (hwc.ndim() != 3 || hwc.shape(2) != 3) throw std::invalid_argument("expected an [H, W, 3] uint8 array");
  Image img;
  img.height = static_cast<uint32_t>(hwc.shape(0));
  img.width = static_cast<uint32_t>(hwc.shape(1));
  img.rgb.assign(hwc.data(), hwc.data() + hwc.size());
  return img;
}

py::array_t<uint8_t> array_of(const Image& img) {
  py::array_t<uint8_t> result({py::ssize_t(img.height), py::ssize_t(img.width), py::ssize_t(3)});
  std::memcpy(result.mutable_data(), img.rgb.data(), img.rgb.size());
  return result;
}

// The dicts of client/report.h (the same fields as `joader status --json`), through Python's json.
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// (kind, size, scale_min, scale_max, ratio_min, ratio_max, p, values), kind as
// v1::AugmentOp::Kind, values ColorJitter's 8 bounds, else AugmentOp::params() (prep/augment.h).
using OpTuple = std::tuple<int, uint32_t, double, double, double, double, double, std::vector<double>>;

AugmentOp to_op(const OpTuple& t) {
  AugmentOp op;
  int kind;
  std::vector<double> jitter;
  std::tie(kind, op.size, op.scale_min, op.scale_max, op.ratio_min, op.ratio_max, op.p, jitter) = t;
  if (kind < 0 || kind > AugmentOp::kRandomAffine) throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, "augment: unknown op kind " + std::to_string(kind));
  op.kind = static_cast<AugmentOp::Kind>(kind);
  if (op.kind == AugmentOp::kColorJitter) {
    if (jitter.size() != op.jitter.size()) throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, "augment: ColorJitter needs 8 bounds");
    std::copy(jitter.begin(), jitter.end(), op.jitter.begin());
  } else {
    try {
      op.set_params(jitter);
    } catch (const PrepError& e) {
      throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, std::string("augment: ") + e.what());
    }
  }
  return op;
}

// The ops of a Python augmentation list, checked as a pipeline; errors as JoaderError INVALID_ARGUMENT (3).
std::vector<AugmentOp> checked_ops(const std::vector<OpTuple>& augment) {
  std::vector<AugmentOp> ops;
  for (const OpTuple& t : augment) ops.push_back(to_op(t));
  try {
    validate_pipeline(ops);
  } catch (const PrepError& e) {
    throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, std::string("augment: ") + e.what());
  }
  return ops;
}

v1::AugmentOp to_proto(const AugmentOp& op) {
  v1::AugmentOp m;
  m.set_kind(static_cast<v1::AugmentOp::Kind>(op.kind));
  m.set_size(op.size);
  m.set_scale_min(op.scale_min);
  m.set_scale_max(op.scale_max);
  m.set_ratio_min(op.ratio_min);
  m.set_ratio_max(op.ratio_max);
  m.set_p(op.p);
  for (double v : op.jitter) m.add_jitter(v);
  for (double v : op.params()) m.add_params(v);
  return m;
}

// Runs fn(i) for i in [0, n) on up to `threads` threads (the calling one included).
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

// The float conversion a batch asks for: None (uint8), () (x / 255) or (mean, std) (then
// normalised), as joader.Loader passes it.
struct FloatSpec {
  explicit FloatSpec(const py::object& spec) {
    as_float = !spec.is_none();
    if (!as_float) return;
    const py::tuple t = spec.cast<py::tuple>();
    if (t.size() == 2) {
      const auto m = t[0].cast<std::array<float, 3>>(), s = t[1].cast<std::array<float, 3>>();
      std::copy(m.begin(), m.end(), norm.begin());
      std::copy(s.begin(), s.end(), norm.begin() + 3);
      normalize = true;
    } else if (t.size() != 0) {
      throw py::value_error("to_float must be () or (mean, std)");
    }
  }
  const float* mean() const { return normalize ? norm.data() : nullptr; }
  const float* stdev() const { return normalize ? norm.data() + 3 : nullptr; }
  bool as_float = false, normalize = false;
  std::array<float, 6> norm{};
};

// A tail's final RandomErasing: None, or (p, scale_min, scale_max, ratio_min, ratio_max, value)
// with value 3 floats (one per channel) or None for 'random'.
std::optional<ErasingOp> erasing_from(const py::object& spec) {
  if (spec.is_none()) return std::nullopt;
  const py::tuple t = spec.cast<py::tuple>();
  if (t.size() != 6) throw py::value_error("erase must be (p, scale_min, scale_max, ratio_min, ratio_max, value)");
  ErasingOp op;
  op.p = t[0].cast<double>();
  op.scale_min = t[1].cast<double>();
  op.scale_max = t[2].cast<double>();
  op.ratio_min = t[3].cast<double>();
  op.ratio_max = t[4].cast<double>();
  op.random_fill = t[5].is_none();
  if (!op.random_fill) op.value = t[5].cast<std::array<float, 3>>();
  try {
    validate_erasing(op);
  } catch (const PrepError& e) {
    throw ClientError(grpc::StatusCode::INVALID_ARGUMENT, std::string("augment: ") + e.what());
  }
  return op;
}

// One job; next() returns (epoch, last_of_epoch, ids, labels, data) or None at the end. With an
// augmentation, each item is augmented here, in the job's process, straight into the batch array
// (the last resample's rows written into the item's slot as they are computed: ByteRows, FloatRows).
class PyJob {
 public:
  PyJob(std::unique_ptr<Job> job, std::vector<AugmentOp> ops, uint64_t seed, unsigned threads)
      : job_(std::move(job)), ops_(std::move(ops)), seed_(seed), threads_(std::max(1u, threads)) {
    const v1::Registered& r = job_->registered();
    shape_ = {r.height(), r.width(), r.channels()};
    if (!ops_.empty()) out_size_ = pipeline_output_size(ops_);
    // Where the job copies items new to it (ArenaReads), it copies each item as it writes it into
    // the batch (readable), not the whole batch first in next(): the copy is then read from this
    // core's cache, or lands in its final place; a pipeline that starts with RandomResizedCrop
    // copies only its box's rows (crop_rows).
    crop_first_ = !ops_.empty() && ops_[0].kind == AugmentOp::kRandomResizedCrop;
    job_->set_copies(false);
  }

  py::dict info() const {
    const v1::Registered& r = job_->registered();
    py::dict out;
    out["name"] = r.job();
    out["items_per_epoch"] = r.items_per_epoch();
    out["height"] = r.height();
    out["width"] = r.width();
    out["channels"] = r.channels();
    return out;
  }

  // chw: fixed-size items are written as [n, C, H, W] (PyTorch's NCHW) instead of [n, H, W, C].
  // The items the daemon left out (on_error skip) since the last call.
  std::vector<uint32_t> take_skipped() { return std::exchange(skipped_, {}); }

  // With `to_float` (a (mean, std) pair of 3-tuples, or an empty tuple for x / 255 only), a batch of
  // fixed-size images comes as float32, converted as torchvision's ToTensor + Normalize would, in
  // the same pass that writes it (on the augmentation threads for an augmenting job).
  // `erase` (see erasing_from) erases each float image as the tail's RandomErasing would, drawn
  // from (the job's augmentation seed, epoch, item).
  py::object next(bool chw, py::object to_float_spec, py::object erase_spec) {
    const FloatSpec spec(to_float_spec);
    const std::optional<ErasingOp> erase = erasing_from(erase_spec);
    if (erase && !spec.as_float) throw py::value_error("erase needs float batches");
    const bool as_float = spec.as_float;
    const float* mean = spec.mean();
    const float* stdev = spec.stdev();
    Batch& b = batch_;  // reused: its copies' memory (Batch::copies) is not new for every batch
    bool more;
    {
      GrpcCall in_grpc;
      more = job_->next(&b);
    }
    if (!more) return py::none();
    skipped_.insert(skipped_.end(), b.skipped.begin(), b.skipped.end());
    const auto n = static_cast<py::ssize_t>(b.items.size());
    py::array_t<int64_t> ids(n), labels(n);
    auto id = ids.mutable_unchecked<1>();
    auto label = labels.mutable_unchecked<1>();
    for (py::ssize_t i = 0; i < n; ++i) {
      id(i) = b.items[i].id;
      label(i) = b.items[i].label;
    }
    py::object data;
    if (!ops_.empty()) {
      const py::ssize_t S = out_size_;
      const std::vector<py::ssize_t> shape = chw ? std::vector<py::ssize_t>{n, 3, S, S}
                                                 : std::vector<py::ssize_t>{n, S, S, 3};
      py::array array = batch_array(shape, as_float);
      uint8_t* dst = static_cast<uint8_t*>(array.mutable_data());
      float* dst_float = static_cast<float*>(array.mutable_data());
      std::string failure;
      {
        GrpcCall in_grpc;
        try {
          parallel_for(b.items.size(), threads_, [&](size_t i) {
            const ItemView& it = b.items[i];
            try {
              ImageView img;  // read in place, or copied (readable); only the crop's rows for crop_rows
              img.rgb = crop_first_ ? it.data : readable(it.data, it.size);
              img.width = it.width != 0 ? it.width : shape_[1];
              img.height = it.height != 0 ? it.height : shape_[0];
              img.stride = size_t{img.width} * 3;
              if (uint64_t{img.width} * img.height * 3 != it.size) throw PrepError("its size does not match its image");
              std::vector<OpDraw> draws = draw_augment(ops_, img.width, img.height, seed_, b.epoch, it.id);
              if (crop_first_) img = crop_rows(img, draws[0].box);
              const size_t pixels = size_t(S) * S;
              if (as_float) {
                float* image = dst_float + i * pixels * 3;
                FloatRows rows(image, S, chw, mean, stdev);
                apply_augment(img, ops_, draws, rows);
                if (erase) random_erasing(image, S, S, chw, *erase, seed_, b.epoch, it.id);
              } else {
                ByteRows rows(dst + i * pixels * 3, S, chw);
                apply_augment(img, ops_, draws, rows);
              }
            } catch (const std::exception& e) {
              throw PrepError("augment: item " + std::to_string(it.id) + ": " + e.what());
            }
          });
        } catch (const std::exception& e) {
          failure = e.what();
        }
        job_->ack(b);  // whatever happened: the batch's items must not stay pinned
      }
      if (!failure.empty()) {
        // The batch is not consumed: the job ends here, and a Loader resumed from its state gets
        // these items again.
        close();
        throw ClientError(grpc::StatusCode::DATA_LOSS, failure);  // as a corrupt item in the daemon
      }
      data = std::move(array);
    } else if (shape_[0] == 0 && shape_[2] == 3) {  // decoded at each image's own size: one array each
      py::list items;
      std::vector<uint8_t*> dst;
      for (const ItemView& it : b.items) {
        py::array_t<uint8_t> a({py::ssize_t(it.height), py::ssize_t(it.width), py::ssize_t(3)});
        dst.push_back(a.mutable_data());
        items.append(std::move(a));
      }
      copy_and_ack(b, dst);
      data = std::move(items);
    } else if (shape_[0] != 0) {
      const uint64_t item_bytes = uint64_t{shape_[0]} * shape_[1] * shape_[2];
      const auto [h, w, c] = shape_;
      const bool planes = chw && c == 3;
      const bool floats = as_float && c == 3;
      const std::vector<py::ssize_t> shape = planes ? std::vector<py::ssize_t>{n, c, h, w}
                                                    : std::vector<py::ssize_t>{n, h, w, c};
      py::array array = batch_array(shape, floats);
      uint8_t* dst = static_cast<uint8_t*>(array.mutable_data());
      float* dst_float = static_cast<float*>(array.mutable_data());
      {
        GrpcCall in_grpc;
        for (const ItemView& it : b.items) {
          if (it.size != item_bytes) throw ClientError(grpc::StatusCode::INTERNAL, "item size does not match the dataset's shape");
          if (floats) {
            to_float(readable(it.data, it.size), size_t{h} * w, chw, mean, stdev, dst_float);
            if (erase) random_erasing(dst_float, w, h, chw, *erase, seed_, b.epoch, it.id);
            dst_float += it.size;
            continue;
          }
          if (planes) {
            hwc_to_chw(readable(it.data, it.size), size_t{h} * w, dst);  // one pass, no HWC copy to permute
          } else {
            copy_out(it.data, it.size, dst);
          }
          dst += it.size;
        }
        job_->ack(b);
      }
      data = std::move(array);
    } else {  // raw bytes: one bytes object per item
      py::list items;
      std::vector<uint8_t*> dst;
      for (const ItemView& it : b.items) {
        // Made uninitialised and filled below, without the GIL: nobody else holds it before it is returned.
        py::bytes bytes = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, py::ssize_t(it.size)));
        if (!bytes) throw py::error_already_set();
        dst.push_back(reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(bytes.ptr())));
        items.append(std::move(bytes));
      }
      copy_and_ack(b, dst);
      data = std::move(items);
    }
    return py::make_tuple(b.epoch, b.last_of_epoch, ids, labels, data);
  }

  void close() {
    GrpcCall in_grpc;
    job_->close();
  }

  double wait_seconds() const { return job_->wait_seconds(); }

 private:
  // For a pipeline that starts with RandomResizedCrop: the rows of `box` (which the crop reads, and
  // nothing else) copied with pread into a buffer of this thread where the process copies the item's
  // pages (ArenaReads: fewer bytes than the whole image, and no trap), `box` then counted from the
  // copy's first row; else `img`, read in place. The same pixels either way.
  ImageView crop_rows(const ImageView& img, CropBox& box) {
    if (box.top < 0 || box.height <= 0 || box.top + box.height > int64_t{img.height}) return img;  // box_of refuses it
    const uint8_t* first = img.rgb + static_cast<uint64_t>(box.top) * img.stride;
    const uint8_t* rows = readable(first, static_cast<uint64_t>(box.height) * img.stride);
    if (rows == first) return img;
    box.top = 0;
    return ImageView{rows, img.width, static_cast<uint32_t>(box.height), img.stride};
  }

  // Each item of the batch copied into its destination, and the batch acknowledged, without the GIL
  // (other Python threads run meanwhile; the ack is a call into gRPC).
  void copy_and_ack(const Batch& b, const std::vector<uint8_t*>& dst) {
    GrpcCall in_grpc;
    for (size_t i = 0; i < b.items.size(); ++i) copy_out(b.items[i].data, b.items[i].size, dst[i]);
    job_->ack(b);
  }

  // The n bytes of an item at `data` to read from: in place, or, where this process copies the
  // pages new to it (ArenaReads), a copy in the calling thread's buffer.
  const uint8_t* readable(const uint8_t* data, uint64_t n) {
    uint64_t offset;
    if (!copies(data, n, &offset)) return data;
    uint8_t* buffer = thread_buffer(n);
    copy(offset, n, buffer);
    return buffer;
  }

  // The n bytes of an item at `data` written to `dst`: copied with pread where this process copies
  // the pages new to it (ArenaReads), else from its own mapping.
  void copy_out(const uint8_t* data, uint64_t n, uint8_t* dst) {
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
  bool copies(const uint8_t* data, uint64_t n, uint64_t* offset) {
    ArenaView& arena = job_->arena();
    if (arena.reads().copy_reads() == 0 || data < arena.data() || data >= arena.data() + arena.size()) return false;
    *offset = static_cast<uint64_t>(data - arena.data());
    return arena.reads().copy(*offset, n);
  }

  void copy(uint64_t offset, uint64_t n, uint8_t* dst) {
    try {
      job_->arena().copy(offset, n, dst);
    } catch (const std::runtime_error& e) {
      throw ClientError(grpc::StatusCode::INTERNAL, e.what());  // as next() reported its copies' failures
    }
  }

  // A buffer of at least n bytes of the calling thread, not zeroed (its readers read only what was
  // written into it). It lasts, so the thread that calls next() (and every batch's single
  // augmentation thread) reuses its pages; parallel_for's other threads are new for each batch.
  static uint8_t* thread_buffer(uint64_t n) {
    thread_local std::unique_ptr<uint8_t[]> buffer;
    thread_local uint64_t capacity = 0;
    if (capacity < n) {
      buffer = std::make_unique_for_overwrite<uint8_t[]>(n);
      capacity = n;
    }
    return buffer.get();
  }

  // An array for a batch: one of the last kPooled this job made, of that shape and type, that
  // nobody holds any more (the training loop dropped its tensors: a NumPy array's memory is
  // referenced only through it, and torch.from_numpy holds it), else a new one. A new batch-sized
  // array is new memory each time (NumPy maps it afresh, zeroed, page by page, and hands it back
  // when freed), whose page faults showed in the profile of four evaluation jobs (docs/BENCHMARKS.md,
  // "Per-item copies and reused batch arrays"). Every byte is written over.
  py::array batch_array(const std::vector<py::ssize_t>& shape, bool floats) {
    const py::dtype type = floats ? py::dtype::of<float>() : py::dtype::of<uint8_t>();
    const auto fits = [&](const py::array& a) {  // unreferenced, and as made (a loop may change flags)
      return a.ref_count() == 1 && a.dtype().equal(type) && a.writeable() && (a.flags() & py::array::c_style) &&
             std::equal(shape.begin(), shape.end(), a.shape(), a.shape() + a.ndim());
    };
    for (const py::array& a : pooled_) {
      if (fits(a)) return a;
    }
    py::array made = floats ? py::array(py::array_t<float>(shape)) : py::array(py::array_t<uint8_t>(shape));
    if (pooled_.size() < kPooled) {
      pooled_.push_back(made);
    } else {  // in place of one nobody holds (another shape: an epoch's last batch), else the oldest
      auto free = std::find_if(pooled_.begin(), pooled_.end(), [](const py::array& a) { return a.ref_count() == 1; });
      pooled_.erase(free != pooled_.end() ? free : pooled_.begin());
      pooled_.push_back(made);
    }
    return made;
  }

  // A training loop holds its last batch while it asks for the next (and the loader's generator
  // its Batch): three cover that with one to spare.
  static constexpr size_t kPooled = 3;

  std::unique_ptr<Job> job_;
  Batch batch_;
  std::vector<py::array> pooled_;
  std::array<uint32_t, 3> shape_;
  std::vector<AugmentOp> ops_;
  std::vector<uint32_t> skipped_;  // told by the daemon, not yet taken by take_skipped()
  uint64_t seed_;
  unsigned threads_;
  uint32_t out_size_ = 0;
  bool crop_first_ = false;
};

}  // namespace
}  // namespace joader

PYBIND11_MODULE(_native, m) {
  using namespace joader;
  m.doc() = "Native client of the Joader daemon";
  static py::exception<ClientError> error(m, "JoaderError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ClientError& e) {
      py::object type = py::reinterpret_borrow<py::object>(error.ptr());
      py::object instance = type(e.what());
      instance.attr("code") = e.code();
      PyErr_SetObject(error.ptr(), instance.ptr());
    } catch (const Interrupted&) {
      // A signal handler raised (KeyboardInterrupt for Ctrl-C) while a call waited: its error is set.
      if (!PyErr_Occurred()) PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
  });

  // Before gRPC starts (at the first Client): what fork_prepare() needs, unless the user chose.
  setenv("GRPC_ENABLE_FORK_SUPPORT", "true", 0);
  setenv("GRPC_POLL_STRATEGY", "poll", 0);
  // os.register_at_fork's hooks (joader/client.py), with the GIL held. fork_prepare() returns why
  // the fork cannot carry gRPC ("": it can, and gRPC's threads are stopped until fork_parent() or
  // fork_child() restarts them).
  m.def("fork_prepare", [] {
    std::string obstacle = fork_obstacle();
    if (obstacle.empty()) grpc_prefork();
    return obstacle;
  });
  m.def("testing_calls_in_grpc", [] { return calls_in_grpc.load(); });
  m.def("fork_parent", [] { grpc_postfork_parent(); });
  // In the child: never the parent's connections (fork_safety.h); gRPC restarted if fork_prepare()
  // stopped it (`carried`).
  m.def("fork_child", [](bool carried) {
    disconnect_inherited_daemon_sockets();
    if (carried) grpc_postfork_child();
  });
  // The socket a Client without one uses: $JOADER_SOCKET, else the per-user default.
  m.def("default_socket_path", [] { return default_socket_path(); });
  m.def("check_augment", [](const std::vector<OpTuple>& augment) { return pipeline_output_size(checked_ops(augment)); });
  // The batch of images a Python pipeline gave (uint8 [n, H, W, 3], any strides of whole images)
  // written into dst: [n, 3, H, W] with chw, else [n, H, W, 3]; float32 when to_float is not None
  // (the gather's arithmetic, client/layout.h), else uint8. On up to `threads` threads, GIL released.
  m.def(
      "convert_images",
      [](py::array_t<uint8_t, py::array::c_style> src, py::array dst, bool chw, py::object to_float_spec,
         unsigned threads, py::object erase_spec, uint64_t seed, uint32_t epoch, std::vector<uint32_t> ids) {
        const FloatSpec spec(to_float_spec);
        const std::optional<ErasingOp> erase = erasing_from(erase_spec);
        if (erase && (!spec.as_float || ids.size() != size_t(src.shape(0)))) {
          throw py::value_error("erase needs float batches and an item id per image");
        }
        if (src.ndim() != 4 || src.shape(3) != 3) throw py::value_error("src must be uint8 [n, H, W, 3]");
        const py::ssize_t n = src.shape(0), h = src.shape(1), w = src.shape(2);
        const std::vector<py::ssize_t> want = chw ? std::vector<py::ssize_t>{n, 3, h, w}
                                                  : std::vector<py::ssize_t>{n, h, w, 3};
        const bool dst_ok = (dst.flags() & py::array::c_style) && dst.writeable() && dst.ndim() == 4 &&
                            std::equal(want.begin(), want.end(), dst.shape()) &&
                            (spec.as_float ? py::isinstance<py::array_t<float>>(dst)
                                           : py::isinstance<py::array_t<uint8_t>>(dst));
        if (!dst_ok) throw py::value_error("dst must be a writeable C-contiguous array of the batch's shape and dtype");
        const uint8_t* in = src.data();
        void* out = dst.mutable_data();
        const size_t pixels = size_t(h) * size_t(w);
        py::gil_scoped_release nogil;
        parallel_for(size_t(n), threads, [&](size_t i) {
          const uint8_t* from = in + i * pixels * 3;
          if (spec.as_float) {
            float* image = static_cast<float*>(out) + i * pixels * 3;
            to_float(from, pixels, chw, spec.mean(), spec.stdev(), image);
            if (erase) random_erasing(image, uint32_t(w), uint32_t(h), chw, *erase, seed, epoch, ids[i]);
          } else if (chw) {
            hwc_to_chw(from, pixels, static_cast<uint8_t*>(out) + i * pixels * 3);
          } else {
            std::memcpy(static_cast<uint8_t*>(out) + i * pixels * 3, from, pixels * 3);
          }
        });
      },
      py::arg("src"), py::arg("dst"), py::arg("chw"), py::arg("to_float") = py::none(), py::arg("threads") = 1,
      py::arg("erase") = py::none(), py::arg("seed") = 0, py::arg("epoch") = 0,
      py::arg("ids") = std::vector<uint32_t>{});
  // For the law test of the tail's RandomErasing: n draws (erase, top, left, height, width) for
  // items 0..n-1 of (seed, epoch 0) on a width×height image.
  m.def("testing_erasing_boxes", [](uint32_t width, uint32_t height, py::object erase_spec, uint64_t seed, size_t n) {
    const std::optional<ErasingOp> op = erasing_from(erase_spec);
    if (!op) throw py::value_error("erase spec needed");
    py::array_t<int64_t> out({py::ssize_t(n), py::ssize_t(5)});
    auto o = out.mutable_unchecked<2>();
    for (size_t k = 0; k < n; ++k) {
      CounterRng rng(seed, 0, uint32_t(k));
      const ErasingBox b = random_erasing_box(width, height, *op, rng);
      o(k, 0) = b.erase;
      o(k, 1) = b.top;
      o(k, 2) = b.left;
      o(k, 3) = b.height;
      o(k, 4) = b.width;
    }
    return out;
  });

  // For the exactness tests of per-job augmentation (tests/python/test_augment.py): the C++ ops
  // on a given image and box, and the parameters they draw, without a daemon.
  m.def(
      "testing_resized_crop",
      [](const HwcArray& hwc, int64_t top, int64_t left, int64_t height, int64_t width, uint32_t size, bool flip,
         int interpolation) {
        if (interpolation != 0 && interpolation != 2 && interpolation != 3) throw std::invalid_argument("interpolation");
        return array_of(resized_crop(image_of(hwc), CropBox{top, left, height, width}, size, flip,
                                     static_cast<Interpolation>(interpolation)));
      },
      py::arg("hwc"), py::arg("top"), py::arg("left"), py::arg("height"), py::arg("width"), py::arg("size"),
      py::arg("flip"), py::arg("interpolation") = 2);
  // One colour adjustment of prep/color.h ("brightness", "contrast", "saturation", "hue").
  m.def("testing_adjust", [](const HwcArray& hwc, const std::string& which, double factor) {
    Image img = image_of(hwc);
    {
      py::gil_scoped_release nogil;
      if (which == "brightness") {
        adjust_brightness(img, factor);
      } else if (which == "contrast") {
        adjust_contrast(img, factor);
      } else if (which == "saturation") {
        adjust_saturation(img, factor);
      } else if (which == "hue") {
        adjust_hue(img, factor);
      } else {
        throw std::invalid_argument("unknown adjustment " + which);
      }
    }
    return array_of(img);
  });
  // One op of torchvision's _apply_op (prep/autoaugment.h: `op` an ImageOp code, interpolation
  // PIL's code) on an image.
  m.def("testing_image_op", [](const HwcArray& hwc, int op, double magnitude, int interpolation,
                               std::array<uint8_t, 3> fill) {
    if (op < 0 || op >= kImageOpCount) throw std::invalid_argument("unknown op");
    Image img = image_of(hwc);
    {
      py::gil_scoped_release nogil;
      apply_image_op(img, static_cast<ImageOp>(op), magnitude, static_cast<Resample>(interpolation), fill);
    }
    return array_of(img);
  });
  // The ops an AutoAugment policy (AutoAugmentSpec::encode's form) applies to items 0..n-1 of
  // (seed, epoch): per item a list of (op code, magnitude).
  m.def("testing_auto_augment_draws", [](const std::vector<double>& params, uint64_t seed, uint32_t epoch,
                                         uint32_t items) {
    const AutoAugmentSpec spec = AutoAugmentSpec::decode(params);
    std::vector<std::vector<std::pair<int, double>>> out(items);
    for (uint32_t item = 0; item < items; ++item) {
      CounterRng rng(seed, epoch, item);
      for (const AppliedOp& a : draw_auto_augment(spec, rng)) out[item].emplace_back(int(a.op), a.magnitude);
    }
    return out;
  });
  // RandomCrop's windows (top, left in the padded image) for items 0..n-1 of (seed, epoch 0) on a
  // width×height image: [n, 2]. `params` as AugmentOp::params().
  m.def("testing_random_crop_draws", [](const std::vector<double>& params, uint32_t size, uint32_t width,
                                        uint32_t height, uint64_t seed, uint32_t items) {
    AugmentOp op;
    op.kind = AugmentOp::kRandomCrop;
    op.size = size;
    op.set_params(params);
    py::array_t<int64_t> out({py::ssize_t(items), py::ssize_t(2)});
    auto o = out.mutable_unchecked<2>();
    for (uint32_t item = 0; item < items; ++item) {
      const OpDraw d = draw_augment({op}, width, height, seed, 0, item)[0];
      o(item, 0) = d.box.top;
      o(item, 1) = d.box.left;
    }
    return out;
  });
  // RandomAffine's / RandomRotation's draws (angle, translate x, y, scale, shear x, y) for items
  // 0..n-1 of (seed, epoch) on a width×height image: [n, 6]. `params` as AugmentOp::params().
  m.def("testing_affine_draws", [](const std::vector<double>& params, uint32_t width, uint32_t height, uint64_t seed,
                                   uint32_t epoch, uint32_t items) {
    AugmentOp op;
    op.kind = AugmentOp::kRandomAffine;
    op.set_params(params);
    AugmentOp crop;  // a pipeline must end in a size
    crop.kind = AugmentOp::kCenterCrop;
    crop.size = 1;
    validate_pipeline({op, crop});
    py::array_t<double> out({py::ssize_t(items), py::ssize_t(6)});
    auto o = out.mutable_unchecked<2>();
    for (uint32_t item = 0; item < items; ++item) {
      const AffineParams p = draw_augment({op}, width, height, seed, epoch, item)[0].affine;
      const double row[6] = {p.angle, p.translate_x, p.translate_y, p.scale, p.shear_x, p.shear_y};
      for (int k = 0; k < 6; ++k) o(item, k) = row[k];
    }
    return out;
  });
  // ColorJitter's draws (order, factors) for items 0..n-1 of (seed, epoch 0): [n, 8].
  m.def("testing_jitter_draws", [](std::vector<double> bounds, uint64_t seed, uint32_t epoch, uint32_t items) {
    AugmentOp op;
    op.kind = AugmentOp::kColorJitter;
    if (bounds.size() != op.jitter.size()) throw std::invalid_argument("8 bounds");
    std::copy(bounds.begin(), bounds.end(), op.jitter.begin());
    py::array_t<double> out({py::ssize_t(items), py::ssize_t(8)});
    auto o = out.mutable_unchecked<2>();
    for (uint32_t item = 0; item < items; ++item) {
      const OpDraw d = draw_augment({op}, 64, 64, seed, epoch, item)[0];
      for (int k = 0; k < 4; ++k) {
        o(item, k) = d.order[k];
        o(item, 4 + k) = d.factors[k];
      }
    }
    return out;
  });
  m.def("testing_draws",
        [](uint32_t width, uint32_t height, uint32_t size, std::pair<double, double> scale,
           std::pair<double, double> ratio, double p, uint64_t seed, uint32_t epoch, uint32_t items) {
          AugmentOp crop, flip;
          crop.kind = AugmentOp::kRandomResizedCrop;
          crop.size = size;
          std::tie(crop.scale_min, crop.scale_max) = scale;
          std::tie(crop.ratio_min, crop.ratio_max) = ratio;
          flip.kind = AugmentOp::kRandomHorizontalFlip;
          flip.p = p;
          validate_pipeline({crop, flip});
          py::array_t<int64_t> out({py::ssize_t(items), py::ssize_t(5)});  // top, left, height, width, flip
          auto o = out.mutable_unchecked<2>();
          for (uint32_t item = 0; item < items; ++item) {
            const std::vector<OpDraw> d = draw_augment({crop, flip}, width, height, seed, epoch, item);
            o(item, 0) = d[0].box.top;
            o(item, 1) = d[0].box.left;
            o(item, 2) = d[0].box.height;
            o(item, 3) = d[0].box.width;
            o(item, 4) = d[1].flip;
          }
          return out;
        });

  py::class_<PyJob>(m, "Job")
      .def("next", &PyJob::next, py::arg("chw") = false, py::arg("to_float") = py::none(),
           py::arg("erase") = py::none())
      .def("take_skipped", &PyJob::take_skipped)
      .def("close", &PyJob::close)
      .def_property_readonly("info", &PyJob::info)
      .def_property_readonly("wait_seconds", &PyJob::wait_seconds);

  py::class_<Client>(m, "Client")
      .def(py::init([](const std::string& socket) {
             auto c = std::make_unique<Client>(socket);
             // Blocking calls wake every 50 ms to run Python's signal handlers: Ctrl-C interrupts a
             // wait for a daemon that does not answer.
             c->set_interrupt([] {
               py::gil_scoped_acquire gil;
               return PyErr_CheckSignals() != 0;
             });
             return c;
           }),
           py::arg("socket") = "")
      .def_property_readonly("socket", &Client::socket)
      .def("add_dataset",
           [](Client& c, const std::string& name, const std::string& source, bool raw, uint32_t resize, uint32_t crop,
              const std::string& on_error) {
             v1::AddDatasetRequest req;
             req.set_name(name);
             req.set_source(source);
             req.set_raw(raw);
             req.set_resize(resize);
             req.set_crop(crop);
             req.set_on_error(on_error);
             v1::DatasetInfo info;
             {
               GrpcCall in_grpc;
               info = c.add_dataset(req);
             }
             nlohmann::json out = to_json(info);
             out["existed"] = info.existed();
             return to_python(out);
           })
      .def("list_datasets",
           [](Client& c) {
             std::vector<v1::DatasetInfo> datasets;
             {
               GrpcCall in_grpc;
               datasets = c.list_datasets();
             }
             nlohmann::json out = nlohmann::json::array();
             for (const auto& d : datasets) out.push_back(to_json(d));
             return to_python(out);
           })
      .def("end_job",
           [](Client& c, const std::string& name) {
             GrpcCall in_grpc;
             c.end_job(name);
           })
      .def("remove_dataset",
           [](Client& c, const std::string& name) {
             GrpcCall in_grpc;
             c.remove_dataset(name);
           })
      .def("status", [](Client& c) {
        v1::StatusReply reply;
        {
          GrpcCall in_grpc;
          reply = c.status();
        }
        return to_python(to_json(reply));
      })
      .def(
          "open_job",
          [](Client& c, const std::string& dataset, const std::string& name, std::vector<uint32_t> ids,
             uint32_t batch_size, uint32_t epochs, uint32_t prefetch, bool drop_last, int64_t resume_epoch,
             std::vector<uint32_t> consumed, std::vector<OpTuple> augment, uint64_t augment_seed,
             unsigned augment_threads, std::vector<std::string> python_augment, bool ordered) {
            std::vector<AugmentOp> ops = augment.empty() ? std::vector<AugmentOp>{} : checked_ops(augment);
            JobOptions o;
            o.dataset = dataset;
            o.name = name;
            o.ids = std::move(ids);
            o.batch_size = batch_size;
            o.epochs = epochs;
            o.prefetch = prefetch;
            o.drop_last = drop_last;
            o.ordered = ordered;
            for (const AugmentOp& op : ops) o.augment.push_back(to_proto(op));
            o.python_augment = std::move(python_augment);
            if (resume_epoch >= 0) {
              o.resume = true;
              o.resume_epoch = static_cast<uint32_t>(resume_epoch);
              o.resume_consumed = std::move(consumed);
            }
            std::unique_ptr<Job> job;
            {
              GrpcCall in_grpc;
              job = c.open_job(o);
            }
            return std::make_unique<PyJob>(std::move(job), std::move(ops), augment_seed, augment_threads);
          },
          py::arg("dataset"), py::arg("name"), py::arg("ids"), py::arg("batch_size"), py::arg("epochs"),
          py::arg("prefetch"), py::arg("drop_last"), py::arg("resume_epoch"), py::arg("consumed"),
          py::arg("augment") = std::vector<OpTuple>{}, py::arg("augment_seed") = 0, py::arg("augment_threads") = 1,
          py::arg("python_augment") = std::vector<std::string>{}, py::arg("ordered") = false);
}
