// SPDX-License-Identifier: Apache-2.0
// Python.h first, as CPython requires.
// clang-format off
#include <torch/csrc/python_headers.h>
// clang-format on

#include "errors.hpp"

#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>

#include <stdexcept>

namespace dtr_torch {
namespace {
PyObject* oom_type = nullptr;
PyObject* thrash_type = nullptr;

[[noreturn]] void raise_python(PyObject* type, PyObject* fallback, const std::string& message) {
    pybind11::gil_scoped_acquire gil;
    PyErr_SetString(type != nullptr ? type : fallback, message.c_str());
    python_error e;
    e.persist();
    throw e;
}
} // namespace

void set_error_types(void* out_of_memory_type, void* thrashing_type) {
    pybind11::gil_scoped_acquire gil;
    Py_XINCREF(static_cast<PyObject*>(out_of_memory_type));
    Py_XINCREF(static_cast<PyObject*>(thrashing_type));
    oom_type = static_cast<PyObject*>(out_of_memory_type);
    thrash_type = static_cast<PyObject*>(thrashing_type);
}

void raise_out_of_memory(const std::string& message) {
    raise_python(oom_type, PyExc_MemoryError, message);
}

void raise_thrashing(const std::string& message) {
    raise_python(thrash_type, PyExc_RuntimeError, message);
}

void unsupported(const std::string& what) {
    throw std::runtime_error("dtr_torch: unsupported: " + what);
}

} // namespace dtr_torch
