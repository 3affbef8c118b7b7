// The Python binding's conversions between Python values and the C++ client's: images as NumPy
// arrays, a batch's format and a job's per-item pipeline as joader.Loader passes them. Errors are
// Python's ValueError for a malformed value, JoaderError INVALID_ARGUMENT (ClientError) for a
// value the pipeline's rules refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "client/batch_builder.h"
#include "prep/augment.h"
#include "prep/erasing.h"
#include "prep/image_prep.h"

namespace joader {

namespace py = pybind11;

using HwcArray = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

// An [H, W, 3] uint8 array as an Image, and back.
Image image_of(const HwcArray& hwc);
py::array_t<uint8_t> array_of(const Image& img);

// A tail's final RandomErasing: None, or (p, scale_min, scale_max, ratio_min, ratio_max, value)
// with value 3 floats (one per channel) or None for 'random'; checked (validate_erasing).
std::optional<ErasingOp> erasing_from(const py::object& spec);

// A batch's format: chw, and to_float None (uint8), () (x / 255) or (mean, std) (then
// normalised); erase as erasing_from's. Whether erase has the float batches it needs is the
// caller's to check (each says it in its own words), then BatchFormat::check.
BatchFormat batch_format(bool chw, const py::object& to_float, const py::object& erase);

// The ops of joader.augment's native pipeline, each the protocol's AugmentOp in its JSON form
// (common/augment_wire.h's wire_from_json) as a dict or a str, checked as a pipeline
// (validate_pipeline).
std::vector<AugmentOp> checked_ops(const std::vector<py::object>& augment);

}  // namespace joader
