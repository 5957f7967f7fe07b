// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief How the bridge's failures reach Python: dtr_torch.OutOfMemoryError and
//! dtr_torch.ThrashingError (raised from C++, through the dispatcher and autograd, as PyTorch
//! raises its own), and RuntimeError("dtr_torch: unsupported: ...") for what the bridge cannot
//! express.

#pragma once

#include <string>

namespace dtr_torch {

//! The Python exception types (set once by the module; never released).
void set_error_types(void* out_of_memory_type, void* thrashing_type);

//! Throws the Python OutOfMemoryError with `message` (a python_error: PyTorch's bindings
//! restore it as they return to Python).
[[noreturn]] void raise_out_of_memory(const std::string& message);
//! Throws the Python ThrashingError with `message`.
[[noreturn]] void raise_thrashing(const std::string& message);
//! Throws std::runtime_error("dtr_torch: unsupported: " + what) (a RuntimeError in Python).
[[noreturn]] void unsupported(const std::string& what);

} // namespace dtr_torch
