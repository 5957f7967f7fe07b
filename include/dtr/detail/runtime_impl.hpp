// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Out-of-line members of dtr::runtime: calls, rematerialization, eviction and the
//! lifetime of storages and recipes. Included by <dtr/runtime.hpp> only.
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
tensor runtime<B, H>::make_tensor(storage_t* s, std::size_t offset, std::size_t length) {
    auto* node = new detail::tensor_node{this, s, offset, length};
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
    using guard = basic_pin_guard<runtime, Writable>;
    using view_pointer = typename guard::pointer;
    const view_pointer base = s->ptr;
    return guard(*this, t, buffer_view<view_pointer>(base + node->offset, node->length));
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
void runtime<B, H>::unpin_guard(const tensor& t) noexcept {
    auto* s = static_cast<storage_t*>(t.node()->storage);
    --user_pins_;
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
    DTR_EXPECTS(!in_operator_, "constant() called from inside an operator");
    busy_scope busy(*this);
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
    storage_t* s = new_storage(bytes);
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
    DTR_EXPECTS(!in_operator_, "call() from inside an operator (operators must not call the runtime)");
    DTR_EXPECTS(inputs.size() < std::numeric_limits<std::uint32_t>::max() &&
                    outputs < std::numeric_limits<std::uint32_t>::max(),
                "too many inputs or outputs for one call");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const detail::tensor_node* node = inputs[i].node();
        if (node == nullptr || node->owner != static_cast<const detail::runtime_base*>(this))
            node_of(inputs[i], ("call input " + std::to_string(i)).c_str());
    }
    // Distinct storages among the mutated inputs: each gets one new version.
    std::vector<storage_t*> mutated_storages;
    for (std::uint32_t m : options.mutates) {
        DTR_EXPECTS(m < inputs.size(), "mutated input index " + std::to_string(m) +
                                           " out of range: the call has " +
                                           std::to_string(inputs.size()) + " inputs");
        auto* s = static_cast<storage_t*>(inputs[m].node()->storage);
        if (std::find(mutated_storages.begin(), mutated_storages.end(), s) == mutated_storages.end())
            mutated_storages.push_back(s);
    }
    if (options.cost) DTR_EXPECTS(*options.cost >= 0, "negative operator cost");

    busy_scope busy(*this);
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
            for (std::uint32_t m : options.mutates) {
                detail::tensor_node* tn = inputs[m].node();
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
                // use of its storage, as in the simulator.
                const edge_t& e = op.in[op.out[i].alias_input];
                storage_t* viewed = e.version >= 0 ? exec_versions_[e.version].target : e.storage;
                viewed->compute_cost += cost;
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
    if (remat && counters_.remat_cost > options_.remat_limit)
        throw thrashing("dtr: rematerialization cost " + std::to_string(counters_.remat_cost) +
                            " ns exceeds the limit of " + std::to_string(options_.remat_limit) +
                            " ns (runtime_options::remat_limit) while restoring operator #" +
                            std::to_string(op.id),
                        counters_.remat_cost);
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
                    "operator #" + std::to_string(op.id) +
                        " is not deterministic: output " + std::to_string(output) +
                        " is a different view than at its first run");
    } else {
        slot.alias_input = static_cast<std::int32_t>(input);
        slot.alias_offset = offset;
        slot.alias_length = length;
    }
    o.declared = true;
    o.alias = true;
}

// =====================================================================================
// residency: pins and rematerialization
// =====================================================================================

template <class B, class H>
void runtime<B, H>::touch_inputs(op_t& op) {
    for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
        storage_t* s = op.in[i].storage;
        s->accessed = clock_;
        hook_on_access(*s);
    }
}

template <class B, class H>
void runtime<B, H>::unpin_inputs(op_t& op) noexcept {
    for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
        edge_t& e = op.in[i];
        if (!e.pinned) continue;
        e.pinned = false;
        unpin(e.storage);
    }
}

template <class B, class H>
void runtime<B, H>::secure_inputs(op_t& root) {
    // Pins every input of `root`, rematerializing the evicted ones. A work stack replaces
    // recursion so that a chain of a million evicted storages needs no deep C++ stack.
    // Each frame first pins the inputs already resident (they cannot be lost while the
    // others are recomputed), then restores the evicted ones in order, pinning each as it
    // becomes resident: the order of the DTR simulator, so replays make the same choices.
    frames_.clear();
    frames_.push_back({&root, 0, false});
    try {
        for (;;) {
            frame& f = frames_.back();
            op_t* op = f.op;
            if (!f.started) {
                f.started = true;
                for (std::uint32_t i = 0; i < op->n_inputs; ++i) {
                    edge_t& e = op->in[i];
                    if (e.storage->is_resident) {
                        pin(e.storage);
                        e.pinned = true;
                    }
                }
            }
            while (f.next_input < op->n_inputs && op->in[f.next_input].pinned) ++f.next_input;
            if (f.next_input < op->n_inputs) {
                edge_t& e = op->in[f.next_input];
                if (e.storage->is_resident) { // restored meanwhile, e.g. as a sibling
                    pin(e.storage);
                    e.pinned = true;
                } else {
                    op_t* producer = e.storage->producer;
                    if (producer == nullptr)
                        throw logic_error("dtr: internal error: storage #" + std::to_string(e.storage->sid) +
                                          " is evicted without a recipe");
                    touch_inputs(*producer);
                    frames_.push_back({producer, 0, false}); // invalidates f
                }
                continue;
            }
            if (op == &root) break; // the caller runs it
            run(*op, true, std::nullopt);
            unpin_inputs(*op);
            frames_.pop_back();
            // A recomputed dependent may make a pending banishment safe.
            for (std::uint32_t i = 0; i < op->n_inputs; ++i)
                if (op->in[i].storage->banish_pending) enqueue(op->in[i].storage);
        }
    } catch (...) {
        for (const frame& f : frames_) unpin_inputs(*f.op);
        frames_.clear();
        throw;
    }
    frames_.clear();
}

template <class B, class H>
void runtime<B, H>::make_resident(storage_t* target) {
    if (target->is_resident) return;
    if (target->producer == nullptr) // only storages with a recipe are ever evicted
        throw logic_error("dtr: internal error: storage #" + std::to_string(target->sid) +
                          " is evicted without a recipe");
    op_t& op = *target->producer;
    touch_inputs(op);
    secure_inputs(op);
    try {
        run(op, true, std::nullopt);
    } catch (...) {
        unpin_inputs(op);
        throw;
    }
    unpin_inputs(op);
    for (std::uint32_t i = 0; i < op.n_inputs; ++i)
        if (op.in[i].storage->banish_pending) enqueue(op.in[i].storage);
}

template <class B, class H>
void runtime<B, H>::refresh_pool(storage_t* s) noexcept {
    const bool wanted = s->evictable();
    const bool member = s->pool_hook.is_linked();
    if (wanted && !member) {
        pool_.push_back(*s);
        hook_on_pool_insert(*s);
    } else if (!wanted && member) {
        pool_.erase(pool_.iterator_to(*s));
        hook_on_pool_erase(*s);
    }
}

// =====================================================================================
// memory and eviction
// =====================================================================================

template <class B, class H>
auto runtime<B, H>::allocate(std::size_t bytes) -> pointer {
    if (bytes > options_.budget) throw_out_of_memory(bytes, false);
    while (bytes > options_.budget - counters_.resident_bytes) {
        storage_t* victim = choose_victim();
        if (victim == nullptr) throw_out_of_memory(bytes, false);
        evict_storage(victim, false);
    }
    for (;;) {
        const pointer p = backend_.allocate(bytes);
        if (p != pointer{}) {
            counters_.resident_bytes += bytes;
            counters_.peak_resident_bytes = std::max(counters_.peak_resident_bytes, counters_.resident_bytes);
            ++counters_.allocations;
            counters_.bytes_allocated += bytes;
            return p;
        }
        // The budget allows it but the backend has no block (fragmentation, or a capacity
        // below the budget): keep evicting in heuristic order and retry.
        storage_t* victim = choose_victim();
        if (victim == nullptr) throw_out_of_memory(bytes, true);
        ++counters_.allocation_retries;
        evict_storage(victim, false);
    }
}

template <class B, class H>
void runtime<B, H>::free_memory(pointer p, std::size_t bytes) noexcept {
    backend_.deallocate(p, bytes);
    counters_.resident_bytes -= bytes;
}

template <class B, class H>
auto runtime<B, H>::choose_victim() -> storage_t* {
    if (pool_.empty()) return nullptr;
    // Scores read costs: fold in every measurement that has finished (never waits).
    if constexpr (deferred_costs<B>) collect_costs(cost_collection::ready);
    const auto start = std::chrono::steady_clock::now();
    const heuristic_context ctx = hctx();
    storage_t* best = nullptr;
    if constexpr (requires(H& h, pool_list& p, const heuristic_context& c) {
                      { h.choose(p, c) } -> std::convertible_to<storage_t*>;
                  }) {
        best = heuristic_.choose(pool_, ctx);
    } else {
        double best_score = std::numeric_limits<double>::infinity();
        for (storage_t& s : pool_) {
            const double score = static_cast<double>(heuristic_.score(s, ctx));
            ++counters_.heuristic_evaluations;
            // Last lowest wins and a zero score ends the scan: the DTR simulator's rule, so
            // that replays make the same choices.
            if (score <= best_score) {
                best_score = score;
                best = &s;
            }
            if (score == 0) break;
        }
        if (best == nullptr) best = &pool_.back(); // every score was NaN
    }
    ++counters_.victim_searches;
    counters_.victim_search_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
    return best;
}

template <class B, class H>
void runtime<B, H>::evict_storage(storage_t* s, bool eager) noexcept {
    free_memory(s->ptr, s->bytes);
    s->ptr = pointer{};
    s->is_resident = false;
    refresh_pool(s);
    hook_on_evict(*s);
    ++(eager ? counters_.eager_evictions : counters_.evictions);
}

template <class B, class H>
void runtime<B, H>::throw_out_of_memory(std::size_t bytes, bool backend_refused) const {
    out_of_memory::details d;
    d.requested = bytes;
    d.budget = options_.budget;
    d.resident = counters_.resident_bytes;
    std::size_t constants = 0, unrecipied = 0, pinned = 0;
    for (const storage_t& s : all_storages_) {
        if (!s.is_resident || s.evictable()) continue;
        d.pinned += s.bytes;
        ++d.pinned_storages;
        if (s.pins > 0)
            pinned += s.bytes;
        else if (s.is_constant)
            constants += s.bytes;
        else
            unrecipied += s.bytes;
    }
    // Buffers of the operator being run are resident but belong to no storage yet.
    const std::size_t in_flight = d.resident - std::min(d.resident, [&] {
                                      std::size_t sum = 0;
                                      for (const storage_t& s : all_storages_)
                                          if (s.is_resident) sum += s.bytes;
                                      return sum;
                                  }());
    std::ostringstream msg;
    msg << "dtr: out of memory: cannot allocate " << bytes << " bytes";
    if (exec_op_ != nullptr)
        msg << " for operator #" << exec_op_->id << (exec_remat_ ? " (rematerializing it)" : "");
    msg << " under a budget of " << d.budget << " bytes; " << d.resident << " bytes resident, of which "
        << d.pinned << " bytes in " << d.pinned_storages << " storages cannot be evicted (pinned: "
        << pinned << ", constants: " << constants << ", without a recipe: " << unrecipied
        << ") and " << in_flight << " bytes are buffers of the running operator";
    if (backend_refused)
        msg << "; the budget allows it but the backend has no block of that size";
    else
        msg << "; nothing evictable is left";
    if constexpr (reports_memory<B>) {
        // Tell fragmentation (free bytes enough, no block large enough) from exhaustion.
        if (const std::optional<memory_report> m = backend_.memory_info()) {
            d.largest_free = m->largest_free;
            d.free_total = m->free;
            const auto old_precision = msg.precision(3);
            msg << "; backend region of " << m->capacity << " bytes: " << m->free << " bytes free in "
                << m->free_blocks << (m->free_blocks == 1 ? " block" : " blocks")
                << ", largest free block " << m->largest_free << " bytes, fragmentation "
                << 100.0 * m->fragmentation() << "%";
            msg.precision(old_precision);
            // The region rounds requests up to its alignment (a zero-byte one takes a unit).
            const std::size_t a = std::max<std::size_t>(m->alignment, 1);
            const std::size_t need = bytes == 0 ? a : bytes + (a - bytes % a) % a;
            if (backend_refused && need >= bytes && m->free >= need)
                msg << " (the free bytes would hold the " << need
                    << " bytes needed, but no contiguous block does: fragmentation)";
        }
    }
    throw out_of_memory(msg.str(), d);
}

template <class B, class H>
void runtime<B, H>::set_budget(std::size_t bytes) {
    DTR_EXPECTS(!in_operator_, "set_budget() called from inside an operator");
    busy_scope busy(*this);
    const std::size_t old = options_.budget;
    options_.budget = bytes;
    while (counters_.resident_bytes > bytes) {
        storage_t* victim = choose_victim();
        if (victim == nullptr) {
            options_.budget = old;
            const std::size_t excess = counters_.resident_bytes - bytes;
            // Report against the requested budget: the excess could not be freed.
            out_of_memory::details d{};
            d.requested = excess;
            d.budget = bytes;
            d.resident = counters_.resident_bytes;
            throw out_of_memory("dtr: out of memory: cannot lower the budget to " + std::to_string(bytes) +
                                    " bytes: " + std::to_string(counters_.resident_bytes) +
                                    " bytes resident and nothing evictable is left (budget kept at " +
                                    std::to_string(old) + ")",
                                d);
        }
        evict_storage(victim, false);
    }
}

// =====================================================================================
// deferred costs
// =====================================================================================

template <class B, class H>
void runtime<B, H>::settle_costs() {
    DTR_EXPECTS(!in_operator_, "settle_costs() called from inside an operator");
    if constexpr (deferred_costs<B>) collect_costs(cost_collection::wait);
}

template <class B, class H>
void runtime<B, H>::collect_costs(cost_collection mode) {
    if constexpr (deferred_costs<B>) {
        backend_.collect_costs([this](cost_t actual) noexcept { apply_cost(actual); }, mode);
        // Drop the entries handed over; in steady state some are always in flight, so
        // waiting for the queue to empty would let it grow without bound.
        if (pending_head_ == pending_costs_.size()) {
            pending_costs_.clear();
            pending_head_ = 0;
        } else if (pending_head_ >= 64 && 2 * pending_head_ >= pending_costs_.size()) {
            pending_costs_.erase(pending_costs_.begin(),
                                 pending_costs_.begin() + static_cast<std::ptrdiff_t>(pending_head_));
            pending_head_ = 0;
        }
    }
}

template <class B, class H>
void runtime<B, H>::apply_cost(cost_t actual) noexcept {
    // More results than executions would break the protocol; never pair them with nothing.
    if (pending_head_ == pending_costs_.size()) return;
    const pending_cost p = pending_costs_[pending_head_++];
    if (!p.apply) return;
    const cost_t delta = actual - p.provisional;
    // Staleness is measured on the clock: a clock running backwards would make storages
    // used since look used in the future. An overestimate is kept on the clock only.
    if (delta > 0) clock_ += delta;
    (p.remat ? counters_.remat_cost : counters_.compute_cost) += delta;
    if (p.op == nullptr) return;
    p.op->cost += delta;
    p.op->for_each_product([&](storage_t& s) {
        // A heuristic that indexes the pool by cost sees the change as the storage leaving
        // and rejoining it, as when its pins change.
        const bool member = s.pool_hook.is_linked();
        if (member) hook_on_pool_erase(s);
        s.compute_cost += delta;
        if (member) hook_on_pool_insert(s);
    });
}

// =====================================================================================
// lifetime: release, collection, banishing
// =====================================================================================

template <class B, class H>
void runtime<B, H>::on_last_handle(storage_t* s) noexcept {
    hook_on_release(*s);
    if (s->consumers.empty()) {
        enqueue(s);
        return;
    }
    if (options_.dealloc == dealloc_policy::eager_evict) {
        if (s->evictable()) evict_storage(s, true);
    } else {
        s->banish_pending = true;
        if (s->evictable()) evict_storage(s, true);
        enqueue(s);
    }
}

template <class B, class H>
void runtime<B, H>::enqueue(storage_t* s) noexcept {
    if (s->queued) return;
    s->queued = true;
    examine_queue_.push_back(s);
}

template <class B, class H>
void runtime<B, H>::finish() noexcept {
    for (;;) {
        if (deferred_ != nullptr) {
            detail::tensor_node* node = deferred_;
            deferred_ = node->next_deferred;
            release_now(node);
            continue;
        }
        if (examine_queue_.empty()) break;
        storage_t* s = examine_queue_.back();
        examine_queue_.pop_back();
        s->queued = false;
        examine(s);
    }
}

template <class B, class H>
void runtime<B, H>::examine(storage_t* s) noexcept {
    if (s->pins != 0 || !s->tensors.empty()) return;
    if (s->consumers.empty()) {
        destroy_storage(s);
        return;
    }
    if (s->banish_pending && banish_safe(s)) banish(s);
}

template <class B, class H>
bool runtime<B, H>::banish_safe(const storage_t* s) const noexcept {
    for (const edge_t& e : s->consumers) {
        bool all_resident = true;
        e.op->for_each_product([&](const storage_t& child) { all_resident &= child.is_resident; });
        if (!all_resident) return false;
    }
    return true;
}

template <class B, class H>
void runtime<B, H>::banish(storage_t* s) noexcept {
    // Every dependent is resident: free s for good. The dependents lose their recipe (it
    // reads s) and so can no longer be evicted; those without handles are banished in turn
    // once they are safe.
    // s itself is freed when examined next: destroy_op() queues it, without dependents.
    while (!s->consumers.empty()) {
        op_t* op = s->consumers.front().op;
        op->for_each_product([&](storage_t& child) {
            child.producer = nullptr;
            refresh_pool(&child);
            if (child.tensors.empty()) {
                child.banish_pending = true;
                enqueue(&child);
            }
        });
        for (std::uint32_t i = 0; i < op->n_outputs; ++i) op->out[i].storage = nullptr;
        for (std::uint32_t k = 0; k < op->n_versions; ++k) op->ver[k].storage = nullptr;
        op->live = 0;
        destroy_op(op);
    }
    ++counters_.banishments;
}

template <class B, class H>
void runtime<B, H>::destroy_storage(storage_t* s) noexcept {
    if (s->is_resident) free_memory(s->ptr, s->bytes);
    s->is_resident = false;
    if (s->pool_hook.is_linked()) {
        pool_.erase(pool_.iterator_to(*s));
        hook_on_pool_erase(*s);
    }
    hook_on_destroy(*s);
    all_storages_.erase(all_storages_.iterator_to(*s));
    if (op_t* op = s->producer) {
        for (std::uint32_t i = 0; i < op->n_outputs; ++i)
            if (op->out[i].storage == s) op->out[i].storage = nullptr;
        for (std::uint32_t k = 0; k < op->n_versions; ++k)
            if (op->ver[k].storage == s) op->ver[k].storage = nullptr;
        if (--op->live == 0) destroy_op(op);
    }
    ++counters_.storages_freed;
    delete s;
}

template <class B, class H>
void runtime<B, H>::destroy_op(op_t* op) noexcept {
    if constexpr (deferred_costs<B>)
        for (std::size_t i = pending_head_; i < pending_costs_.size(); ++i)
            if (pending_costs_[i].op == op) pending_costs_[i].op = nullptr;
    for (std::uint32_t i = 0; i < op->n_inputs; ++i) {
        edge_t& e = op->in[i];
        if (!e.consumer_hook.is_linked()) continue;
        e.storage->consumers.erase(e.storage->consumers.iterator_to(e));
        enqueue(e.storage);
    }
    all_ops_.erase(all_ops_.iterator_to(*op));
    delete op; // may drop handles captured by the operator: deferred, we are busy
}

// =====================================================================================
// teardown and invariants
// =====================================================================================

template <class B, class H>
runtime<B, H>::~runtime() {
    busy_ = true;
    for (storage_t& s : all_storages_) {
        // Orphan the handles' tensors: they outlive us and free themselves.
        while (!s.tensors.empty()) {
            detail::tensor_node& tn = s.tensors.front();
            s.tensors.pop_front();
            tn.owner = nullptr;
            tn.storage = nullptr;
        }
        s.consumers.clear();
        if (s.is_resident) backend_.deallocate(s.ptr, s.bytes);
    }
    pool_.clear();
    // Handles dropped while deferred, and those captured by recipes, are orphans by now.
    while (deferred_ != nullptr) {
        detail::tensor_node* node = deferred_;
        deferred_ = node->next_deferred;
        delete node;
    }
    all_ops_.clear_and_dispose([](op_t* op) { delete op; });
    all_storages_.clear_and_dispose([](storage_t* s) { delete s; });
}

template <class B, class H>
void runtime<B, H>::check_invariants() const {
    auto fail = [](const std::string& what) { throw logic_error("dtr: invariant broken: " + what); };
    auto sid = [](const storage_t& s) { return "storage #" + std::to_string(s.sid); };
    std::size_t resident = 0, pool_members = 0, pins = 0;
    for (const storage_t& s : all_storages_) {
        if (s.is_resident) resident += s.bytes;
        if (s.pool_hook.is_linked() != s.evictable()) fail(sid(s) + ": pool membership disagrees with evictability");
        if (s.pool_hook.is_linked()) ++pool_members;
        pins += s.pins;
        if (!s.is_resident && s.producer == nullptr) fail(sid(s) + " is evicted but has no recipe");
        if (s.tensors.empty() && s.consumers.empty() && s.pins == 0) fail(sid(s) + " is garbage (no handle, no dependent) but alive");
        if (s.queued) fail(sid(s) + " is still queued at rest");
        if (s.banish_pending && options_.dealloc != dealloc_policy::banish) fail(sid(s) + " pending banishment under eager eviction");
        if (options_.dealloc == dealloc_policy::banish && s.tensors.empty() && !s.banish_pending)
            fail(sid(s) + " has no handle but is not pending banishment");
        for (const detail::tensor_node& tn : s.tensors) {
            if (tn.storage != &s || tn.owner != this) fail(sid(s) + ": a tensor points elsewhere");
            if (tn.offset > s.bytes || tn.length > s.bytes - tn.offset) fail(sid(s) + ": a tensor view exceeds it");
        }
        for (const edge_t& e : s.consumers)
            if (e.storage != &s || !e.op->all_hook.is_linked()) fail(sid(s) + ": a consumer edge is stale");
        if (const op_t* op = s.producer) {
            if (!op->all_hook.is_linked()) fail(sid(s) + ": its recipe is not alive");
            bool found = false;
            op->for_each_product([&](const storage_t& p) { found |= (&p == &s); });
            if (!found) fail(sid(s) + ": its recipe does not list it");
            for (std::uint32_t i = 0; i < op->n_inputs; ++i)
                if (!op->in[i].consumer_hook.is_linked()) fail(sid(s) + ": its recipe's inputs are unlinked");
        }
    }
    for (const op_t& op : all_ops_) {
        std::uint32_t live = 0;
        op.for_each_product([&](const storage_t& p) { live += (p.producer == &op); });
        if (live != op.live || live == 0) fail("operator #" + std::to_string(op.id) + ": live count " +
                                               std::to_string(op.live) + ", products " + std::to_string(live));
    }
    if (resident != counters_.resident_bytes)
        fail("resident bytes " + std::to_string(counters_.resident_bytes) + " but storages sum to " +
             std::to_string(resident));
    if (resident > options_.budget) fail("resident bytes exceed the budget");
    if (pool_members != pool_.size()) fail("pool size mismatch");
    if (pins != user_pins_) fail("pins at rest (" + std::to_string(pins) + ") differ from live pin guards (" +
                                 std::to_string(user_pins_) + ")");
}

} // namespace dtr
