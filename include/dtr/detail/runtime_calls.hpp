// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Out-of-line members of dtr::runtime: handles, pins, constants, calls and the execution of one operator. Included by <dtr/runtime.hpp> only.
#pragma once

#include <dtr/runtime.hpp>

#include <algorithm>
#include <sstream>

namespace dtr {

// =====================================================================================
// handles
// =====================================================================================

template <class B, class H>
detail::tensor_node* runtime<B, H>::node_of(const tensor& t, const char* what) const {
    detail::tensor_node* node = t.node();
    DTR_EXPECTS(node != nullptr, std::string(what) +
                                     ": empty tensor handle (default-constructed, moved-from "
                                     "or reset)");
    DTR_EXPECTS(node->owner != nullptr,
                std::string(what) + ": the tensor's runtime has been destroyed");
    DTR_EXPECTS(node->owner == static_cast<const detail::runtime_base*>(this),
                std::string(what) + ": the tensor belongs to another runtime");
    return node;
}

template <class B, class H>
void runtime<B, H>::reserve_tensor_nodes(std::size_t count) {
    spare_nodes_.reserve(count);
    while (spare_nodes_.size() < count) spare_nodes_.push_back(new detail::tensor_node{nullptr, nullptr, 0, 0});
}

template <class B, class H>
tensor runtime<B, H>::make_tensor(storage_t* s, std::size_t offset, std::size_t length) {
    reserve_tensor_nodes(1);
    detail::tensor_node* node = spare_nodes_.back();
    spare_nodes_.pop_back();
    *node = detail::tensor_node{this, s, offset, length};
    s->tensors.push_back(*node);
    return tensor(node);
}

template <class B, class H>
void runtime<B, H>::release_tensor(detail::tensor_node* node) noexcept {
    if (busy_) {
        // Inside an operation (an operator or a recipe's destructor dropped a handle): the
        // graph may be mid-update, so handle it when the operation finishes.
        node->next_deferred = deferred_;
        deferred_ = node;
        return;
    }
    busy_scope busy(*this);
    release_now(node);
}

template <class B, class H>
void runtime<B, H>::release_now(detail::tensor_node* node) noexcept {
    auto* s = static_cast<storage_t*>(node->storage);
    s->tensors.erase(s->tensors.iterator_to(*node));
    delete node;
    if (s->tensors.empty()) on_last_handle(s);
}

template <class B, class H>
tensor runtime<B, H>::view(const tensor& t, std::size_t offset, std::size_t length) {
    detail::tensor_node* node = node_of(t, "view");
    DTR_EXPECTS(!in_operator_, "view() called from inside an operator (operators must not call the "
                               "runtime; make the output a view with ctx.alias())");
    DTR_EXPECTS(offset <= node->length && length <= node->length - offset,
                "view [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") exceeds a tensor of " + std::to_string(node->length) + " bytes");
    return make_tensor(static_cast<storage_t*>(node->storage), node->offset + offset, length);
}

// =====================================================================================
// pins
// =====================================================================================

template <class B, class H>
template <bool Writable>
basic_pin_guard<runtime<B, H>, Writable> runtime<B, H>::pin_impl(const tensor& t) {
    detail::tensor_node* node = node_of(t, Writable ? "pin_for_write" : "pin");
    DTR_EXPECTS(!in_operator_, "pin() called from inside an operator");
    auto* s = static_cast<storage_t*>(node->storage);
    if constexpr (Writable) {
        DTR_EXPECTS(s->producer == nullptr && s->is_constant,
                    "pin_for_write: storage #" + std::to_string(s->sid) +
                        " is computed by an operator; writing it would make recomputation "
                        "disagree with it (update values with mutate())");
        DTR_EXPECTS(s->consumers.empty(),
                    "pin_for_write: constant storage #" + std::to_string(s->sid) + " is already read by " +
                        std::to_string(s->consumers.size()) +
                        " operator record(s) that may recompute from its current bytes "
                        "(update it with mutate())");
    }
    busy_scope busy(*this);
    s->accessed = clock_;
    hook_on_access(*s);
    make_resident(s);
    pin(s);
    ++user_pins_;
    if constexpr (Writable) ++s->write_guards;
    using guard = basic_pin_guard<runtime, Writable>;
    using view_pointer = typename guard::pointer;
    const view_pointer base = s->ptr;
    return guard(*this, t, s, buffer_view<view_pointer>(base + node->offset, node->length));
}

template <class B, class H>
auto runtime<B, H>::pin(const tensor& t) -> read_guard {
    return pin_impl<false>(t);
}

template <class B, class H>
auto runtime<B, H>::pin_for_write(const tensor& t) -> write_guard {
    return pin_impl<true>(t);
}

template <class B, class H>
void runtime<B, H>::unpin_guard(detail::storage_header* pinned, bool writable) noexcept {
    // The guard's own storage, not its handle's: a mutation may have moved the handle on.
    auto* s = static_cast<storage_t*>(pinned);
    --user_pins_;
    if (writable) --s->write_guards;
    busy_scope busy(*this);
    unpin(s);
}

template <class B, class H>
bool runtime<B, H>::evict(const tensor& t) {
    storage_t* s = storage_of(t);
    DTR_EXPECTS(!in_operator_, "evict() called from inside an operator");
    if (!s->evictable()) return false;
    busy_scope busy(*this);
    evict_storage(s, false);
    return true;
}

// =====================================================================================
// constants and calls
// =====================================================================================

template <class B, class H>
template <class Init>
tensor runtime<B, H>::constant(std::size_t bytes, Init&& init) {
    static_assert(std::invocable<Init&, buffer_view<pointer>>,
                  "dtr::runtime::constant: the initializer must be callable as "
                  "init(dtr::buffer_view<Backend::pointer>)");
    DTR_EXPECTS(!in_operator_, "constant() called from inside an operator");
    busy_scope busy(*this);
    // Everything that can fail happens before the runtime's state changes.
    reserve_tensor_nodes(1);
    auto record = std::unique_ptr<storage_t>(new_storage(bytes));
    const pointer p = allocate(bytes);
    try {
        in_operator_ = true;
        init(buffer_view<pointer>(p, bytes));
        in_operator_ = false;
    } catch (...) {
        in_operator_ = false;
        free_memory(p, bytes);
        throw;
    }
    storage_t* s = record.release();
    s->ptr = p;
    s->is_resident = true;
    s->is_constant = true;
    s->accessed = clock_;
    all_storages_.push_back(*s);
    hook_on_create(*s);
    return make_tensor(s, 0, bytes);
}

template <class B, class H>
template <class Op>
void runtime<B, H>::call_impl(Op&& op, std::span<const tensor> inputs, std::size_t outputs,
                              const call_options& options, tensor* results) {
    static_assert(std::invocable<std::decay_t<Op>&, context&>,
                  "dtr::runtime::call/call_n/mutate: the operator must be callable as "
                  "op(dtr::op_context<Backend>&) (take `auto& ctx` or the runtime's `context&`)");
    static_assert(std::move_constructible<std::decay_t<Op>>,
                  "dtr::runtime::call/call_n/mutate: the operator is kept as the recipe of its "
                  "outputs and must be move-constructible");
    DTR_EXPECTS(!in_operator_, "call() from inside an operator (operators must not call the runtime)");
    DTR_EXPECTS(inputs.size() < std::numeric_limits<std::uint32_t>::max() &&
                    outputs < std::numeric_limits<std::uint32_t>::max(),
                "too many inputs or outputs for one call");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const detail::tensor_node* node = inputs[i].node();
        if (node == nullptr || node->owner != static_cast<const detail::runtime_base*>(this))
            node_of(inputs[i], ("call input " + std::to_string(i)).c_str());
        const auto* s = static_cast<const storage_t*>(node->storage);
        DTR_EXPECTS(s->write_guards == 0,
                    "call input " + std::to_string(i) + ": constant storage #" + std::to_string(s->sid) +
                        " has a live write guard from pin_for_write(); release the guard before an "
                        "operator reads the constant (bytes written after an operator read them "
                        "would make its recomputation disagree with its first run)");
    }
    // Distinct storages among the mutated inputs: each gets one new version. The mutated
    // tensors are remembered now: the operator may reset the caller's handles while it runs.
    std::vector<storage_t*> mutated_storages;
    std::vector<detail::tensor_node*> mutated_nodes;
    if (options_.mutation == mutation_scope::tensor) mutated_nodes.reserve(options.mutates.size());
    for (std::uint32_t m : options.mutates) {
        DTR_EXPECTS(m < inputs.size(), "mutated input index " + std::to_string(m) +
                                           " out of range: the call has " +
                                           std::to_string(inputs.size()) + " inputs");
        auto* s = static_cast<storage_t*>(inputs[m].node()->storage);
        if (std::find(mutated_storages.begin(), mutated_storages.end(), s) == mutated_storages.end())
            mutated_storages.push_back(s);
        if (options_.mutation == mutation_scope::tensor) mutated_nodes.push_back(inputs[m].node());
    }
    if (options.cost) DTR_EXPECTS(*options.cost >= 0, "negative operator cost");

    busy_scope busy(*this);
    reserve_tensor_nodes(outputs); // handing out the outputs after the run cannot fail
    auto record = std::make_unique<op_t>(std::forward<Op>(op), next_op_id_++,
                                         static_cast<std::uint32_t>(inputs.size()),
                                         static_cast<std::uint32_t>(outputs),
                                         static_cast<std::uint32_t>(mutated_storages.size()));
    op_t& rec = *record;
    for (std::uint32_t i = 0; i < rec.n_inputs; ++i) {
        detail::tensor_node* tn = inputs[i].node();
        edge_t& e = rec.in[i];
        e.storage = static_cast<storage_t*>(tn->storage);
        e.op = &rec;
        e.offset = tn->offset;
        e.length = tn->length;
        const auto v = std::find(mutated_storages.begin(), mutated_storages.end(), e.storage);
        if (v != mutated_storages.end()) {
            e.version = static_cast<std::int32_t>(v - mutated_storages.begin());
            e.mutated = std::find(options.mutates.begin(), options.mutates.end(), i) !=
                        options.mutates.end();
        }
    }
    for (std::uint32_t k = 0; k < rec.n_versions; ++k)
        for (std::uint32_t i = 0; i < rec.n_inputs; ++i)
            if (rec.in[i].version == static_cast<std::int32_t>(k)) {
                rec.ver[k].input = i;
                break;
            }
    rec.cost_supplied = options.cost.has_value();

    touch_inputs(rec);
    secure_inputs(rec);
    try {
        run(rec, false, options.cost);
    } catch (...) {
        unpin_inputs(rec);
        throw;
    }

    // Committed: hand out the outputs, remember the recipe if anything needs it.
    for (std::uint32_t i = 0; i < rec.n_outputs; ++i) {
        const auto& slot = rec.out[i];
        if (slot.alias_input >= 0) {
            const edge_t& e = rec.in[slot.alias_input];
            storage_t* target = e.version >= 0 ? exec_versions_[e.version].target : e.storage;
            results[i] = make_tensor(target, e.offset + slot.alias_offset, slot.alias_length);
        } else {
            results[i] = make_tensor(slot.storage, 0, slot.bytes);
        }
    }
    // Copy out what rebinding needs before the record may go away.
    struct rebind {
        storage_t* old_version;
        storage_t* new_version;
    };
    std::vector<rebind> rebinds;
    rebinds.reserve(rec.n_versions);
    for (std::uint32_t k = 0; k < rec.n_versions; ++k)
        rebinds.push_back({rec.in[rec.ver[k].input].storage, exec_versions_[k].target});

    unpin_inputs(rec);
    if (rec.live > 0) {
        for (std::uint32_t i = 0; i < rec.n_inputs; ++i) rec.in[i].storage->consumers.push_back(rec.in[i]);
        all_ops_.push_back(*record.release());
    } else {
        record.reset();
    }

    // Move the mutated tensors to their new versions; old versions may lose their last handle.
    for (const rebind& r : rebinds) {
        if (options_.mutation == mutation_scope::storage) {
            while (!r.old_version->tensors.empty()) {
                detail::tensor_node& tn = r.old_version->tensors.front();
                r.old_version->tensors.pop_front();
                tn.storage = r.new_version;
                r.new_version->tensors.push_back(tn);
            }
        } else {
            // The nodes taken before the run: a handle the operator reset is empty now, but
            // its node (released at the end of this call) still views the old version.
            for (detail::tensor_node* tn : mutated_nodes) {
                if (tn->storage != r.old_version) continue; // already moved (listed twice)
                r.old_version->tensors.erase(r.old_version->tensors.iterator_to(*tn));
                tn->storage = r.new_version;
                r.new_version->tensors.push_back(*tn);
            }
        }
        if (r.old_version->tensors.empty()) on_last_handle(r.old_version);
    }
}

// =====================================================================================
// running an operator
// =====================================================================================

template <class B, class H>
void runtime<B, H>::run(op_t& op, bool remat, std::optional<cost_t> supplied) {
    if constexpr (deferred_costs<B>) {
        // Before anything changes, so that a device error surfacing here leaves no trace.
        collect_costs(cost_collection::routine);
        // The entry pushed after execute() must not fail to allocate.
        if (pending_costs_.size() == pending_costs_.capacity())
            pending_costs_.reserve(2 * pending_costs_.capacity() + 16);
    }
    exec_op_ = &op;
    exec_remat_ = remat;
    exec_outputs_.assign(op.n_outputs, output_state{});
    exec_versions_.assign(op.n_versions, version_state{});
    exec_bindings_.resize(op.n_inputs);
    cost_t measured = 0;
    try {
        // New versions of mutated storages: copy-on-write targets.
        for (std::uint32_t k = 0; k < op.n_versions; ++k) {
            const storage_t* old = op.in[op.ver[k].input].storage;
            version_state& v = exec_versions_[k];
            v.bytes = old->bytes;
            v.ptr = allocate(old->bytes);
            v.allocated = true;
            if (!remat) {
                v.target = new_storage(old->bytes);
                op.ver[k].storage = v.target;
            } else if (op.ver[k].storage != nullptr && !op.ver[k].storage->is_resident) {
                v.target = op.ver[k].storage;
            }
        }
        for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
            const edge_t& e = op.in[i];
            auto& b = exec_bindings_[i];
            b.size = e.length;
            b.mutated = e.mutated;
            if (e.version >= 0) {
                const pointer base = exec_versions_[e.version].ptr;
                b.writable = base + e.offset;
                b.data = b.writable;
            } else {
                b.writable = pointer{};
                b.data = e.storage->ptr + e.offset;
            }
        }
        context ctx(backend_, *this, exec_bindings_, op.n_outputs, remat);
        in_operator_ = true;
        measured = backend_.execute([&] {
            for (std::uint32_t k = 0; k < op.n_versions; ++k)
                backend_.copy(exec_versions_[k].ptr, op.in[op.ver[k].input].storage->ptr,
                              exec_versions_[k].bytes);
            op.fn(ctx);
        });
        // One entry per measurement the backend started, even if this run is discarded
        // below, so that the n-th cost handed over stays the n-th execute()'s.
        if constexpr (deferred_costs<B>) pending_costs_.push_back({nullptr, measured, remat, false});
        in_operator_ = false;
        for (std::uint32_t i = 0; i < op.n_outputs; ++i)
            DTR_EXPECTS(exec_outputs_[i].declared,
                        "operator #" + std::to_string(op.id) + " did not produce output " +
                            std::to_string(i) + " of " + std::to_string(op.n_outputs) +
                            " (each output needs ctx.output() or ctx.alias())");
    } catch (...) {
        in_operator_ = false;
        discard_execution(op, remat);
        throw;
    }

    const cost_t cost = !remat ? supplied.value_or(measured) : (op.cost_supplied ? op.cost : measured);
    if (!remat) op.cost = cost;
    clock_ += cost;
    if (remat) {
        ++counters_.rematerializations;
        counters_.remat_cost += cost;
    } else {
        ++counters_.operators_run;
        counters_.compute_cost += cost;
    }

    auto install = [&](storage_t* s, pointer p, bool rematerializable, bool constant) {
        s->ptr = p;
        s->is_resident = true;
        if (!remat) {
            s->compute_cost = cost;
            s->accessed = clock_;
            s->is_constant = constant;
            if (rematerializable) {
                s->producer = &op;
                ++op.live;
            }
            all_storages_.push_back(*s);
            hook_on_create(*s);
        } else {
            hook_on_rematerialize(*s);
        }
        refresh_pool(s);
    };
    for (std::uint32_t i = 0; i < op.n_outputs; ++i) {
        output_state& o = exec_outputs_[i];
        if (o.alias) {
            if (!remat) {
                // A view's operator counts towards its storage's cost, and the view is a
                // use of its storage, as in the simulator. The cost counts once per viewed
                // storage, however many outputs view it (split, chunk): the simulator sums
                // the distinct operators of a storage's tensors.
                const edge_t& e = op.in[op.out[i].alias_input];
                storage_t* viewed = e.version >= 0 ? exec_versions_[e.version].target : e.storage;
                bool counted = false;
                for (std::uint32_t j = 0; j < i && !counted; ++j) {
                    if (!exec_outputs_[j].alias) continue;
                    const edge_t& ej = op.in[op.out[j].alias_input];
                    counted = (ej.version >= 0 ? exec_versions_[ej.version].target : ej.storage) == viewed;
                }
                if (!counted) viewed->compute_cost += cost;
                viewed->accessed = clock_;
            }
        } else if (o.target != nullptr) {
            install(o.target, o.ptr, true, false);
        } else {
            free_memory(o.ptr, o.bytes); // recomputed output that was already resident (or gone)
        }
    }
    for (std::uint32_t k = 0; k < op.n_versions; ++k) {
        version_state& v = exec_versions_[k];
        if (v.target == nullptr) {
            free_memory(v.ptr, v.bytes);
            continue;
        }
        // A new version of a storage without a recipe (a parameter being updated) gets none
        // either, unless the options ask for it: recomputing it would pin every older version,
        // and their inputs, for as long as the chain of updates lives.
        const storage_t* old = op.in[op.ver[k].input].storage;
        const bool keeps_recipe = old->producer != nullptr ||
                                  (old->is_constant && options_.constant_updates == constant_update::rematerializable);
        if (!remat && !keeps_recipe) op.ver[k].storage = nullptr;
        install(v.target, v.ptr, keeps_recipe, old->is_constant && !keeps_recipe);
    }
    if constexpr (deferred_costs<B>) {
        // Only a measured cost is corrected later. The record is worth correcting only on a
        // first run that keeps it (live > 0; call_impl drops it otherwise).
        if (remat ? !op.cost_supplied : !supplied)
            pending_costs_.back() = {!remat && op.live > 0 ? &op : nullptr, measured, remat, true};
    }
    exec_op_ = nullptr;
    if (remat && counters_.remat_cost - remat_allowance_start_ > options_.remat_limit)
        throw thrashing("dtr: rematerialization cost " +
                            std::to_string(counters_.remat_cost - remat_allowance_start_) +
                            " ns exceeds the limit of " + std::to_string(options_.remat_limit) +
                            " ns (runtime_options::remat_limit) while restoring operator #" +
                            std::to_string(op.id) +
                            "; raise the budget (set_budget) or restart the allowance "
                            "(set_remat_limit) to go on",
                        counters_.remat_cost - remat_allowance_start_);
}

template <class B, class H>
void runtime<B, H>::discard_execution(op_t& op, bool remat) noexcept {
    for (std::uint32_t i = 0; i < op.n_outputs; ++i) {
        output_state& o = exec_outputs_[i];
        if (o.declared && !o.alias) free_memory(o.ptr, o.bytes);
        if (!remat && op.out[i].storage != nullptr) {
            delete op.out[i].storage;
            op.out[i].storage = nullptr;
        }
    }
    for (std::uint32_t k = 0; k < op.n_versions; ++k) {
        version_state& v = exec_versions_[k];
        if (v.allocated) free_memory(v.ptr, v.bytes);
        if (!remat && op.ver[k].storage != nullptr) {
            delete op.ver[k].storage;
            op.ver[k].storage = nullptr;
        }
    }
    exec_op_ = nullptr;
}

template <class B, class H>
auto runtime<B, H>::allocate_output(std::size_t index, std::size_t bytes) -> buffer_view<pointer> {
    op_t& op = *exec_op_;
    DTR_EXPECTS(index < op.n_outputs, "output index " + std::to_string(index) +
                                          " out of range: the call has " +
                                          std::to_string(op.n_outputs) + " outputs");
    output_state& o = exec_outputs_[index];
    DTR_EXPECTS(!o.declared, "output " + std::to_string(index) + " produced twice");
    auto& slot = op.out[index];
    storage_t* target = nullptr;
    if (exec_remat_) {
        DTR_EXPECTS(slot.alias_input < 0 && slot.bytes == bytes,
                    "operator #" + std::to_string(op.id) +
                        " is not deterministic: while rematerializing, output " +
                        std::to_string(index) + " asked for " + std::to_string(bytes) +
                        (slot.alias_input < 0 ? " bytes, its first run for " + std::to_string(slot.bytes)
                                              : " bytes, its first run made it a view"));
        if (slot.storage != nullptr && !slot.storage->is_resident) target = slot.storage;
    }
    const pointer p = allocate(bytes);
    if (!exec_remat_) {
        target = new_storage(bytes);
        slot.storage = target;
        slot.bytes = bytes;
    }
    o = {p, bytes, target, true, false};
    return {p, bytes};
}

template <class B, class H>
void runtime<B, H>::alias_output(std::size_t output, std::size_t input, std::size_t offset,
                                 std::size_t length) {
    op_t& op = *exec_op_;
    DTR_EXPECTS(output < op.n_outputs, "alias: output index " + std::to_string(output) +
                                           " out of range: the call has " +
                                           std::to_string(op.n_outputs) + " outputs");
    DTR_EXPECTS(input < op.n_inputs, "alias: input index " + std::to_string(input) +
                                         " out of range: the operator has " +
                                         std::to_string(op.n_inputs) + " inputs");
    const std::size_t length_in = op.in[input].length;
    DTR_EXPECTS(offset <= length_in && length <= length_in - offset,
                "alias: view [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") exceeds input " + std::to_string(input) + " of " + std::to_string(length_in) +
                    " bytes");
    output_state& o = exec_outputs_[output];
    DTR_EXPECTS(!o.declared, "output " + std::to_string(output) + " produced twice");
    auto& slot = op.out[output];
    if (exec_remat_) {
        DTR_EXPECTS(slot.alias_input == static_cast<std::int32_t>(input) &&
                        slot.alias_offset == offset && slot.alias_length == length,
                    "operator #" + std::to_string(op.id) + " is not deterministic: output " +
                        std::to_string(output) +
                        (slot.alias_input < 0 ? " is a view now, but its first run made it a fresh output"
                                              : " is a different view than at its first run"));
    } else {
        slot.alias_input = static_cast<std::int32_t>(input);
        slot.alias_offset = offset;
        slot.alias_length = length;
    }
    o.declared = true;
    o.alias = true;
}

} // namespace dtr
