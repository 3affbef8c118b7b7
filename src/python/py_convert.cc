#include "python/py_convert.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include <pybind11/stl.h>

#include "client/client.h"
#include "common/augment_wire.h"

namespace joader {
namespace {

ClientError invalid(const std::string& what) {
  return ClientError(grpc::StatusCode::INVALID_ARGUMENT, "augment: " + what);
}

}  // namespace

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
    throw invalid(e.what());
  }
  return op;
}

BatchFormat batch_format(bool chw, const py::object& to_float, const py::object& erase) {
  BatchFormat format;
  format.chw = chw;
  format.floats = !to_float.is_none();
  if (format.floats) {
    const py::tuple t = to_float.cast<py::tuple>();
    if (t.size() == 2) {
      const auto mean = t[0].cast<std::array<float, 3>>(), stdev = t[1].cast<std::array<float, 3>>();
      std::array<float, 6> norm;
      std::copy(mean.begin(), mean.end(), norm.begin());
      std::copy(stdev.begin(), stdev.end(), norm.begin() + 3);
      format.normalize = norm;
    } else if (t.size() != 0) {
      throw py::value_error("to_float must be () or (mean, std)");
    }
  }
  format.erase = erasing_from(erase);
  return format;
}

std::vector<AugmentOp> checked_ops(const std::vector<py::object>& augment) {
  const py::object dumps = py::module_::import("json").attr("dumps");
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  try {
    for (const py::object& op : augment) {
      *wire.Add() =
          wire_from_json(py::isinstance<py::str>(op) ? op.cast<std::string>() : dumps(op).cast<std::string>());
    }
    return from_wire(wire);
  } catch (const PrepError& e) {
    throw invalid(e.what());
  }
}

}  // namespace joader
