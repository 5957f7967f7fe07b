// SPDX-License-Identifier: Apache-2.0
//! How one operator runs under the bridge. The cases, in the order they are tried:
//! 1. in place on constants nothing reads (optimizer updates, gradient accumulation): the
//!    kernel runs on the constants' memory, as in plain PyTorch;
//! 2. in place on a computed storage, where the out-of-place form computes the same bytes into
//!    a fresh storage (relu_ -> relu): that form runs, and the reference moves to its result;
//! 3. views: no runtime call, the result shares the argument's storage;
//! 4. no tensor results (item, equal), or results of constants under no_grad (optimizer
//!    arithmetic): run on pinned inputs, results adopted as constants;
//! 5. everything else: one runtime call, whose recipe is the operator with its arguments.
//! Tensors on another device than the runtime's (a CPU scalar beside CUDA tensors, `.to("cpu")`)
//! are never managed: read by value, or the operator runs as it is.

#include "dispatch.hpp"

#include "bridge.hpp"
#include "bridge_key.hpp"
#include "errors.hpp"
#include "profile.hpp"
#include "recipe.hpp"
#include "view_cache.hpp"

#include <ATen/ATen.h>
#include <ATen/core/List.h>
#include <c10/core/GradMode.h>

#include <optional>
#include <string>
#include <utility>

namespace dtr_torch {
namespace {

bool is_optional_tensor(const c10::TypePtr& type) {
    return type->kind() == c10::TypeKind::OptionalType &&
           type->containedType(0)->kind() == c10::TypeKind::TensorType;
}

bool is_tensor_list(const c10::TypePtr& type) {
    return type->kind() == c10::TypeKind::ListType &&
           type->containedType(0)->kind() == c10::TypeKind::TensorType;
}

bool is_optional_tensor_list(const c10::TypePtr& type) {
    return type->kind() == c10::TypeKind::ListType && is_optional_tensor(type->containedType(0));
}

//! Whether a value of `type` can hold a tensor: a Tensor, or a container type whose elements,
//! keys or values can (Tensor?[], Tensor[][], Dict[str, Tensor], ...).
bool may_hold_tensors(const c10::TypePtr& type) {
    if (type->kind() == c10::TypeKind::TensorType) return true;
    for (const c10::TypePtr& t : type->containedTypes())
        if (may_hold_tensors(t)) return true;
    return false;
}

//! Calls `f` on every defined tensor in an argument value (nested lists included).
template <class F>
void for_each_tensor(const c10::IValue& v, F&& f) {
    if (v.isTensor()) {
        if (v.toTensor().defined()) f(v.toTensor());
    } else if (v.isTensorList()) {
        // (here and below: a vector, not a range over toTensorList(), whose proxy elements
        // GCC 14 takes for dangling references, -Wdangling-reference)
        for (const at::Tensor& t : v.toTensorVector())
            if (t.defined()) f(t);
    } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) for_each_tensor(e, f);
    }
}

//! The device an operator's `device` argument names, if it has one: where its results go.
//! Unset (None), it is the default device, the CPU, for an operator with no tensor argument
//! (a factory), and its tensors' device otherwise.
std::optional<c10::Device> device_argument(const c10::FunctionSchema& schema,
                                           const std::vector<c10::IValue>& args, bool has_tensors) {
    const auto& sargs = schema.arguments();
    for (std::size_t i = 0; i < sargs.size() && i < args.size(); ++i) {
        if (sargs[i].name() != "device") continue;
        if (args[i].isDevice()) return args[i].toDevice();
        if (!has_tensors) return c10::Device(c10::kCPU);
    }
    return std::nullopt;
}

} // namespace

void bridge_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    bridge* b = bridge::active();
    if (b == nullptr) {
        // Outside a context: the bridge of the operator's managed tensors (a loss used after
        // the with-block is still read through its runtime).
        const std::size_t n = op.schema().arguments().size();
        for (std::size_t i = stack->size() - n; b == nullptr && i < stack->size(); ++i)
            for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
                if (b == nullptr)
                    if (managed_tensor_impl* m = managed_impl(t)) b = m->ref()->owner.get();
            });
    }
    if (b == nullptr) {
        plain_aten plain;
        op.callBoxed(stack);
        return;
    }
    b->dispatch(op, stack);
}

//! One operator's dispatch through a bridge (see the file comment for the cases).
class dispatcher_call {
public:
    dispatcher_call(bridge& b, const op_info& info, std::vector<c10::IValue>* stack)
        : b_(b), info_(info), schema_(info.op->schema()), out_(stack) {
        const std::size_t n = schema_.arguments().size();
        args_.assign(std::make_move_iterator(stack->end() - static_cast<std::ptrdiff_t>(n)),
                     std::make_move_iterator(stack->end()));
        stack->erase(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
    }

    void run();

private:
    struct found_tensor {
        at::Tensor t;
        ref_ptr ref;
        int arg = -1; //!< schema argument index
    };

    void scan();
    std::uint32_t input_of(const ref_ptr& ref);
    int32_t take(const at::Tensor& t, int arg);
    bool passes_through() const;
    bool in_place_on_constants();
    bool out_of_place_rewrite();
    void view();
    view_results run_view();
    void push_views(const view_results& r);
    void inplace_view();
    bool unmanaged();
    bool eager();
    void recorded();
    std::size_t count_fresh_outputs();
    void push_stack(std::vector<c10::IValue>& results);

    bridge& b_;
    const op_info& info_;
    const c10::FunctionSchema& schema_;
    std::vector<c10::IValue>* out_;
    std::vector<c10::IValue> args_;  //!< as the caller passed them
    std::vector<c10::IValue> stack_; //!< the recipe's: tensor slots None, foreign tensors by value
    std::shared_ptr<recipe> r_ = std::make_shared<recipe>();
    // Inline for the common sizes, as in the recipe (recipe.hpp).
    c10::SmallVector<found_tensor, 3> found_;
    c10::SmallVector<ref_ptr, 3> inputs_; //!< distinct storages
    c10::SmallVector<std::uint8_t, 3> mutated_;
    bool writes_ = false;
    bool foreign_ = false;         //!< a tensor argument on another device
    bool foreign_written_ = false; //!< ... that the operator writes
    //! Per return: the tensors in a fresh Tensor[] result.
    c10::SmallVector<std::size_t, 2> list_lengths_;
    std::optional<std::size_t> n_out_; //!< count_fresh_outputs(), once counted
};

void bridge::dispatch(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack) {
    scoped_ns timer{prof.dispatch_ns};
    ++counters_.dispatched;
    const op_info& info = info_of(op);
    switch (info.kind) {
        case op_info::pass_through: {
            plain_aten plain;
            op.callBoxed(stack);
            return;
        }
        case op_info::collective:
        case op_info::functional_collective:
            run_collective(info, stack);
            return;
        default:
            break;
    }
    if (table_->park_released) update_dealloc();
    try {
        dispatcher_call(*this, info, stack).run();
    } catch (const dtr::out_of_memory& e) {
        raise_out_of_memory(info.name + ": " + e.what());
    } catch (const dtr::thrashing& e) {
        raise_thrashing(info.name + ": " + e.what());
    }
}

void dispatcher_call::run() {
    scan();
    if (passes_through()) {
        plain_aten plain;
        std::vector<c10::IValue> s = std::move(args_);
        info_.op->callBoxed(&s);
        push_stack(s);
        return;
    }
    if (in_place_on_constants() || out_of_place_rewrite()) return;
    if (info_.kind == op_info::detach_inplace) {
        out_->push_back(args_[0]);
        return;
    }
    if (info_.kind == op_info::resize)
        unsupported(info_.name +
                    " gives a tensor other memory in place (the runtime owns the memory of "
                    "its tensors); make a new tensor instead");
    if (info_.kind == op_info::inplace_view) {
        inplace_view();
        return;
    }
    if (info_.kind == op_info::view) {
        view();
        return;
    }
    if (unmanaged() || eager()) return;
    recorded();
}

std::uint32_t dispatcher_call::input_of(const ref_ptr& ref) {
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (inputs_[i].get() == ref.get()) return static_cast<std::uint32_t>(i);
    inputs_.push_back(ref);
    return static_cast<std::uint32_t>(inputs_.size() - 1);
}

int32_t dispatcher_call::take(const at::Tensor& t, int arg) {
    if (!t.defined()) return -1;
    ref_ptr ref;
    try {
        ref = b_.ref_of(t);
    } catch (const dtr::out_of_memory& e) {
        raise_out_of_memory(info_.name + ": adopting an argument as a constant: " + e.what());
    }
    r_->tensors.push_back({input_of(ref), geometry::of(t)});
    found_.push_back({t, std::move(ref), arg});
    return static_cast<int32_t>(r_->tensors.size() - 1);
}

void dispatcher_call::scan() {
    scoped_ns timer{prof.stack_ns};
    const auto& sargs = schema_.arguments();
    const c10::Device device = b_.device();
    // Which arguments the call writes (conditions such as batch norm's `training` evaluated).
    c10::SmallVector<std::uint8_t, 16> written_arg(sargs.size(), 0);
    for (auto [arg, cond] : info_.writes) {
        if (cond >= 0) {
            const c10::IValue& c = args_[static_cast<std::size_t>(cond)];
            if (!(c.isBool() && c.toBool())) continue;
        }
        written_arg[static_cast<std::size_t>(arg)] = 1;
    }
    // A tensor on another device is never managed: an argument the operator only reads is
    // recorded by value (a CPU scalar beside CUDA tensors); one it writes makes the call run
    // as it is (unmanaged()).
    auto foreign = [&](const at::Tensor& t, std::size_t i) {
        if (!t.defined() || managed_impl(t) != nullptr || t.device() == device) return false;
        foreign_ = true;
        if (written_arg[i]) foreign_written_ = true;
        return true;
    };
    stack_ = args_;
    for (std::size_t i = 0; i < sargs.size(); ++i) {
        c10::IValue& v = stack_[i];
        const int arg = static_cast<int>(i);
        if (v.isTensor()) {
            const at::Tensor& t = v.toTensor();
            if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number() &&
                managed_impl(t) == nullptr) {
                // A Python number ATen wrapped: part of the recorded arguments, by value.
                plain_aten plain;
                at::Tensor copy = t.clone();
                copy.unsafeGetTensorImpl()->set_wrapped_number(true);
                v = copy;
                continue;
            }
            if (foreign(t, i)) {
                if (!written_arg[i]) {
                    plain_aten plain;
                    v = t.clone();
                }
                continue;
            }
            arg_slot a{
                is_optional_tensor(sargs[i].type()) ? arg_slot::optional_tensor : arg_slot::tensor,
                i,
                {take(t, arg)}};
            r_->slots.push_back(std::move(a));
            v = c10::IValue();
        } else if (v.isTensorList()) {
            bool any_foreign = false;
            for (const at::Tensor& t : v.toTensorVector())
                any_foreign = foreign(t, i) || any_foreign;
            if (any_foreign) unsupported(info_.name + ": a tensor list mixing devices");
            arg_slot a{arg_slot::tensor_list, i, {}};
            for (const at::Tensor& t : v.toTensorVector()) a.tensors.push_back(take(t, arg));
            r_->slots.push_back(std::move(a));
            v = c10::IValue();
        } else if (v.isList() && is_optional_tensor_list(sargs[i].type())) {
            arg_slot a{arg_slot::optional_tensor_list, i, {}};
            for (const c10::IValue& e : v.toListRef()) {
                if (!e.isNone() && foreign(e.toTensor(), i))
                    unsupported(info_.name + ": a tensor list mixing devices");
                a.tensors.push_back(e.isNone() ? -1 : take(e.toTensor(), arg));
            }
            r_->slots.push_back(std::move(a));
            v = c10::IValue();
        }
    }
    mutated_.assign(inputs_.size(), 0);
    for (const found_tensor& f : found_)
        if (written_arg[static_cast<std::size_t>(f.arg)]) {
            mutated_[input_of(f.ref)] = 1;
            writes_ = true;
        }
}

bool dispatcher_call::passes_through() const {
    // Nothing of the runtime's device: tensors on another device only, or a factory for
    // another device (meta tensors, a CPU tensor made inside a CUDA runtime).
    if (!found_.empty()) return false;
    if (foreign_) return true;
    const std::optional<c10::Device> d = device_argument(schema_, args_, false);
    return d.has_value() && *d != b_.device();
}

void dispatcher_call::push_stack(std::vector<c10::IValue>& results) {
    for (c10::IValue& v : results) out_->push_back(std::move(v));
}

// ---- 1. in place, for real: constants nothing reads ---------------------------------------
// Copy-on-write keeps the old version for whatever may read it again. A constant (a parameter,
// optimizer state, a gradient, a buffer such as DistributedDataParallel's gradient buckets)
// that no live recipe reads can never be read again in its old version: the operator runs on
// its memory, as in plain PyTorch (no new version, no fresh buffer, the plain tensors and
// views sharing it see the update). Outside backward, under no_grad, a computed storage being
// updated is first made a constant (long-lived state).
bool dispatcher_call::in_place_on_constants() {
    if (!writes_ || b_.inplace_rewrite_disabled_ || info_.kind != op_info::compute) return false;
    const auto& rets = schema_.returns();
    for (std::size_t i = 0; i < rets.size(); ++i) {
        if (info_.return_alias[i] >= 0) continue;
        const auto kind = rets[i].type()->kind();
        if (kind == c10::TypeKind::TensorType || kind == c10::TypeKind::OptionalType ||
            kind == c10::TypeKind::ListType)
            return false; // fresh results: a runtime call
    }
    runtime_iface& rt = b_.rt();
    const bool state_update = !c10::GradMode::is_enabled() && !b_.in_backward_;
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (mutated_[i] && rt.is_rematerializable(inputs_[i]->handle) && !state_update)
            return false;
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (mutated_[i] && rt.is_rematerializable(inputs_[i]->handle)) b_.promote(inputs_[i]);
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (mutated_[i] && *inputs_[i]->readers != 0) return false;

    const bridge::pinned_inputs held = b_.pin_all(inputs_, mutated_);
    b_.note_operator_bytes(info_.name, inputs_, mutated_, 0, false);
    std::vector<c10::IValue> s = stack_;
    {
        plain_aten plain;
        fill_stack(s, r_->slots, r_->tensors, held.storages);
        scoped_ns kt{prof.kernel_ns};
        boxed_call(*info_.op, &s, false, info_.zero_scratch);
    }
    ++b_.counters_.inplace_direct;
    for (std::size_t i = 0; i < rets.size(); ++i)
        out_->push_back(info_.return_alias[i] >= 0
                            ? args_[static_cast<std::size_t>(info_.return_alias[i])]
                            : std::move(s[i]));
    return true;
}

// ---- 2. in place without a copy ---------------------------------------------------------
// A copy-on-write mutation copies the old version before the operator updates it. When the
// operator writes only `self`, `self` is the whole of a dense storage and no other argument
// shares it, its out-of-place form computes the same bytes straight into a fresh storage: the
// storage reference (and so every view of it, and the plain tensors sharing it) moves to that
// result, as a mutation would move it to the new version. Same memory, no copy.
bool dispatcher_call::out_of_place_rewrite() {
    if (!writes_ || !info_.functional || r_->slots.empty() || found_.empty() ||
        found_[0].arg != 0 || b_.inplace_rewrite_disabled_ || foreign_)
        return false;
    const found_tensor& self = found_[0];
    const at::Tensor& st = self.t;
    bool ok = mutated_[input_of(self.ref)] && st.is_contiguous() && st.storage_offset() == 0 &&
              static_cast<std::size_t>(st.numel()) * st.element_size() == self.ref->nbytes();
    for (std::size_t i = 1; ok && i < found_.size(); ++i)
        if (found_[i].ref.get() == self.ref.get() ||
            (found_[i].t.dim() > 0 && found_[i].t.scalar_type() != st.scalar_type()))
            ok = false;
    for (std::size_t i = 0; ok && i < inputs_.size(); ++i)
        if (mutated_[i] && inputs_[i].get() != self.ref.get()) ok = false;
    if (!ok) return false;
    runtime_iface& rt = b_.rt();
    const bool self_constant = !rt.is_rematerializable(self.ref->handle);
    const bool state_update = !c10::GradMode::is_enabled() && !b_.in_backward_;
    if (self_constant || state_update) {
        // the result must come out a constant: every input a constant, under no_grad
        if (!state_update) return false;
        if (!self_constant) b_.promote(self.ref);
        for (const ref_ptr& in : inputs_)
            if (rt.is_rematerializable(in->handle)) return false;
    }
    const op_info& f = *info_.functional;
    std::vector<c10::IValue> s = args_;
    dispatcher_call(b_, f, &s).run();
    const at::Tensor& o = s.back().toTensor();
    managed_tensor_impl* m = managed_impl(o);
    if (m == nullptr || o.sizes() != st.sizes() || o.strides() != st.strides() ||
        o.storage_offset() != 0 || o.scalar_type() != st.scalar_type() ||
        m->ref()->nbytes() != self.ref->nbytes())
        unsupported(info_.name + ": its out-of-place form " + f.name +
                    " produced another layout (report this: the rewrite's preconditions are "
                    "wrong)");
    const ref_ptr& oref = m->ref();
    if (self_constant && !b_.is_constant(oref))
        unsupported(info_.name + ": out-of-place form of a constant's update is not a constant");
    b_.release(std::exchange(self.ref->handle, oref->handle), self.ref->readers);
    self.ref->new_version();
    ++b_.counters_.inplace_rewrites;
    if (!self.ref->plains.empty()) b_.follow_mutation(self.ref);
    out_->push_back(args_[0]);
    return true;
}

// ---- 3. views: no runtime call, the result shares the argument's storage -------------------
// The result's geometry comes from running the view operator on memoryless storages, once per
// operator, argument geometry and other arguments; after that from the view cache
// (view_cache.hpp).
void dispatcher_call::view() {
    for (const arg_slot& a : r_->slots)
        if (a.kind == arg_slot::optional_tensor_list)
            unsupported(info_.name + ": a view operator with optional tensor lists");
    std::optional<std::string> key =
        view_cache::key_of(info_, stack_, r_->slots, r_->tensors, inputs_);
    view_cache& cache = view_cache::local();
    ++b_.counters_.views;
    if (key) {
        if (const view_results* hit = cache.find(*key)) {
            ++b_.counters_.view_cache_hits;
            push_views(*hit);
            return;
        }
    }
    view_results found = run_view();
    push_views(found);
    if (key) cache.insert(std::move(*key), std::move(found));
}

view_results dispatcher_call::run_view() {
    plain_aten plain;
    // Metadata-only storages (no memory) with the true sizes: views never read data.
    std::vector<c10::Storage> fake;
    fake.reserve(inputs_.size());
    for (const ref_ptr& in : inputs_)
        fake.push_back(borrowed_storage(nullptr, in->nbytes(), b_.device()));
    std::vector<c10::IValue> s = stack_;
    fill_stack(s, r_->slots, r_->tensors, fake);
    {
        scoped_ns kt{prof.kernel_ns};
        boxed_call(*info_.op, &s, false, info_.zero_scratch);
    }
    auto view_of = [&](const at::Tensor& t) -> view_results::view_of {
        if (!t.defined()) return {};
        if (t.is_conj() || t.is_neg())
            unsupported(info_.name + " produced a conjugate or negative view (complex views)");
        const c10::StorageImpl* si = t.storage().unsafeGetStorageImpl();
        for (std::size_t i = 0; i < fake.size(); ++i)
            if (fake[i].unsafeGetStorageImpl() == si)
                return {static_cast<int32_t>(i), geometry::of(t)};
        unsupported(info_.name + " is declared a view but returned a tensor on new memory");
    };
    view_results r;
    r.returns.reserve(s.size());
    for (const c10::IValue& v : s) {
        view_results::returned ret;
        if (v.isTensor()) {
            ret.tensors.push_back(view_of(v.toTensor()));
        } else if (v.isTensorList()) {
            ret.list = true;
            for (const at::Tensor& t : v.toTensorVector()) ret.tensors.push_back(view_of(t));
        } else {
            ret.other = v; // not a tensor (no view operator of ATen returns one): as it is
        }
        r.returns.push_back(std::move(ret));
    }
    return r;
}

void dispatcher_call::push_views(const view_results& r) {
    auto wrap = [&](const view_results::view_of& v) {
        return v.input < 0 ? at::Tensor() : b_.wrap(inputs_[v.input], v.geom);
    };
    for (const view_results::returned& ret : r.returns) {
        if (ret.other) {
            out_->push_back(*ret.other);
            continue;
        }
        if (!ret.list) {
            out_->push_back(wrap(ret.tensors.front()));
            continue;
        }
        c10::List<at::Tensor> l;
        l.reserve(ret.tensors.size());
        for (const view_results::view_of& v : ret.tensors) l.push_back(wrap(v));
        out_->push_back(std::move(l));
    }
}

// The new geometry comes from the operator run on a memoryless storage, as for a view; a
// managed tensor takes it (its storage stays), a plain one runs the operator as it is.
void dispatcher_call::inplace_view() {
    if (found_.empty() || found_[0].arg != 0)
        unsupported(info_.name + ": an in-place view without a tensor to change");
    const at::Tensor& self = found_[0].t;
    managed_tensor_impl* m = managed_impl(self);
    plain_aten plain;
    if (m == nullptr) {
        std::vector<c10::IValue> s = args_;
        info_.op->callBoxed(&s);
        out_->push_back(args_[0]);
        return;
    }
    std::vector<c10::Storage> fake;
    for (const ref_ptr& in : inputs_)
        fake.push_back(borrowed_storage(nullptr, in->nbytes(), b_.device()));
    std::vector<c10::IValue> s = stack_;
    fill_stack(s, r_->slots, r_->tensors, fake);
    const c10::IValue probe = s[0]; // the plain tensor the operator changes
    info_.op->callBoxed(&s);
    const geometry g = geometry::of(probe.toTensor());
    const bool allow = m->allow_tensor_metadata_change();
    m->set_allow_tensor_metadata_change(true);
    m->set_sizes_and_strides(g.sizes, g.strides, g.offset);
    m->set_allow_tensor_metadata_change(allow);
    out_->push_back(args_[0]);
}

// ---- tensors of another device ------------------------------------------------------------
// An operator that writes a tensor of another device, or makes its results on another device
// (`.to("cpu")` of a CUDA runtime's tensor), runs on pinned inputs as it is, outside the
// runtime: its results are plain tensors, as the caller asked for them.
bool dispatcher_call::unmanaged() {
    const std::optional<c10::Device> d = device_argument(schema_, args_, !found_.empty());
    if (!foreign_written_ && !(d.has_value() && *d != b_.device())) return false;
    if (writes_)
        unsupported(info_.name + " writes a tensor of the runtime and one of another device");
    const bridge::pinned_inputs held = b_.pin_all(inputs_);
    plain_aten plain;
    std::vector<c10::IValue> s = args_;
    // The runtime's tensors by plain tensors over their pinned memory; the others as passed.
    std::vector<c10::IValue> recipe_stack = stack_;
    fill_stack(recipe_stack, r_->slots, r_->tensors, held.storages);
    for (const arg_slot& a : r_->slots) s[a.stack_index] = recipe_stack[a.stack_index];
    {
        scoped_ns kt{prof.kernel_ns};
        boxed_call(*info_.op, &s, false, info_.zero_scratch);
    }
    push_stack(s);
    return true;
}

// ---- 4. no tensor results, or results of constants under no_grad ---------------------------
// Under no_grad, an operator whose inputs are all constants (optimizer arithmetic on
// parameters, gradients and state; factories) yields constants: run it at once and adopt its
// results, so that optimizer state never depends on a step's activations.
bool dispatcher_call::eager() {
    const std::size_t n_out = count_fresh_outputs();
    runtime_iface& rt = b_.rt();
    bool eager_constant = !writes_ && n_out > 0 && !c10::GradMode::is_enabled() && !b_.in_backward_;
    if (eager_constant)
        for (const ref_ptr& in : inputs_)
            if (rt.is_rematerializable(in->handle)) eager_constant = false;
    if (!((n_out == 0 && !writes_) || eager_constant)) return false;

    bridge::pinned_inputs held = b_.pin_all(inputs_);
    const std::vector<c10::Storage>& st = held.storages;
    std::vector<c10::IValue> s = stack_;
    {
        plain_aten plain;
        fill_stack(s, r_->slots, r_->tensors, st);
        scoped_ns kt{prof.kernel_ns};
        boxed_call(*info_.op, &s, false, info_.zero_scratch);
    }
    if (!eager_constant) {
        for (const c10::IValue& v : s) refuse_hidden_tensors(info_.name, v);
        push_stack(s);
        return true;
    }
    held.pins.clear();
    std::size_t out_bytes = 0; // the results, adopted one by one below
    auto constant_of = [&](const at::Tensor& t) -> at::Tensor {
        if (!t.defined()) return t;
        if (t.layout() != at::kStrided || !t.has_storage())
            unsupported(info_.name + " returned a tensor with layout " + c10::str(t.layout()));
        for (const c10::Storage& in : st)
            if (in.data_ptr().get() == t.storage().data_ptr().get() && in.nbytes() != 0)
                unsupported(info_.name + " returned a tensor sharing memory with an argument");
        auto ref = std::make_shared<storage_ref>();
        ref->owner = b_.shared_from_this();
        ref->handle = rt.adopt(t.storage()); // dtr::out_of_memory: bridge::dispatch reports it
        rt.allow_offload(ref->handle, true); // a new storage only the bridge holds
        ++b_.counters_.eager_constants;
        out_bytes += ref->nbytes();
        return b_.wrap(std::move(ref), geometry::of(t));
    };
    for (c10::IValue& v : s) {
        if (v.isTensor()) {
            out_->push_back(constant_of(v.toTensor()));
        } else if (v.isTensorList()) {
            c10::List<at::Tensor> l;
            for (const at::Tensor& t : v.toTensorVector()) l.push_back(constant_of(t));
            out_->push_back(std::move(l));
        } else {
            refuse_hidden_tensors(info_.name, v);
            out_->push_back(std::move(v));
        }
    }
    // Its results sat beside its inputs: the tier's bound counts them (Adam's sqrt and
    // division, a foreach optimizer's whole-list operators).
    b_.note_operator_bytes(info_.name, inputs_, mutated_, out_bytes, false);
    return true;
}

//! The operator's fresh tensor results (returns that are not a written argument), filling
//! r_->fresh_returns and list_lengths_. A Tensor[] result is as long as the first tensor-list
//! argument for the _foreach_ operators; for any other (unsafe_split, split_with_sizes_copy,
//! ...) its length follows from the arguments' sizes, found by running the operator on meta
//! tensors of the same geometry.
std::size_t dispatcher_call::count_fresh_outputs() {
    if (n_out_) return *n_out_;
    const auto& rets = schema_.returns();
    list_lengths_.assign(rets.size(), 0);
    r_->fresh_returns.clear();
    std::size_t n_out = 0;
    std::optional<std::vector<c10::IValue>> meta;
    for (std::size_t i = 0; i < rets.size(); ++i) {
        if (info_.return_alias[i] >= 0) continue; // returns a written argument
        const c10::TypePtr& type = rets[i].type();
        if (type->kind() == c10::TypeKind::TensorType || is_optional_tensor(type)) {
            r_->fresh_returns.push_back(i);
            ++n_out;
        } else if (is_tensor_list(type)) {
            std::size_t len = 0;
            if (info_.first_list_arg >= 0) {
                for (const found_tensor& f : found_)
                    if (f.arg == info_.first_list_arg) ++len;
            } else {
                if (!meta) {
                    meta = args_;
                    plain_aten plain;
                    for (c10::IValue& v : *meta) {
                        auto to_meta = [](const at::Tensor& t) {
                            return at::empty_strided(t.sizes(), t.strides(),
                                                     t.options().device(c10::kMeta));
                        };
                        if (v.isTensor() && v.toTensor().defined()) {
                            v = to_meta(v.toTensor());
                        } else if (v.isTensorList()) {
                            c10::List<at::Tensor> l;
                            for (const at::Tensor& t : v.toTensorVector()) l.push_back(to_meta(t));
                            v = std::move(l);
                        }
                    }
                    try {
                        info_.op->callBoxed(&*meta);
                    } catch (const std::exception& e) {
                        unsupported(info_.name +
                                    " returns a list of tensors whose length depends on values "
                                    "(its meta kernel: " +
                                    std::string(e.what()).substr(0, 200) + ")");
                    }
                }
                const c10::IValue& res = (*meta)[i];
                if (!res.isTensorList())
                    unsupported(info_.name + ": its meta kernel returned no tensor list");
                len = res.toTensorList().size();
            }
            r_->fresh_returns.push_back(i);
            list_lengths_[i] = len;
            n_out += len;
        } else if (may_hold_tensors(type)) {
            // Tensors the runtime would have to manage inside another structure: refused,
            // never handed out unmanaged or dropped.
            unsupported(info_.name + " returns " + type->str() +
                        ": the bridge manages results of type Tensor, Tensor? and Tensor[]");
        }
    }
    n_out_ = n_out;
    return n_out;
}

// ---- 5. a runtime call -------------------------------------------------------------------
void dispatcher_call::recorded() {
    runtime_iface& rt = b_.rt();
    // Long-lived state: an in-place update outside autograd (optimizer steps, running
    // statistics, manual updates under no_grad) of a computed storage first turns it into a
    // constant, so that state never chains back to the steps that produced it.
    if (writes_ && !c10::GradMode::is_enabled() && !b_.in_backward_)
        for (std::size_t i = 0; i < inputs_.size(); ++i)
            if (mutated_[i]) b_.promote(inputs_[i]);

    const std::size_t n_out = count_fresh_outputs();
    recipe& r = *r_;
    r.op = info_.op;
    for (const ref_ptr& in : inputs_) {
        ++*in->readers;
        r.reads.push_back(in->readers);
    }
    r.stack = std::move(stack_);
    r.input_mutated = mutated_;
    r.n_outputs = n_out;
    r.zero_scratch = info_.zero_scratch;
    if (info_.random) {
        at::Generator g;
        if (info_.generator_arg >= 0) {
            const c10::IValue& gv = r.stack[static_cast<std::size_t>(info_.generator_arg)];
            if (gv.isGenerator()) g = gv.toGenerator();
        }
        if (!g.defined()) g = at::globalContext().defaultGenerator(b_.device());
        r.generator = g;
    }
    c10::SmallVector<dtr::tensor, 4> in_handles;
    in_handles.reserve(inputs_.size());
    for (const ref_ptr& in : inputs_) in_handles.push_back(in->handle);
    std::vector<std::uint32_t> mutates;
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (mutated_[i]) mutates.push_back(static_cast<std::uint32_t>(i));

    std::optional<dtr::cost_t> cost;
    if (b_.deterministic_costs_) {
        // Reproducible runs (tests): a cost that depends on the program only, not on the
        // machine's timing: the bytes the operator reads, plus a constant per call.
        dtr::cost_t c = 4096;
        for (const ref_ptr& in : inputs_) c += static_cast<dtr::cost_t>(in->nbytes());
        cost = c;
    }
    if (b_.step_pending_) {
        b_.step_pending_ = false;
        rt.begin_step();
    }
    runtime_iface::outputs_t outs;
    {
        scoped_ns ct{prof.runtime_call_ns};
        outs = rt.call(recipe_op{r_}, {in_handles.data(), in_handles.size()}, n_out,
                       std::move(mutates), cost, info_.key);
    }
    ++b_.counters_.calls;
    b_.note_operator_bytes(info_.name, inputs_, mutated_, r.io_bytes, true);
    in_handles.clear();
    for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (mutated_[i]) {
            inputs_[i]->new_version();
            b_.follow_mutation(inputs_[i]);
        }

    // Results in the schema's return structure.
    std::size_t k = 0;
    auto fresh = [&]() -> at::Tensor {
        dtr::tensor h = std::move(outs[k]);
        const bool defined = r.out_defined[k];
        const geometry& g = r.out_geom[k];
        ++k;
        if (!defined) return at::Tensor();
        auto ref = std::make_shared<storage_ref>();
        ref->owner = b_.shared_from_this();
        ref->handle = std::move(h);
        return b_.wrap(std::move(ref), g);
    };
    const auto& rets = schema_.returns();
    for (std::size_t i = 0; i < rets.size(); ++i) {
        if (info_.return_alias[i] >= 0) {
            out_->push_back(args_[static_cast<std::size_t>(info_.return_alias[i])]);
        } else if (is_tensor_list(rets[i].type())) {
            c10::List<at::Tensor> l;
            l.reserve(list_lengths_[i]);
            for (std::size_t j = 0; j < list_lengths_[i]; ++j) l.push_back(fresh());
            out_->push_back(std::move(l));
        } else if (rets[i].type()->kind() == c10::TypeKind::TensorType ||
                   is_optional_tensor(rets[i].type())) {
            // An absent result: None for a `Tensor?`, an undefined tensor for a `Tensor`
            // (native_batch_norm_backward's unrequested gradients).
            at::Tensor t = fresh();
            out_->push_back(t.defined() || !is_optional_tensor(rets[i].type())
                                ? c10::IValue(std::move(t))
                                : c10::IValue());
        } else {
            // a value beside the tensors (an int, a float, a list of them), as the first run
            // returned it
            out_->push_back(i < r.other_returns.size() ? r.other_returns[i] : c10::IValue());
        }
    }
}

} // namespace dtr_torch
