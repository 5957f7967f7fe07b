// SPDX-License-Identifier: Apache-2.0
#include "managed_tensor.hpp"

#include "bridge.hpp"
#include "errors.hpp"

#include <c10/core/TensorOptions.h>

#include <utility>

namespace dtr_torch {

storage_ref::~storage_ref() {
    if (owner && handle) owner->release(std::move(handle), readers);
}

managed_tensor_impl::managed_tensor_impl(copy_tag, ref_ptr ref, c10::Storage storage,
                                         c10::DispatchKeySet keys, caffe2::TypeMeta dtype)
    : c10::TensorImpl(std::move(storage), keys, dtype), ref_(std::move(ref)) {}

managed_tensor_impl::managed_tensor_impl(ref_ptr ref, c10::DispatchKeySet keys, const geometry& g)
    : managed_tensor_impl(copy_tag{}, ref, ref->memoryless, keys,
                          c10::scalarTypeToTypeMeta(g.dtype)) {
    set_sizes_and_strides(g.sizes, g.strides, g.offset);
}

template <class Version>
c10::intrusive_ptr<c10::TensorImpl> managed_tensor_impl::copy_detached(
    Version&& version_counter, bool allow_tensor_metadata_change) const {
    auto impl =
        c10::make_intrusive<managed_tensor_impl>(copy_tag{}, ref_, storage_, key_set_, data_type_);
    copy_tensor_metadata(this, impl.get(), std::forward<Version>(version_counter),
                         allow_tensor_metadata_change);
    impl->refresh_numel();
    impl->refresh_contiguous();
    return impl;
}

c10::intrusive_ptr<c10::TensorImpl> managed_tensor_impl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
    return copy_detached(version_counter, allow_tensor_metadata_change);
}

c10::intrusive_ptr<c10::TensorImpl> managed_tensor_impl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
    return copy_detached(std::move(version_counter), allow_tensor_metadata_change);
}

void managed_tensor_impl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
    auto* other = dynamic_cast<managed_tensor_impl*>(impl.get());
    if (other == nullptr)
        unsupported(
            "assigning a plain tensor to a dtr_torch tensor's .data (assign the other way, or "
            "use copy_)");
    copy_tensor_metadata(other, this, version_counter(), allow_tensor_metadata_change());
    ref_ = other->ref_;
    refresh_numel();
    refresh_contiguous();
}

const char* managed_tensor_impl::tensorimpl_type_name() const {
    return "dtr_torch tensor (its bytes are a dtr runtime's storage; copy it out with "
           "dtr_torch.materialize)";
}

void foreign_tensor_with_managed_data() {
    unsupported(
        "a tensor from outside the runtime was given a dtr tensor's data (`tensor.data "
        "= t` or set_data, as FullyShardedDataParallel does with its flat parameters): "
        "its memory is not the value. Set .data outside the Runtime context; for "
        "data-parallel training under dtr use DistributedDataParallel");
}

c10::DispatchKeySet managed_keys(c10::Device device) {
    const c10::DispatchKey dense = c10::computeDispatchKey(c10::kFloat, c10::kStrided, device);
    return c10::DispatchKeySet(bridge_key) | c10::DispatchKeySet(dense) |
           c10::getAutocastRelatedKeySetFromBackend(c10::toBackendComponent(dense));
}

at::Tensor make_managed(ref_ptr ref, c10::DispatchKeySet keys, const geometry& g) {
    if (!ref->memoryless)
        ref->memoryless = c10::Storage(c10::Storage::use_byte_size_t(), ref->nbytes(),
                                       c10::DataPtr(nullptr, g.device), nullptr,
                                       /*resizable=*/false);
    return at::Tensor(c10::make_intrusive<managed_tensor_impl>(std::move(ref), keys, g));
}

} // namespace dtr_torch
