// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The execution of one operator: its record, the buffers of its run (outputs and
//! copy-on-write versions), what the running operator asks for through op_context, and
//! the commit of what it produced.
#pragma once

#include <dtr/buffer_view.hpp>
#include <dtr/cost_clock.hpp>
#include <dtr/counters.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/detail/duration_text.hpp>
#include <dtr/error.hpp>
#include <dtr/op_context.hpp>
#include <dtr/options.hpp>
#include <dtr/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dtr::detail {

//! @brief Runs operator records, first runs and recomputations alike; one at a time
//! (executions never nest). The running operator reaches it through op_context.
//!
//! @tparam Rt the runtime: its backend, options, counters, clock, memory, pool, cost queue,
//! release queue, handles and hooks.
template <class Rt, class Backend, class Meta>
class execution final : public executor<Backend>, collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::edge;
    using typename base::op;
    using typename base::storage;
    using pointer = typename Backend::pointer;

    explicit execution(Rt& rt) noexcept : base(rt) {}

    //! @brief The record of a call of `f` on `inputs`; `mutated` lists the distinct
    //! storages the call mutates (each gets one new version), in order of first mention.
    template <class F>
    typename op::ptr record(F&& f, std::span<const tensor> inputs, std::size_t outputs,
                            const call_options& options, std::span<storage* const> mutated);

    //! @brief Runs `o`, whose inputs are pinned: a first run (`remat` false, cost
    //! `supplied`, or measured and at most `ceiling`: runtime_options::repeat_costs) or a
    //! recomputation refilling its evicted products.
    //! Throws: whatever allocating, the operator or the backend throws; every buffer of the
    //! attempt is then freed and the inputs unpinned.
    //! (`supplied` by reference: copying a disengaged optional copies its uninitialized
    //! payload, which g++ 14 at -O3 reports as -Wmaybe-uninitialized through mutate().)
    void run(op& o, bool remat, const std::optional<cost_t>& supplied,
             cost_t ceiling = std::numeric_limits<cost_t>::infinity()) {
        try {
            execute(o, remat, supplied, ceiling);
        } catch (...) {
            rt_.unpin_inputs(o);
            throw;
        }
    }

    //! @brief After a first run of `record`: hands out its outputs into `results`,
    //! unpins its inputs, keeps the record if a product needs it, and moves the mutated
    //! tensors (`mutated_nodes` under mutation_scope::tensor) to their new versions.
    void commit(typename op::ptr record, tensor* results,
                std::span<tensor_node* const> mutated_nodes);

    [[nodiscard]] bool running() const noexcept { return op_ != nullptr; }
    [[nodiscard]] const op& running_op() const noexcept { return *op_; }
    [[nodiscard]] bool rematerializing() const noexcept { return remat_; }
    //! @brief Between a first run and its commit: the new version the run made of the k-th
    //! storage it mutates.
    [[nodiscard]] storage* version_target(std::uint32_t k) const noexcept {
        return versions_[k].target;
    }
    //! @brief Effects: takes `t`, time the runtime spent on its own work inside the running
    //! operator's body (evicting for its outputs), out of the operator's measured cost
    //! (dtr::cost_clock).
    void add_runtime_work(cost_t t) noexcept { runtime_work_ += t; }

    // op_context's calls into the run.
    buffer_view<pointer> allocate_output(std::size_t index, std::size_t bytes) override;
    void alias_output(std::size_t output, std::size_t input, std::size_t offset,
                      std::size_t length) override;

private:
    //! Buffers of the operator being run.
    struct output_state {
        pointer ptr{};
        std::size_t bytes = 0;
        storage* target = nullptr; //!< storage being (re)filled; null: scratch to discard
        bool declared = false;
        bool alias = false;
    };
    struct version_state {
        pointer ptr{};
        std::size_t bytes = 0;
        storage* target = nullptr;
        bool allocated = false; //!< `ptr` is this run's to free on failure
        bool reuse = false;     //!< written in the old version's block (no copy)
    };

    void execute(op& o, bool remat, const std::optional<cost_t>& supplied, cost_t ceiling);
    //! Throws dtr::logic_error unless `measured`, the cost the backend measured for `o`, is
    //! a finite number >= 0.
    void check_measured_cost(const op& o, cost_t measured) const;
    //! The buffers of the new versions of the storages `o` mutates: copy-on-write targets,
    //! or the old version's own block where runtime_options::in_place allows it. Throws:
    //! as allocating; the buffers taken so far are the caller's to free (discard).
    void prepare_versions(op& o, bool remat);
    //! Whether the new version of `old`, an input storage `o` mutates, may be written in
    //! old's own block (runtime_options::in_place).
    [[nodiscard]] bool may_reuse(const op& o, const storage& old) const noexcept;
    //! Hands the block of `old` to version `v`: old is evicted without freeing it.
    void take_block(storage* old, version_state& v) noexcept;
    void install(op& o, storage* s, pointer p, bool rematerializable, bool constant, cost_t cost);
    void discard(op& o, bool remat) noexcept;
    //! The storage input `e` reads in this run: the new version when the call mutates it.
    [[nodiscard]] storage* target_of(const edge& e) const noexcept {
        return e.version >= 0 ? versions_[e.version].target : e.storage;
    }

    using base::rt_;
    op* op_ = nullptr;
    bool remat_ = false;
    cost_t runtime_work_ = 0; //!< add_runtime_work() during the running operator's body
    std::vector<output_state> outputs_;
    std::vector<version_state> versions_;
    std::vector<input_binding<Backend>> bindings_;
};

template <class Rt, class Backend, class Meta>
template <class F>
auto execution<Rt, Backend, Meta>::record(F&& f, std::span<const tensor> inputs,
                                          std::size_t outputs, const call_options& options,
                                          std::span<storage* const> mutated) -> typename op::ptr {
    auto rec = rt_.graph_.new_op(std::forward<F>(f), static_cast<std::uint32_t>(inputs.size()),
                                 static_cast<std::uint32_t>(outputs),
                                 static_cast<std::uint32_t>(mutated.size()));
    for (std::uint32_t i = 0; i < rec->n_inputs; ++i) {
        const tensor_node* tn = Rt::node(inputs[i]);
        edge& e = rec->in[i];
        e.storage = static_cast<storage*>(tn->storage);
        e.op = rec.get();
        e.offset = tn->offset;
        e.length = tn->length;
        const auto v = std::find(mutated.begin(), mutated.end(), e.storage);
        if (v != mutated.end()) {
            e.version = static_cast<std::int32_t>(v - mutated.begin());
            e.mutated = std::find(options.mutates.begin(), options.mutates.end(), i) !=
                        options.mutates.end();
        }
    }
    for (std::uint32_t k = 0; k < rec->n_versions; ++k)
        for (std::uint32_t i = 0; i < rec->n_inputs; ++i)
            if (rec->in[i].version == static_cast<std::int32_t>(k)) {
                rec->ver[k].input = i;
                break;
            }
    rec->cost_supplied = options.cost.has_value();
    return rec;
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::execute(op& o, bool remat, const std::optional<cost_t>& supplied,
                                           cost_t ceiling) {
    if constexpr (deferred_costs<Backend>) rt_.costs_.prepare();
    op_ = &o;
    remat_ = remat;
    outputs_.assign(o.n_outputs, output_state{});
    versions_.assign(o.n_versions, version_state{});
    bindings_.resize(o.n_inputs);
    Backend& backend = rt_.backend_;
    cost_t measured = 0;
    try {
        if (o.n_versions != 0) prepare_versions(o, remat); // most calls mutate nothing
        for (std::uint32_t i = 0; i < o.n_inputs; ++i) {
            const edge& e = o.in[i];
            auto& b = bindings_[i];
            b.size = e.length;
            b.mutated = e.mutated;
            if (e.version >= 0) {
                const pointer base = versions_[e.version].ptr;
                b.writable = base + e.offset;
                b.data = b.writable;
            } else {
                b.writable = pointer{};
                b.data = e.storage->ptr + e.offset;
            }
        }
        op_context<Backend> ctx(backend, *this, bindings_, o.n_outputs, remat);
        rt_.offload_.wait_for_inputs(o); // copy-backs still in flight (offload)
        rt_.in_operator_ = true;
        runtime_work_ = 0;
        measured = backend.execute([&] {
            for (std::uint32_t k = 0; k < o.n_versions; ++k)
                if (!versions_[k].reuse)
                    backend.copy(versions_[k].ptr, o.in[o.ver[k].input].storage->ptr,
                                 versions_[k].bytes);
            o.fn(ctx);
        });
        // One entry per measurement the backend started, even if this run is discarded
        // below, so that the n-th cost handed over stays the n-th execute()'s.
        if constexpr (deferred_costs<Backend>) rt_.costs_.started(measured, remat);
        rt_.in_operator_ = false;
        for (std::uint32_t i = 0; i < o.n_outputs; ++i)
            DTR_EXPECTS(outputs_[i].declared,
                        "operator #" + std::to_string(o.id) + " did not produce output " +
                            std::to_string(i) + " of " + std::to_string(o.n_outputs) +
                            " (each output needs ctx.output() or ctx.alias())");
        // A measurement the run will record must be a duration: NaN or a negative cost
        // would make the clock and the costs the heuristics read meaningless, and the clock
        // run backwards. A supplied cost makes the measurement irrelevant.
        if (remat ? !o.cost_supplied : !supplied) check_measured_cost(o, measured);
    } catch (...) {
        rt_.in_operator_ = false;
        discard(o, remat);
        throw;
    }

    counters& stats = rt_.counters_;
    if constexpr (cost_clock<Backend>) {
        measured = std::max<cost_t>(measured - runtime_work_, 0);
        stats.runtime_work_in_operators += runtime_work_;
    }
    const cost_t cost = !remat ? supplied.value_or(std::min(measured, ceiling))
                               : (o.cost_supplied ? o.cost : measured);
    if (!remat) o.cost = cost;
    rt_.clock_ += cost;
    if (remat) {
        ++stats.rematerializations;
        stats.remat_cost += cost;
    } else {
        ++stats.operators_run;
        stats.compute_cost += cost;
    }

    for (std::uint32_t i = 0; i < o.n_outputs; ++i) {
        output_state& out = outputs_[i];
        if (out.alias) {
            if (!remat) {
                // A view's operator counts towards its storage's cost, and the view is a
                // use of its storage, as in the simulator. The cost counts once per viewed
                // storage, however many outputs view it (split, chunk): the simulator sums
                // the distinct operators of a storage's tensors.
                storage* viewed = target_of(o.in[o.out[i].alias_input]);
                bool counted = false;
                for (std::uint32_t j = 0; j < i && !counted; ++j)
                    counted = outputs_[j].alias && target_of(o.in[o.out[j].alias_input]) == viewed;
                if (!counted) viewed->compute_cost += cost;
                viewed->accessed = rt_.clock_;
            }
        } else if (out.target != nullptr) {
            install(o, out.target, out.ptr, true, false, cost);
        } else {
            rt_.memory_.free(out.ptr, out.bytes); // recomputed output already resident (or gone)
        }
    }
    for (std::uint32_t k = 0; k < o.n_versions; ++k) {
        version_state& v = versions_[k];
        if (v.target == nullptr) {
            rt_.memory_.free(v.ptr, v.bytes);
            continue;
        }
        // A new version of a storage without a recipe (a parameter being updated) gets none
        // either, unless the options ask for it: recomputing it would pin every older version,
        // and their inputs, for as long as the chain of updates lives.
        const storage* old = o.in[o.ver[k].input].storage;
        const bool keeps_recipe =
            old->producer != nullptr || (old->is_constant && rt_.options_.constant_updates ==
                                                                 constant_update::rematerializable);
        if (!remat && !keeps_recipe) o.ver[k].storage = nullptr;
        install(o, v.target, v.ptr, keeps_recipe, old->is_constant && !keeps_recipe, cost);
        if (!remat) v.target->may_offload = old->may_offload;
    }
    if constexpr (deferred_costs<Backend>) {
        // Only a measured cost is corrected later. The record is worth correcting only on a
        // first run that keeps it (live > 0; commit() drops it otherwise).
        if (remat ? !o.cost_supplied : !supplied)
            rt_.costs_.correct_last(!remat && o.live > 0 ? &o : nullptr, measured, remat);
    }
    op_ = nullptr;
    const cost_t spent = stats.remat_cost - rt_.remat_allowance_start_;
    if (remat && spent > rt_.options_.remat_limit)
        throw thrashing("dtr: rematerialization cost " + duration_text(spent) +
                            " exceeds the limit of " + duration_text(rt_.options_.remat_limit) +
                            " (runtime_options::remat_limit) while restoring operator #" +
                            std::to_string(o.id) +
                            "; raise the budget (set_budget) or restart the allowance "
                            "(set_remat_limit) to go on",
                        spent);
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::check_measured_cost(const op& o, cost_t measured) const {
    DTR_EXPECTS(std::isfinite(measured) && measured >= 0,
                "the backend's execute() returned a cost of " + duration_text(measured) +
                    " for operator #" + std::to_string(o.id) +
                    (remat_ ? " (rematerializing it)" : "") +
                    "; a measured cost must be a finite number of ns >= 0 (the run is "
                    "discarded)");
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::prepare_versions(op& o, bool remat) {
    for (std::uint32_t k = 0; k < o.n_versions; ++k) {
        const storage* old = o.in[o.ver[k].input].storage;
        version_state& v = versions_[k];
        v.bytes = old->bytes;
        if (!remat) {
            v.target = rt_.graph_.new_storage(old->bytes);
            o.ver[k].storage = v.target;
        } else if (o.ver[k].storage != nullptr &&
                   !o.ver[k].storage->resident()) { // not if offloaded
            v.target = o.ver[k].storage;
        }
        v.reuse = may_reuse(o, *old);
        if (!v.reuse) {
            v.ptr = rt_.memory_.allocate(old->bytes);
            v.allocated = true;
        }
    }
    // Blocks change hands only once every allocation above has succeeded.
    for (std::uint32_t k = 0; k < o.n_versions; ++k)
        if (versions_[k].reuse) take_block(o.in[o.ver[k].input].storage, versions_[k]);
}

template <class Rt, class Backend, class Meta>
bool execution<Rt, Backend, Meta>::may_reuse(const op& o, const storage& old) const noexcept {
    if (rt_.options_.in_place != in_place_writes::reuse_when_unshared) return false;
    // Recomputable (constants are updated in place by their own rule), resident on the
    // device, without a host copy that would then be the only one.
    if (old.producer == nullptr || !old.is_resident || old.host.valid()) return false;
    // A recomputation restored old for this update: taking its block would evict it again
    // at once, where a copy leaves the choice to the policy (what a first run's copy does
    // too: old loses its last handle and is released). Measured: reusing here too made
    // densenet121 recompute 1.5 times as often at a third of its peak (docs/torch.md).
    if (remat_) return false;
    // Handles: under storage scope the call moves every one to the new version; under
    // tensor scope other names keep reading old.
    if (rt_.options_.mutation != mutation_scope::storage) return false;
    // Pins: only this call's own. A guard, or a restore frame waiting to read old, keeps it.
    std::uint32_t own = 0;
    for (std::uint32_t i = 0; i < o.n_inputs; ++i) own += o.in[i].storage == &old && o.in[i].pinned;
    return old.pins == own;
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::take_block(storage* old, version_state& v) noexcept {
    // The bytes stay counted as resident: they move from old to this run's buffer, and
    // install() makes them the new version's. A failed run frees them (discard).
    v.ptr = old->ptr;
    v.allocated = true;
    old->ptr = pointer{};
    old->is_resident = false;
    rt_.pool_.refresh(old);
    rt_.hook_on_evict(*old);
    ++rt_.counters_.in_place_reuses;
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::install(op& o, storage* s, pointer p, bool rematerializable,
                                           bool constant, cost_t cost) {
    s->ptr = p;
    s->is_resident = true;
    rt_.offload_.unawait(s);
    if (!remat_) {
        s->compute_cost = cost;
        s->accessed = rt_.clock_;
        s->is_constant = constant;
        if (rematerializable) {
            s->producer = &o;
            ++o.live;
        }
        rt_.graph_.storages.push_back(*s);
        rt_.hook_on_create(*s);
    } else {
        rt_.hook_on_rematerialize(*s);
    }
    rt_.pool_.refresh(s);
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::discard(op& o, bool remat) noexcept {
    for (std::uint32_t i = 0; i < o.n_outputs; ++i) {
        output_state& out = outputs_[i];
        if (out.declared && !out.alias) rt_.memory_.free(out.ptr, out.bytes);
        if (!remat && o.out[i].storage != nullptr) {
            delete o.out[i].storage;
            o.out[i].storage = nullptr;
        }
    }
    for (std::uint32_t k = 0; k < o.n_versions; ++k) {
        version_state& v = versions_[k];
        if (v.allocated) rt_.memory_.free(v.ptr, v.bytes);
        if (!remat && o.ver[k].storage != nullptr) {
            delete o.ver[k].storage;
            o.ver[k].storage = nullptr;
        }
    }
    op_ = nullptr;
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::commit(typename op::ptr record, tensor* results,
                                          std::span<tensor_node* const> mutated_nodes) {
    op& rec = *record;
    // Hand out the outputs (this cannot fail: the runtime reserved their nodes).
    for (std::uint32_t i = 0; i < rec.n_outputs; ++i) {
        const auto& slot = rec.out[i];
        if (slot.alias_input >= 0) {
            const edge& e = rec.in[slot.alias_input];
            results[i] =
                rt_.make_tensor(target_of(e), e.offset + slot.alias_offset, slot.alias_length);
        } else {
            results[i] = rt_.make_tensor(slot.storage, 0, slot.bytes);
        }
    }
    // Copy out what rebinding needs before the record may go away.
    struct rebind {
        storage* old_version;
        storage* new_version;
    };
    std::vector<rebind> rebinds;
    if (rec.n_versions != 0) { // only mutating calls pay for the vector
        rebinds.reserve(rec.n_versions);
        for (std::uint32_t k = 0; k < rec.n_versions; ++k)
            rebinds.push_back({rec.in[rec.ver[k].input].storage, versions_[k].target});
    }

    rt_.unpin_inputs(rec);
    // Remember the recipe if anything needs it.
    if (rec.live > 0) {
        for (std::uint32_t i = 0; i < rec.n_inputs; ++i)
            rec.in[i].storage->consumers.push_back(rec.in[i]);
        rt_.graph_.ops.push_back(*record.release());
    } else {
        record.reset();
    }

    // Move the mutated tensors to their new versions; old versions may lose their last handle.
    for (const rebind& r : rebinds) {
        if (rt_.options_.mutation == mutation_scope::storage) {
            while (!r.old_version->tensors.empty()) {
                tensor_node& tn = r.old_version->tensors.front();
                r.old_version->tensors.pop_front();
                tn.storage = r.new_version;
                r.new_version->tensors.push_back(tn);
            }
        } else {
            // The nodes taken before the run: a handle the operator reset is empty now, but
            // its node (released at the end of this call) still views the old version.
            for (tensor_node* tn : mutated_nodes) {
                if (tn->storage != r.old_version) continue; // already moved (listed twice)
                r.old_version->tensors.erase(r.old_version->tensors.iterator_to(*tn));
                tn->storage = r.new_version;
                r.new_version->tensors.push_back(*tn);
            }
        }
        if (r.old_version->unheld()) rt_.release_.on_last_handle(r.old_version);
    }
}

template <class Rt, class Backend, class Meta>
auto execution<Rt, Backend, Meta>::allocate_output(std::size_t index, std::size_t bytes)
    -> buffer_view<pointer> {
    op& o = *op_;
    DTR_EXPECTS(index < o.n_outputs, "output index " + std::to_string(index) +
                                         " out of range: the call has " +
                                         std::to_string(o.n_outputs) + " outputs");
    output_state& out = outputs_[index];
    DTR_EXPECTS(!out.declared, "output " + std::to_string(index) + " produced twice");
    auto& slot = o.out[index];
    storage* target = nullptr;
    if (remat_) {
        DTR_EXPECTS(
            slot.alias_input < 0 && slot.bytes == bytes,
            "operator #" + std::to_string(o.id) +
                " is not deterministic: while rematerializing, output " + std::to_string(index) +
                " asked for " + std::to_string(bytes) +
                (slot.alias_input < 0 ? " bytes, its first run for " + std::to_string(slot.bytes)
                                      : " bytes, its first run made it a view"));
        if (slot.storage != nullptr && !slot.storage->resident())
            target = slot.storage; // not if offloaded
    }
    const pointer p = rt_.memory_.allocate(bytes);
    if (!remat_) {
        target = rt_.graph_.new_storage(bytes);
        slot.storage = target;
        slot.bytes = bytes;
    }
    out = {p, bytes, target, true, false};
    return {p, bytes};
}

template <class Rt, class Backend, class Meta>
void execution<Rt, Backend, Meta>::alias_output(std::size_t output, std::size_t input,
                                                std::size_t offset, std::size_t length) {
    op& o = *op_;
    DTR_EXPECTS(output < o.n_outputs, "alias: output index " + std::to_string(output) +
                                          " out of range: the call has " +
                                          std::to_string(o.n_outputs) + " outputs");
    DTR_EXPECTS(input < o.n_inputs, "alias: input index " + std::to_string(input) +
                                        " out of range: the operator has " +
                                        std::to_string(o.n_inputs) + " inputs");
    const std::size_t length_in = o.in[input].length;
    DTR_EXPECTS(offset <= length_in && length <= length_in - offset,
                "alias: view [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") exceeds input " + std::to_string(input) + " of " +
                    std::to_string(length_in) + " bytes");
    output_state& out = outputs_[output];
    DTR_EXPECTS(!out.declared, "output " + std::to_string(output) + " produced twice");
    auto& slot = o.out[output];
    if (remat_) {
        DTR_EXPECTS(
            slot.alias_input == static_cast<std::int32_t>(input) && slot.alias_offset == offset &&
                slot.alias_length == length,
            "operator #" + std::to_string(o.id) + " is not deterministic: output " +
                std::to_string(output) +
                (slot.alias_input < 0 ? " is a view now, but its first run made it a fresh output"
                                      : " is a different view than at its first run"));
    } else {
        slot.alias_input = static_cast<std::int32_t>(input);
        slot.alias_offset = offset;
        slot.alias_length = length;
    }
    out.declared = true;
    out.alias = true;
}

} // namespace dtr::detail
