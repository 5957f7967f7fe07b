// SPDX-License-Identifier: Apache-2.0
//! torch.distributed under the bridge.
//!
//! A collective (`c10d::allreduce_`, `broadcast_`, `allgather_`, ...: the process group's
//! operators, in 1.13 and 2.x alike) reads and writes its tensors' memory itself, possibly after
//! returning (its Work). Every tensor argument is treated as written: a managed tensor is first
//! made a constant version that no recipe reads (writable_alias: promoted if computed, copied if
//! a record still reads it), and the collective gets a plain tensor over that memory, which
//! stays resident (constants are never evicted, and this one may not leave for the host tier)
//! for as long as the Work may write it. Plain tensors (DistributedDataParallel's buckets) are
//! passed as they are, unless a live record reads them: the collective would change what a
//! rematerialization reads. Collectives are never recorded, so never recomputed.
//!
//! 2.x's functional collectives (`_c10d_functional::all_reduce`, `all_gather_into_tensor`,
//! `wait_tensor`, ...) return fresh tensors that the process group fills until
//! `wait_tensor`: their inputs are made constants as above, and their results are adopted as
//! constants that stay resident.

#include "bridge.hpp"
#include "bridge_key.hpp"
#include "errors.hpp"

#include <ATen/core/List.h>

#include <unordered_map>

namespace dtr_torch {
namespace {

//! The arguments of one collective call, managed tensors replaced by plain aliases.
class collective_arguments {
public:
    collective_arguments(bridge& b, const std::string& name) : b_(b), name_(name) {}

    c10::IValue plain(const c10::IValue& v) {
        if (v.isTensor()) return plain_tensor(v.toTensor());
        if (v.isTensorList()) {
            // by index: a range-for binds each element through c10::List's proxy reference
            const c10::List<at::Tensor> in = v.toTensorList();
            c10::List<at::Tensor> l;
            l.reserve(in.size());
            for (std::size_t i = 0; i < in.size(); ++i) l.push_back(plain_tensor(in.get(i)));
            return l;
        }
        if (v.isList()) { // Tensor[][] (allgather_, gather_, scatter_) and other lists
            c10::impl::GenericList l = v.toList().copy();
            for (std::size_t i = 0; i < l.size(); ++i) l.set(i, plain(l.get(i)));
            return l;
        }
        return v;
    }

    //! A result as the caller should see it: an alias made here is the caller's tensor again;
    //! a fresh tensor (a functional collective's result) is adopted as a constant.
    c10::IValue result(const c10::IValue& v, bool adopt_fresh) {
        if (v.isTensor()) return result_tensor(v.toTensor(), adopt_fresh);
        if (v.isTensorList()) {
            const c10::List<at::Tensor> in = v.toTensorList();
            c10::List<at::Tensor> l;
            l.reserve(in.size());
            for (std::size_t i = 0; i < in.size(); ++i)
                l.push_back(result_tensor(in.get(i), adopt_fresh));
            return l;
        }
        if (v.isList()) {
            c10::impl::GenericList l = v.toList().copy();
            for (std::size_t i = 0; i < l.size(); ++i) l.set(i, result(l.get(i), adopt_fresh));
            return l;
        }
        return v;
    }

private:
    at::Tensor plain_tensor(const at::Tensor& t) {
        if (!t.defined()) return t;
        if (managed_tensor_impl* m = managed_impl(t)) {
            if (m->ref()->owner.get() != &b_)
                unsupported("a collective on a tensor of another runtime");
            at::Tensor alias = b_.writable_alias(m->ref(), geometry::of(t));
            originals_.emplace(alias.unsafeGetTensorImpl(), t);
            return alias;
        }
        if (b_.reads_plain(t))
            unsupported(name_ +
                        " writes a tensor that recorded operators still read (their "
                        "recomputation would see the collective's result)");
        return t;
    }

    at::Tensor result_tensor(const at::Tensor& t, bool adopt_fresh) {
        if (!t.defined()) return t;
        if (auto it = originals_.find(t.unsafeGetTensorImpl()); it != originals_.end())
            return it->second;
        if (adopt_fresh && t.device() == b_.device() && managed_impl(t) == nullptr)
            return b_.adopt_result(t);
        return t;
    }

    bridge& b_;
    const std::string& name_;
    std::unordered_map<const c10::TensorImpl*, at::Tensor> originals_;
};

} // namespace

at::Tensor bridge::writable_alias(const ref_ptr& ref, const geometry& g) {
    if (rt_->is_rematerializable(ref->handle)) {
        promote(ref);
    } else if (*ref->readers != 0) {
        auto p = pin(ref->handle);
        dtr::tensor c;
        try {
            c = rt_->copy_constant(p->data, p->size);
        } catch (const dtr::out_of_memory& e) {
            raise_out_of_memory(std::string("a collective's buffer: ") + e.what());
        }
        p.reset();
        ref->handle = std::move(c);
        ref->new_version();
        ++counters_.promotions;
        if (!ref->plains.empty()) follow_mutation(ref);
    }
    // The process group holds the block and writes it: it must not move to the host tier
    // meanwhile, and a host copy of its old bytes is stale (pin_for_write drops it).
    rt_->allow_offload(ref->handle, false);
    auto p = pin(ref->handle, true);
    auto it = table_->blocks.find(p->data);
    if (it == table_->blocks.end())
        throw std::logic_error("dtr_torch: constant not in the block table");
    return tensor_on(it->second, g);
}

bool bridge::reads_plain(const at::Tensor& t) const {
    if (!t.has_storage()) return false;
    auto it = adopted_.find(t.storage().unsafeGetStorageImpl());
    if (it == adopted_.end()) return false;
    ref_ptr ref = it->second.lock();
    return ref && *ref->readers != 0;
}

at::Tensor bridge::adopt_result(const at::Tensor& t) {
    auto ref = std::make_shared<storage_ref>();
    ref->owner = shared_from_this();
    try {
        ref->handle = rt_->adopt(t.storage());
    } catch (const dtr::out_of_memory& e) {
        raise_out_of_memory(std::string("a collective's result: ") + e.what());
    }
    // filled by the process group until wait_tensor: resident, never offloaded
    rt_->allow_offload(ref->handle, false);
    return wrap(std::move(ref), geometry::of(t));
}

void bridge::run_collective(const op_info& info, std::vector<c10::IValue>* stack) {
    const std::size_t n = info.op->schema().arguments().size();
    collective_arguments converted(*this, info.name);
    std::vector<c10::IValue> s;
    s.reserve(n);
    for (std::size_t i = stack->size() - n; i < stack->size(); ++i)
        s.push_back(converted.plain((*stack)[i]));
    stack->erase(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
    {
        plain_aten plain;
        info.op->callBoxed(&s);
    }
    ++counters_.collectives;
    const bool functional = info.kind == op_info::functional_collective;
    for (const c10::IValue& v : s) stack->push_back(converted.result(v, functional));
}

} // namespace dtr_torch
