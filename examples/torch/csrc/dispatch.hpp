// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The boxed kernel every operator reaches under the bridge (registered as the fallback
//! of the bridge's dispatch key, and by name for the composite operators).

#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace dtr_torch {

//! Sends the operator to the active bridge, or to the bridge of its managed tensors.
void bridge_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                     torch::jit::Stack* stack);

} // namespace dtr_torch
