// joader._native.testing: the test hooks of the per-item ops (src/python/testing.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace joader {

namespace py = pybind11;

// Defines the hooks in `m` (the module's "testing" submodule).
void define_testing(py::module_& m);

}  // namespace joader
