// joader._native: the Python binding of the C++ client (pybind11): its calls with the GIL released
// and counted for fork safety, and a job's batches as NumPy arrays — gathered from the daemon's
// shared memory by a BatchBuilder (client/batch_builder.h) into arrays pooled here, then
// acknowledged at once, so Python code never holds arena memory. Python values are converted in
// py_convert.h; the test hooks are joader._native.testing (testing.h).
#include <grpc/fork.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/batch_builder.h"
#include "client/client.h"
#include "client/fork_safety.h"
#include "client/report.h"
#include "common/augment_wire.h"
#include "ipc/paths.h"
#include "prep/ops/op_family.h"
#include "python/py_convert.h"
#include "python/testing.h"

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

// The dicts of client/report.h (the same fields as `joader status --json`), through Python's json.
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// One job; next() returns (epoch, last_of_epoch, ids, labels, data) or None at the end. The
// batch's data is written by a BatchBuilder (client/batch_builder.h) into arrays this job pools.
class PyJob {
 public:
  PyJob(std::unique_ptr<Job> job, std::vector<AugmentOp> ops, uint64_t seed, unsigned threads)
      : job_(std::move(job)), builder_(*job_, std::move(ops), seed, threads) {}

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

  // The items the daemon left out (on_error skip) since the last call.
  std::vector<uint32_t> take_skipped() { return std::exchange(skipped_, {}); }

  // chw, to_float and erase: the batch's format (py_convert.h, batch_format): fixed-size images
  // as [n, C, H, W] (PyTorch's NCHW) instead of [n, H, W, C], as float32 converted as
  // torchvision's ToTensor + Normalize would and erased as the tail's RandomErasing would, in the
  // pass that writes the batch.
  py::object next(bool chw, py::object to_float, py::object erase) {
    const BatchFormat format = batch_format(chw, to_float, erase);
    if (format.erase && !format.floats) throw py::value_error("erase needs float batches");
    format.check();
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
    if (builder_.kind() == BatchKind::kImages) {
      const std::array<size_t, 4> s = builder_.shape(b.items.size(), format);
      py::array array = batch_array({py::ssize_t(s[0]), py::ssize_t(s[1]), py::ssize_t(s[2]), py::ssize_t(s[3])},
                                    builder_.floats(format));
      void* dst = array.mutable_data();
      {
        GrpcCall in_grpc;  // the ack is a call into gRPC
        builder_.gather(b, format, dst);
      }
      data = std::move(array);
    } else {
      data = item_objects(b);
    }
    return py::make_tuple(b.epoch, b.last_of_epoch, ids, labels, data);
  }

  void close() {
    GrpcCall in_grpc;
    job_->close();
  }

  double wait_seconds() const { return job_->wait_seconds(); }

 private:
  // A list of one object per item — an [h, w, 3] array (kOwnSize) or bytes (kRaw) — made here,
  // filled without the GIL (other Python threads run meanwhile; nobody else holds them before they
  // are returned).
  py::list item_objects(const Batch& b) {
    py::list items;
    std::vector<uint8_t*> dst;
    for (const ItemView& it : b.items) {
      if (builder_.kind() == BatchKind::kOwnSize) {
        py::array_t<uint8_t> a({py::ssize_t(it.height), py::ssize_t(it.width), py::ssize_t(3)});
        dst.push_back(a.mutable_data());
        items.append(std::move(a));
      } else {
        py::bytes bytes = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, py::ssize_t(it.size)));
        if (!bytes) throw py::error_already_set();
        dst.push_back(reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(bytes.ptr())));
        items.append(std::move(bytes));
      }
    }
    {
      GrpcCall in_grpc;
      builder_.copy_items(b, dst);
    }
    return items;
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
  BatchBuilder builder_;
  Batch batch_;
  std::vector<py::array> pooled_;
  std::vector<uint32_t> skipped_;  // told by the daemon, not yet taken by take_skipped()
};

// The batch of images a Python pipeline gave (uint8 [n, H, W, 3], any strides of whole images)
// written into dst: [n, 3, H, W] with chw, else [n, H, W, 3]; float32 when to_float is not None
// (the gather's arithmetic, client/layout.h), else uint8. On up to `threads` threads, GIL released.
void convert_python_images(py::array_t<uint8_t, py::array::c_style> src, py::array dst, bool chw, py::object to_float,
                           unsigned threads, py::object erase, uint64_t seed, uint32_t epoch,
                           std::vector<uint32_t> ids) {
  const BatchFormat format = batch_format(chw, to_float, erase);
  if (format.erase && (!format.floats || ids.size() != size_t(src.shape(0)))) {
    throw py::value_error("erase needs float batches and an item id per image");
  }
  format.check();
  if (src.ndim() != 4 || src.shape(3) != 3) throw py::value_error("src must be uint8 [n, H, W, 3]");
  const py::ssize_t n = src.shape(0), h = src.shape(1), w = src.shape(2);
  const std::vector<py::ssize_t> want = chw ? std::vector<py::ssize_t>{n, 3, h, w} : std::vector<py::ssize_t>{n, h, w, 3};
  const bool dst_ok = (dst.flags() & py::array::c_style) && dst.writeable() && dst.ndim() == 4 &&
                      std::equal(want.begin(), want.end(), dst.shape()) &&
                      (format.floats ? py::isinstance<py::array_t<float>>(dst) : py::isinstance<py::array_t<uint8_t>>(dst));
  if (!dst_ok) throw py::value_error("dst must be a writeable C-contiguous array of the batch's shape and dtype");
  const uint8_t* in = src.data();
  void* out = dst.mutable_data();
  py::gil_scoped_release nogil;
  convert_images(in, size_t(n), uint32_t(h), uint32_t(w), format, out, threads, seed, epoch, ids);
}

// Before gRPC starts (at the first Client): what fork_prepare() needs, unless the user chose; and
// os.register_at_fork's hooks (joader/client.py), called with the GIL held.
void define_fork_hooks(py::module_& m) {
  setenv("GRPC_ENABLE_FORK_SUPPORT", "true", 0);
  setenv("GRPC_POLL_STRATEGY", "poll", 0);
  // Returns why the fork cannot carry gRPC ("": it can, and gRPC's threads are stopped until
  // fork_parent() or fork_child() restarts them).
  m.def("fork_prepare", [] {
    std::string obstacle = fork_obstacle();
    if (obstacle.empty()) grpc_prefork();
    return obstacle;
  });
  m.def("fork_parent", [] { grpc_postfork_parent(); });
  // In the child: never the parent's connections (fork_safety.h); gRPC restarted if fork_prepare()
  // stopped it (`carried`).
  m.def("fork_child", [](bool carried) {
    disconnect_inherited_daemon_sockets();
    if (carried) grpc_postfork_child();
  });
}

py::object add_dataset(Client& c, const std::string& name, const std::string& source, bool raw, uint32_t resize,
                       uint32_t crop, const std::string& on_error) {
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
}

std::unique_ptr<PyJob> open_job(Client& c, const std::string& dataset, const std::string& name,
                                std::vector<uint32_t> ids, uint32_t batch_size, uint32_t epochs, uint32_t prefetch,
                                bool drop_last, int64_t resume_epoch, std::vector<uint32_t> consumed,
                                std::vector<py::object> augment, uint64_t augment_seed, unsigned augment_threads,
                                std::vector<std::string> python_augment, bool ordered) {
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
  for (const AugmentOp& op : ops) o.augment.push_back(to_wire(op));
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
}

// A call of the client made with the GIL released (GrpcCall), its reply as a Python value.
template <typename Reply>
py::object reply_of(Client& c, Reply (Client::*call)()) {
  Reply reply;
  {
    GrpcCall in_grpc;
    reply = (c.*call)();
  }
  if constexpr (std::is_same_v<Reply, std::vector<v1::DatasetInfo>>) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : reply) out.push_back(to_json(d));
    return to_python(out);
  } else {
    return to_python(to_json(reply));
  }
}

void define_client(py::module_& m) {
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
      .def("add_dataset", &add_dataset)
      .def("list_datasets", [](Client& c) { return reply_of(c, &Client::list_datasets); })
      .def("status", [](Client& c) { return reply_of(c, &Client::status); })
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
      .def("open_job", &open_job, py::arg("dataset"), py::arg("name"), py::arg("ids"), py::arg("batch_size"),
           py::arg("epochs"), py::arg("prefetch"), py::arg("drop_last"), py::arg("resume_epoch"), py::arg("consumed"),
           py::arg("augment") = std::vector<py::object>{}, py::arg("augment_seed") = 0, py::arg("augment_threads") = 1,
           py::arg("python_augment") = std::vector<std::string>{}, py::arg("ordered") = false);
}

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
  define_fork_hooks(m);
  // The socket a Client without one uses: $JOADER_SOCKET, else the per-user default.
  m.def("default_socket_path", [] { return default_socket_path(); });
  m.def("check_augment",
        [](const std::vector<py::object>& augment) { return pipeline_output_size(checked_ops(augment)); });
  // The native op families (prep/ops/list.h), in kind order: (torchvision's class, the protocol's
  // field for its message, "keeps" | "fixes" | "resizes" the image's size).
  m.def("op_families", [] {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const OpFamily* f : op_families()) {
      const char* sizing = f->sizing == OpFamily::Sizing::kFixes ? "fixes"
                           : f->sizing == OpFamily::Sizing::kResizes ? "resizes" : "keeps";
      out.emplace_back(f->name, wire_field(AugmentOp::Kind(out.size())), sizing);
    }
    return out;
  });
  m.def("convert_images", &convert_python_images, py::arg("src"), py::arg("dst"), py::arg("chw"),
        py::arg("to_float") = py::none(), py::arg("threads") = 1, py::arg("erase") = py::none(), py::arg("seed") = 0,
        py::arg("epoch") = 0, py::arg("ids") = std::vector<uint32_t>{});
  py::module_ testing = m.def_submodule("testing", "hooks for joader's own tests");
  define_testing(testing);
  testing.def("calls_in_grpc", [] { return calls_in_grpc.load(); });
  py::class_<PyJob>(m, "Job")
      .def("next", &PyJob::next, py::arg("chw") = false, py::arg("to_float") = py::none(),
           py::arg("erase") = py::none())
      .def("take_skipped", &PyJob::take_skipped)
      .def("close", &PyJob::close)
      .def_property_readonly("info", &PyJob::info)
      .def_property_readonly("wait_seconds", &PyJob::wait_seconds);
  define_client(m);
}
