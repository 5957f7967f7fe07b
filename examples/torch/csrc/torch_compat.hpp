// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Every difference between the PyTorch releases the bridge builds against (Debian 12's
//! 1.13, Debian 13's 2.6, the GPU machines' 2.11), in one place.
//!
//! What changed, and how the bridge absorbs it:
//! - c10::Allocator: `allocate` is const in 1.x and non-const in 2.x, and 2.x adds a pure
//!   virtual `copy_data`. allocator_adapter declares the right one and forwards to
//!   `allocate_bytes`.
//! - 2.x makes compressed sparse layouts a per-backend functionality (bridge_runtime_keys).
//! - BackendSelect ignores the thread's included keys in 1.x (bridge_key.hpp excludes it).
//! - The backend bit the bridge's dispatch key uses (PrivateUse3) is the highest in 1.13 and
//!   second to Meta in 2.x: either way it outranks CPU and CUDA, which is what the fallback
//!   needs (docs/torch.md, "The call path").
//! - torch.distributed's libuv store is asked for by default in 2.4+ and absent from Debian's
//!   build: a Python-side matter (tests set USE_LIBUV=0), nothing here.
//! Everything else the bridge uses (the boxed dispatcher API, TensorImpl's shallow-copy hooks,
//! local dispatch key sets, generators, tags) is the same in all three.

#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/DispatchKey.h>
#include <torch/version.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <string>

namespace dtr_torch {

inline constexpr int torch_major = TORCH_VERSION_MAJOR;
inline constexpr int torch_minor = TORCH_VERSION_MINOR;

//! A c10::Allocator whose allocation is `allocate_bytes`, on every release.
class allocator_adapter : public c10::Allocator {
public:
#if TORCH_VERSION_MAJOR >= 2
    c10::DataPtr allocate(size_t n) override { return allocate_bytes(n); }
    //! Plain host memory (the bridge wraps the CPU allocator only).
    void copy_data(void* dest, const void* src, std::size_t count) const override {
        if (count != 0) std::memcpy(dest, src, count);
    }
#else
    c10::DataPtr allocate(size_t n) const override { return allocate_bytes(n); }
#endif

protected:
    virtual c10::DataPtr allocate_bytes(size_t n) const = 0;
};

//! The composite kernels that run below autograd, where the bridge's own key sits: an operator
//! with one of these would be decomposed there instead of reaching the bridge whole, so the
//! bridge registers its kernel for those operators by name (op_table::claim_composites).
inline constexpr std::array<c10::DispatchKey, 2> composite_explicit_keys{
    c10::DispatchKey::CompositeExplicitAutograd,
    c10::DispatchKey::CompositeExplicitAutogradNonFunctional};

//! The runtime keys of the bridge's backend bit: one per per-backend functionality (dense,
//! and the layouts that are refused with a clear error: sparse, quantized, nested, and in 2.x
//! compressed sparse). Without a kernel for each, an operator on a sparse tensor inside a
//! context would fail in the dispatcher, naming a key the user never asked for.
inline constexpr auto bridge_runtime_keys = std::array {
    c10::DispatchKey::PrivateUse3, c10::DispatchKey::SparsePrivateUse3,
        c10::DispatchKey::QuantizedPrivateUse3, c10::DispatchKey::NestedTensorPrivateUse3,
#if TORCH_VERSION_MAJOR >= 2
        c10::DispatchKey::SparseCsrPrivateUse3,
#endif
};

//! Whether an operator's CPU kernel may read scratch memory it never wrote, so that the bridge
//! zero-fills what the kernel allocates. PyTorch 2.x's oneDNN convolutions reorder weights into
//! a padded blocked layout without zeroing the padding (seen on 2.6 with oneDNN 3.7: the
//! padding meets zero-padded channels, 0 x garbage = 0, unless the garbage decodes as NaN or
//! Inf, which then spreads over the whole gradient). Plain PyTorch reads the same garbage; the
//! bridge's heap holds different garbage, so without this a run under the bridge could differ
//! from plain PyTorch, or compute NaN where plain PyTorch did not. 1.13's do not.
inline bool reads_uninitialized_scratch(const std::string& qualified_name) {
    return TORCH_VERSION_MAJOR >= 2 && qualified_name.find("convolution") != std::string::npos;
}

} // namespace dtr_torch
