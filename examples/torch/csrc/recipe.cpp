// SPDX-License-Identifier: Apache-2.0
#include "recipe.hpp"

#include "bridge_key.hpp"
#include "errors.hpp"
#include "profile.hpp"

#include <dtr/error.hpp>

#include <c10/core/GradMode.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <string>

namespace dtr_torch {

//! A non-owning storage over runtime memory (inputs of a running operator).
c10::Storage borrowed_storage(const void* data, std::size_t bytes, c10::Device device) {
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                        c10::DataPtr(const_cast<void*>(data), device), nullptr, false);
}

//! A plain tensor with geometry `g` on `storage`.
at::Tensor tensor_on(const c10::Storage& storage, const geometry& g) {
    auto ks = c10::DispatchKeySet(c10::computeDispatchKey(g.dtype, at::kStrided, g.device));
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), ks,
                                                            c10::scalarTypeToTypeMeta(g.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(g.sizes, g.strides, g.offset);
    return t;
}

namespace {

//! Whether a value holds a defined tensor anywhere inside it.
bool holds_tensor(const c10::IValue& v) {
    if (v.isTensor()) return v.toTensor().defined();
    if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector())
            if (t.defined()) return true;
    } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef())
            if (holds_tensor(e)) return true;
    } else if (v.isTuple()) {
        const c10::ivalue::Tuple& tuple = v.toTupleRef();
        for (const c10::IValue& e : tuple.elements())
            if (holds_tensor(e)) return true;
    } else if (v.isGenericDict()) {
        const c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
        for (const auto& kv : dict)
            if (holds_tensor(kv.key()) || holds_tensor(kv.value())) return true;
    }
    return false;
}

} // namespace

void refuse_hidden_tensors(const std::string& op, const c10::IValue& v) {
    if (holds_tensor(v))
        unsupported(op + " returned a tensor inside a value of type " + v.tagKind() +
                    ": the bridge manages results of type Tensor, Tensor? and Tensor[]");
}

void fill_stack(std::vector<c10::IValue>& s, c10::ArrayRef<arg_slot> slots,
                c10::ArrayRef<tensor_arg> tensors, c10::ArrayRef<c10::Storage> storages) {
    auto make = [&](int32_t k) -> at::Tensor {
        const tensor_arg& ta = tensors[static_cast<std::size_t>(k)];
        return tensor_on(storages[ta.input], ta.geom);
    };
    for (const arg_slot& a : slots) {
        switch (a.kind) {
            case arg_slot::tensor:
            case arg_slot::optional_tensor:
                if (a.tensors[0] >= 0) s[a.stack_index] = make(a.tensors[0]);
                break;
            case arg_slot::tensor_list: {
                c10::List<at::Tensor> l;
                l.reserve(a.tensors.size());
                for (int32_t k : a.tensors) l.push_back(make(k));
                s[a.stack_index] = std::move(l);
                break;
            }
            case arg_slot::optional_tensor_list: {
                c10::List<c10::optional<at::Tensor>> l;
                l.reserve(a.tensors.size());
                for (int32_t k : a.tensors)
                    l.push_back(k >= 0 ? c10::optional<at::Tensor>(make(k)) : c10::nullopt);
                s[a.stack_index] = std::move(l);
                break;
            }
        }
    }
}

void recipe::run(context_t& ctx) {
    scoped_ns run_timer{ctx.rematerializing() ? prof.remat_recipe_ns : prof.recipe_ns};
    plain_aten plain;

    const std::size_t n_in = ctx.num_inputs();
    c10::SmallVector<c10::Storage, 4> storages;
    storages.reserve(n_in);
    block_table& blocks = ctx.backend().table();
    for (std::size_t i = 0; i < n_in; ++i) {
        const void* data = nullptr;
        std::size_t bytes = 0;
        if (input_mutated[i]) {
            auto b = ctx.inout(i);
            data = b.data();
            bytes = b.size();
        } else {
            auto b = ctx.input(i);
            data = b.data();
            bytes = b.size();
        }
        // An adopted storage is PyTorch's too, and PyTorch can give it other memory without
        // an operator (untyped_storage().resize_(), as FullyShardedDataParallel does):
        // reading the block would read freed memory.
        const auto it = blocks.blocks.find(data);
        if (it != blocks.blocks.end() && it->second.data_ptr().get() != data)
            unsupported(op->schema().name() +
                        " reads a tensor the runtime adopted that was given other memory "
                        "outside the dispatcher (untyped_storage().resize_() or set_; "
                        "FullyShardedDataParallel frees and reallocates its parameters this "
                        "way)");
        // An input the operator only reads runs on its block's own storage (no storage made
        // per argument and run); one it writes on a borrowed, non-resizable one, so that a
        // kernel that resizes its output argument fails instead of moving the block.
        if (!input_mutated[i] && it != blocks.blocks.end())
            storages.push_back(it->second);
        else
            storages.push_back(borrowed_storage(data, bytes, blocks.device));
    }
    std::vector<c10::IValue> s = stack;
    fill_stack(s, slots, tensors, storages);

    // Random operators see the generator state of their first run every time they run; a
    // rematerialization leaves the generator as it found it, and so does a first run that
    // fails (the retry then draws the same numbers as plain PyTorch would).
    at::Tensor saved_state;
    if (generator) {
        saved_state = generator->get_state();
        if (ran) generator->set_state(rng_state);
    }
    struct restore {
        std::optional<at::Generator>& g;
        at::Tensor& state;
        bool keep = false;
        ~restore() {
            if (g && state.defined() && !keep) g->set_state(state);
        }
    } restore_rng{generator, saved_state};

    if (!ran) grad_mode = c10::GradMode::is_enabled();
    {
        c10::AutoGradMode same_grad_mode{grad_mode};
        scoped_ns all_kernels{prof.kernel_ns};
        scoped_ns these{ctx.rematerializing() ? prof.remat_kernel_ns : prof.recipe_kernel_ns};
        boxed_call(*op, &s, ctx.rematerializing(), zero_scratch);
    }

    if (!ran) {
        // The returns that are neither results nor written arguments (the schema's other
        // types: count_fresh_outputs refused those whose type can hold tensors), kept for the
        // call to hand back. A type that names no tensor but can be anything (Any, a type
        // variable) is checked by value: a tensor inside would leave unmanaged, outside the
        // budget, or be lost.
        const auto& rets = op->schema().returns();
        for (std::size_t i = 0; i < s.size() && i < rets.size(); ++i) {
            if (std::find(fresh_returns.begin(), fresh_returns.end(), i) != fresh_returns.end())
                continue;
            const c10::AliasInfo* alias = rets[i].alias_info();
            if (alias != nullptr && alias->isWrite()) continue;
            refuse_hidden_tensors(op->schema().name(), s[i]);
            if (s[i].isNone()) continue;
            if (other_returns.empty()) other_returns.resize(s.size());
            other_returns[i] = s[i];
        }
    }

    // Outputs, in return order; undefined results still occupy an (empty) output.
    block_table& table = ctx.backend().table();
    struct clear_pending {
        block_table& t;
        ~clear_pending() {
            t.has_pending = false;
            t.pending = c10::Storage();
        }
    } clear{table};
    std::size_t k = 0;
    std::size_t out_bytes = 0;
    c10::SmallVector<const c10::StorageImpl*, 2> produced;
    auto output = [&](const at::Tensor& r) {
        if (k >= n_outputs)
            unsupported(op->schema().name() + " returned more tensors than its arguments announce");
        if (!r.defined()) {
            if (ran && out_defined[k])
                throw dtr::logic_error("dtr_torch: " + op->schema().name() +
                                       " is not deterministic (an output became undefined)");
            ctx.output(k, 0);
            if (!ran) {
                out_geom.emplace_back();
                out_defined.push_back(0);
            }
            ++k;
            return;
        }
        if (r.layout() != at::kStrided || !r.has_storage())
            unsupported(op->schema().name() + " returned a tensor with layout " +
                        c10::str(r.layout()) + " (only strided tensors are managed)");
        const c10::StorageImpl* si = r.storage().unsafeGetStorageImpl();
        for (const c10::Storage& in : storages)
            if (in.unsafeGetStorageImpl() == si ||
                (in.nbytes() != 0 && in.data_ptr().get() == r.storage().data_ptr().get()))
                unsupported(op->schema().name() +
                            " returned a tensor sharing memory with an argument "
                            "although its schema declares a fresh result");
        for (const c10::StorageImpl* p : produced)
            if (p == si)
                unsupported(op->schema().name() + " returned two results sharing one storage");
        produced.push_back(si);
        geometry g = geometry::of(r);
        if (ran) {
            if (!(g == out_geom[k]) || !out_defined[k])
                throw dtr::logic_error(
                    "dtr_torch: " + op->schema().name() +
                    " is not deterministic: a rematerialized output has another geometry");
        } else {
            out_geom.push_back(std::move(g));
            out_defined.push_back(1);
        }
        table.pending = r.storage();
        table.has_pending = true;
        const std::size_t nbytes = r.storage().nbytes();
        ctx.output(k, nbytes);
        table.has_pending = false;
        table.pending = c10::Storage();
        out_bytes += nbytes;
        ++k;
    };
    for (std::size_t ret : fresh_returns) {
        c10::IValue& v = s[ret];
        if (v.isTensor()) {
            output(v.toTensor());
        } else if (v.isTensorList()) {
            for (const at::Tensor& r : v.toTensorVector()) output(r);
        } else if (v.isNone()) {
            output(at::Tensor());
        } else {
            unsupported(op->schema().name() + ": return " + std::to_string(ret) +
                        " is not a tensor");
        }
    }
    if (k != n_outputs)
        unsupported(op->schema().name() + " returned " + std::to_string(k) + " tensors, expected " +
                    std::to_string(n_outputs));
    if (!ran) {
        io_bytes = out_bytes;
        if (generator) {
            rng_state = saved_state;
            restore_rng.keep = true; // the first run advances the generator, as in plain PyTorch
        }
    }
    ran = true;
}

void recipe_op::operator()(context_t& ctx) const { r->run(ctx); }

} // namespace dtr_torch
