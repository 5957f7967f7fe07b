// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The bridge's tensors: a TensorImpl with geometry and no memory, whose bytes are one
//! runtime storage (a storage_ref, shared by every view of it and by the plain tensors whose
//! storage the runtime adopted).

#pragma once

#include "bridge_key.hpp"
#include "recipe.hpp"

#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dtr_torch {

class bridge;

//! One runtime storage as PyTorch sees it.
struct storage_ref {
    std::shared_ptr<bridge> owner;
    dtr::tensor handle;
    //! Plain tensors sharing this storage (adopted); they follow mutations.
    std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> plains;
    const c10::StorageImpl* plain_key = nullptr;
    //! The adopted storage's memory when it was adopted: the runtime's block. PyTorch can give
    //! a storage other memory without an operator (`untyped_storage().resize_()`, as FSDP
    //! does); the bridge checks this before it trusts an adopted storage again.
    const void* plain_data = nullptr;
    //! Live recipes that read the current version (a new version gets a new count). A constant
    //! no recipe reads can be updated in place: nothing can ever need its old bytes.
    std::shared_ptr<std::size_t> readers = std::make_shared<std::size_t>(0);
    //! The storage every managed tensor of this reference carries: the right size, no memory
    //! (its data pointer is null), one per reference so that views of one runtime storage
    //! alias each other for PyTorch (Tensor.is_alias_of, DDP's bucket views) and others not.
    c10::Storage memoryless;

    void new_version() { readers = std::make_shared<std::size_t>(0); }
    std::size_t nbytes() const { return handle.size(); }

    storage_ref() = default;
    storage_ref(const storage_ref&) = delete;
    storage_ref& operator=(const storage_ref&) = delete;
    ~storage_ref();
};

using ref_ptr = std::shared_ptr<storage_ref>;

//! A managed tensor. PyTorch sees a strided tensor of the runtime's device with its sizes,
//! strides, offset and dtype, and a memoryless storage; its dispatch keys route every
//! operator on it to the bridge. Shallow copies (autograd's saved outputs, `.data`) keep the
//! reference.
class managed_tensor_impl final : public c10::TensorImpl {
public:
    managed_tensor_impl(ref_ptr ref, c10::DispatchKeySet keys, const geometry& g);

    const ref_ptr& ref() const noexcept { return ref_; }

    c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
        const c10::VariableVersion& version_counter,
        bool allow_tensor_metadata_change) const override;
    c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
        c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const override;
    //! `managed.data = other` (autograd's set_data): another managed tensor only.
    void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;

protected:
    const char* tensorimpl_type_name() const override;

private:
    struct copy_tag {};

public:
    //! For shallow copies only (the tag cannot be named outside the class).
    managed_tensor_impl(copy_tag, ref_ptr ref, c10::Storage storage, c10::DispatchKeySet keys,
                        caffe2::TypeMeta dtype);

private:
    template <class Version>
    c10::intrusive_ptr<c10::TensorImpl> copy_detached(Version&& version_counter,
                                                      bool allow_tensor_metadata_change) const;

    ref_ptr ref_;
};

//! The dispatch keys of managed tensors on `device`: the bridge's, the device's (so that
//! is_cuda and friends answer as for the device's tensors) and the device's autocast key.
c10::DispatchKeySet managed_keys(c10::Device device);

//! A managed tensor with geometry `g` on `ref`'s storage.
at::Tensor make_managed(ref_ptr ref, c10::DispatchKeySet keys, const geometry& g);

//! Throws the bridge's "unsupported" error for a tensor that carries the bridge's key without
//! being a managed tensor (see managed_impl).
[[noreturn]] void foreign_tensor_with_managed_data();

//! `t`'s managed implementation, or null for a plain tensor.
//! @throws std::runtime_error for a plain tensor given a managed tensor's data by
//! `tensor.data = managed` (set_data copies the managed tensor's keys and its memoryless
//! storage into the plain one; FSDP's flat parameters do it): its memory is not the value.
inline managed_tensor_impl* managed_impl(const at::Tensor& t) {
    if (!t.defined()) return nullptr;
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (!impl->key_set().has_backend(bridge_backend)) return nullptr;
    auto* m = dynamic_cast<managed_tensor_impl*>(impl);
    if (m == nullptr) foreign_tensor_with_managed_data();
    return m;
}

} // namespace dtr_torch
