// joader._native: the Python binding of the C++ client (pybind11). Batches are gathered from the
// daemon's shared memory into one contiguous numpy array with the GIL released, then
// acknowledged at once, so Python code never holds arena memory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "client/client.h"
#include "client/report.h"
#include "prep/augment.h"

namespace py = pybind11;

namespace joader {
namespace {

// The dicts of client/report.h (the same fields as `joader status --json`), through Python's json.
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// One job; next() returns (epoch, last_of_epoch, ids, labels, data) or None at the end.
class PyJob {
 public:
  explicit PyJob(std::unique_ptr<Job> job) : job_(std::move(job)) {
    const v1::Registered& r = job_->registered();
    shape_ = {r.height(), r.width(), r.channels()};
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

  py::object next() {
    Batch b;
    bool more;
    {
      py::gil_scoped_release nogil;
      more = job_->next(&b);
    }
    if (!more) return py::none();
    const auto n = static_cast<py::ssize_t>(b.items.size());
    py::array_t<int64_t> ids(n), labels(n);
    auto id = ids.mutable_unchecked<1>();
    auto label = labels.mutable_unchecked<1>();
    for (py::ssize_t i = 0; i < n; ++i) {
      id(i) = b.items[i].id;
      label(i) = b.items[i].label;
    }
    py::object data;
    if (shape_[0] != 0) {
      const uint64_t item_bytes = uint64_t{shape_[0]} * shape_[1] * shape_[2];
      py::array_t<uint8_t> array({n, py::ssize_t(shape_[0]), py::ssize_t(shape_[1]), py::ssize_t(shape_[2])});
      uint8_t* dst = array.mutable_data();
      {
        py::gil_scoped_release nogil;
        for (const ItemView& it : b.items) {
          if (it.size != item_bytes) throw ClientError(13, "item size does not match the dataset's shape");
          std::memcpy(dst, it.data, it.size);
          dst += it.size;
        }
        job_->ack(b);
      }
      data = std::move(array);
    } else {  // raw bytes: one bytes object per item
      py::list items;
      for (const ItemView& it : b.items) items.append(py::bytes(reinterpret_cast<const char*>(it.data), it.size));
      job_->ack(b);
      data = std::move(items);
    }
    return py::make_tuple(b.epoch, b.last_of_epoch, ids, labels, data);
  }

  void close() {
    py::gil_scoped_release nogil;
    job_->close();
  }

 private:
  std::unique_ptr<Job> job_;
  std::array<uint32_t, 3> shape_;
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
    }
  });

  // For the exactness tests of per-job augmentation (tests/python/test_augment.py): the C++ ops
  // on a given image and box, and the parameters they draw, without a daemon.
  m.def("testing_resized_crop",
        [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> hwc, int64_t top, int64_t left,
           int64_t height, int64_t width, uint32_t size, bool flip) {
          if (hwc.ndim() != 3 || hwc.shape(2) != 3) throw std::invalid_argument("expected an [H, W, 3] uint8 array");
          Image img;
          img.height = static_cast<uint32_t>(hwc.shape(0));
          img.width = static_cast<uint32_t>(hwc.shape(1));
          img.rgb.assign(hwc.data(), hwc.data() + hwc.size());
          const Image out = resized_crop(img, CropBox{top, left, height, width}, size, flip);
          py::array_t<uint8_t> result({py::ssize_t(size), py::ssize_t(size), py::ssize_t(3)});
          std::memcpy(result.mutable_data(), out.rgb.data(), out.rgb.size());
          return result;
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
      .def("next", &PyJob::next)
      .def("close", &PyJob::close)
      .def_property_readonly("info", &PyJob::info);

  py::class_<Client>(m, "Client")
      .def(py::init([](const std::string& socket) { return std::make_unique<Client>(socket); }), py::arg("socket") = "")
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
               py::gil_scoped_release nogil;
               info = c.add_dataset(req);
             }
             return to_python(to_json(info));
           })
      .def("list_datasets",
           [](Client& c) {
             nlohmann::json out = nlohmann::json::array();
             for (const auto& d : c.list_datasets()) out.push_back(to_json(d));
             return to_python(out);
           })
      .def("remove_dataset", &Client::remove_dataset)
      .def("status", [](Client& c) { return to_python(to_json(c.status())); })
      .def(
          "open_job",
          [](Client& c, const std::string& dataset, const std::string& name, std::vector<uint32_t> ids,
             uint32_t batch_size, uint32_t epochs, uint32_t prefetch, bool drop_last, int64_t resume_epoch,
             std::vector<uint32_t> consumed) {
            JobOptions o;
            o.dataset = dataset;
            o.name = name;
            o.ids = std::move(ids);
            o.batch_size = batch_size;
            o.epochs = epochs;
            o.prefetch = prefetch;
            o.drop_last = drop_last;
            if (resume_epoch >= 0) {
              o.resume = true;
              o.resume_epoch = static_cast<uint32_t>(resume_epoch);
              o.resume_consumed = std::move(consumed);
            }
            std::unique_ptr<Job> job;
            {
              py::gil_scoped_release nogil;
              job = c.open_job(o);
            }
            return std::make_unique<PyJob>(std::move(job));
          },
          py::arg("dataset"), py::arg("name"), py::arg("ids"), py::arg("batch_size"), py::arg("epochs"),
          py::arg("prefetch"), py::arg("drop_last"), py::arg("resume_epoch"), py::arg("consumed"));
}
