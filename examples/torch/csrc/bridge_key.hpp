// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The dispatch key that routes ATen operators to the bridge, and the guard under which
//! the bridge calls ATen itself.
//!
//! The bridge's tensors carry the backend bit PrivateUse3 (beside their device's), and inside
//! a `Runtime` context the thread's local dispatch key set includes it, as PyTorch's own
//! dispatch modes include the Python key: every operator, on plain tensors too, reaches the
//! bridge's boxed fallback below autograd (docs/torch.md, "The call path"). A backend bit
//! outranks CPU and CUDA whichever tensors an operator mixes.

#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace dtr_torch {

inline constexpr c10::DispatchKey bridge_key = c10::DispatchKey::PrivateUse3;
inline constexpr c10::BackendComponent bridge_backend = c10::BackendComponent::PrivateUse3Bit;

//! Whether the calling thread's operators go to the bridge (a context is active on it).
inline bool bridge_included() {
    return c10::impl::tls_local_dispatch_key_set().included_.has(bridge_key);
}

//! Adds or removes the bridge's key from the calling thread's included keys. A per-backend key
//! is a functionality bit (Dense) and a backend bit; DispatchKeySet's subtraction keeps backend
//! bits, so removing it takes both off explicitly.
//!
//! BackendSelect is excluded meanwhile: it routes a factory (an operator without tensor
//! arguments: empty, zeros, arange) to the backend its device names, and in 1.x it does so
//! without the thread's included keys, so that factories, the zeros that derivative formulas
//! fill in place among them, would never reach the bridge. With it excluded a factory reaches
//! the bridge on every release, and the bridge calls it with BackendSelect back in place.
inline void set_bridge_included(bool on) {
    c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
    const c10::DispatchKeySet backend_select(c10::DispatchKey::BackendSelect);
    if (on) {
        local.included_ = local.included_ | c10::DispatchKeySet(bridge_key);
        local.excluded_ = local.excluded_ | backend_select;
    } else {
        local.included_ = (local.included_ - c10::DispatchKeySet(c10::DispatchKey::Dense))
                              .remove_backend(bridge_backend);
        local.excluded_ = local.excluded_ - backend_select;
    }
    c10::impl::_force_tls_local_dispatch_key_set(local);
}

//! ATen called directly, as the kernels underneath the bridge: not routed back to the bridge,
//! below autograd and its ADInplaceOrView handling (the runtime's recipes and copies are not
//! autograd's business), and below any Python dispatch mode (a recomputation is not the
//! user's operator call).
class plain_aten {
public:
    plain_aten() : was_included_(bridge_included()) {
        if (was_included_) set_bridge_included(false);
    }
    ~plain_aten() {
        if (was_included_) set_bridge_included(true);
    }
    plain_aten(const plain_aten&) = delete;
    plain_aten& operator=(const plain_aten&) = delete;

private:
    bool was_included_;
    c10::impl::ExcludeDispatchKeyGuard no_python_{
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
    at::AutoDispatchBelowADInplaceOrView below_autograd_;
};

} // namespace dtr_torch
