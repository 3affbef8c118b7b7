// joader._native.testing: hooks for the exactness and law tests of the per-item ops
// (tests/python/test_augment.py, test_autoaugment.py, test_training.py) and their benches: the
// C++ ops on a given image and parameters, and the parameters they draw, without a daemon.
#include "python/testing.h"

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "prep/augment.h"
#include "prep/autoaugment.h"
#include "prep/color.h"
#include "prep/erasing.h"
#include "python/py_convert.h"

namespace joader {
namespace {

// The protocol's Range in its JSON form.
py::dict range(double min, double max) {
  py::dict r;
  r["min"] = min;
  r["max"] = max;
  return r;
}

// One op of joader.augment's, checked: followed by a CenterCrop, as a pipeline must end in one size.
AugmentOp checked_op(const py::object& op) {
  py::dict size, crop;
  size["size"] = 1;
  crop["center_crop"] = size;
  return checked_ops({op, crop})[0];
}

}  // namespace

void define_testing(py::module_& m) {
  // For the law test of the tail's RandomErasing: n draws (erase, top, left, height, width) for
  // items 0..n-1 of (seed, epoch 0) on a width×height image.
  m.def("erasing_boxes", [](uint32_t width, uint32_t height, py::object erase_spec, uint64_t seed, size_t n) {
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

  m.def(
      "resized_crop",
      [](const HwcArray& hwc, int64_t top, int64_t left, int64_t height, int64_t width, uint32_t size, bool flip,
         int interpolation) {
        if (interpolation != 0 && interpolation != 2 && interpolation != 3)
          throw std::invalid_argument("interpolation");
        return array_of(resized_crop(image_of(hwc), CropBox{top, left, height, width}, size, flip,
                                     static_cast<Interpolation>(interpolation)));
      },
      py::arg("hwc"), py::arg("top"), py::arg("left"), py::arg("height"), py::arg("width"), py::arg("size"),
      py::arg("flip"), py::arg("interpolation") = 2);
  // A native pipeline (joader.augment's ops, checked) on one image: what one delivery of
  // `item` in `epoch` to a job with `seed` gets (augment()).
  m.def("augment",
        [](const HwcArray& hwc, const std::vector<py::object>& ops, uint64_t seed, uint32_t epoch, uint32_t item) {
          const std::vector<AugmentOp> checked = checked_ops(ops);
          const Image img = image_of(hwc);
          Image out;
          {
            py::gil_scoped_release nogil;
            out = augment(img, checked, seed, epoch, item);
          }
          return array_of(out);
        });
  // One colour adjustment of prep/color.h ("brightness", "contrast", "saturation", "hue").
  m.def("adjust", [](const HwcArray& hwc, const std::string& which, double factor) {
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
  m.def("image_op", [](const HwcArray& hwc, int op, double magnitude, int interpolation, std::array<uint8_t, 3> fill) {
    if (op < 0 || op >= kImageOpCount) throw std::invalid_argument("unknown op");
    Image img = image_of(hwc);
    {
      py::gil_scoped_release nogil;
      apply_image_op(img, static_cast<ImageOp>(op), magnitude, static_cast<Resample>(interpolation), fill);
    }
    return array_of(img);
  });
  // The ops an AutoAugment op (joader.augment's) applies to items 0..n-1 of (seed, epoch): per
  // item a list of (op code, magnitude).
  m.def("auto_augment_draws", [](const py::object& op, uint64_t seed, uint32_t epoch, uint32_t items) {
    const AugmentOp policy = checked_op(op);
    std::vector<std::vector<std::pair<int, double>>> out(items);
    for (uint32_t item = 0; item < items; ++item) {
      const std::vector<OpDraw> draws = draw_augment({policy}, 1, 1, seed, epoch, item);
      for (const AppliedOp& a : draws[0].applied) out[item].emplace_back(int(a.op), a.magnitude);
    }
    return out;
  });
  // RandomCrop's windows (top, left in the padded image) for items 0..n-1 of (seed, epoch 0) on a
  // width×height image: [n, 2]. `op` a RandomCrop op of joader.augment's.
  m.def("random_crop_draws",
        [](const py::object& random_crop, uint32_t width, uint32_t height, uint64_t seed, uint32_t items) {
          const AugmentOp op = checked_op(random_crop);
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
  // 0..n-1 of (seed, epoch) on a width×height image: [n, 6]. `op` a RandomAffine op of
  // joader.augment's.
  m.def("affine_draws",
        [](const py::object& affine, uint32_t width, uint32_t height, uint64_t seed, uint32_t epoch, uint32_t items) {
          const AugmentOp op = checked_op(affine);
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
  m.def("jitter_draws", [](std::vector<double> bounds, uint64_t seed, uint32_t epoch, uint32_t items) {
    if (bounds.size() != 8) throw std::invalid_argument("8 bounds");
    py::dict jitter, wire;
    const char* const properties[] = {"brightness", "contrast", "saturation", "hue"};
    for (int k = 0; k < 4; ++k) jitter[properties[k]] = range(bounds[2 * k], bounds[2 * k + 1]);
    wire["color_jitter"] = jitter;
    const AugmentOp op = checked_op(wire);
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
  m.def("draws", [](uint32_t width, uint32_t height, uint32_t size, std::pair<double, double> scale,
                    std::pair<double, double> ratio, double p, uint64_t seed, uint32_t epoch, uint32_t items) {
    py::dict crop, flip, crop_op, flip_op;
    crop["size"] = size;
    crop["scale"] = range(scale.first, scale.second);
    crop["ratio"] = range(ratio.first, ratio.second);
    crop_op["random_resized_crop"] = crop;
    flip["p"] = p;
    flip_op["random_horizontal_flip"] = flip;
    const std::vector<AugmentOp> ops = checked_ops({crop_op, flip_op});
    py::array_t<int64_t> out({py::ssize_t(items), py::ssize_t(5)});  // top, left, height, width, flip
    auto o = out.mutable_unchecked<2>();
    for (uint32_t item = 0; item < items; ++item) {
      const std::vector<OpDraw> d = draw_augment(ops, width, height, seed, epoch, item);
      o(item, 0) = d[0].box.top;
      o(item, 1) = d[0].box.left;
      o(item, 2) = d[0].box.height;
      o(item, 3) = d[0].box.width;
      o(item, 4) = d[1].flip;
    }
    return out;
  });
}

}  // namespace joader
