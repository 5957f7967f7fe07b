// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::runtime: Dynamic Tensor Rematerialization over any backend and heuristic.
//!
//! The one header a framework includes. Route every operator call and tensor lifetime
//! through a runtime; it keeps resident bytes under the budget by evicting storages the
//! heuristic picks and recomputing them, from their recorded operators, when they are
//! needed again. See docs/design.md for the data model and invariants.
//!
//! The class is a facade: the work is done by collaborators in dtr/detail, one
//! responsibility each, which this header includes and none of which includes it back:
//! dependency_graph.hpp (the registry of storages and records), execution.hpp (one
//! operator's run and the commit of its outputs), rematerializer.hpp (securing inputs with
//! an explicit stack), evictable_pool.hpp (the pool, victim choice, eviction),
//! budgeted_memory.hpp (allocation under the budget), release_queue.hpp (release and
//! banishing), cost_queue.hpp (deferred costs), offloader.hpp (the host tier),
//! step_tracker.hpp (the program's step and the forecast of its reads), invariants.hpp.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/backend/host.hpp>
#include <dtr/backend/sim.hpp>
#include <dtr/buffer_view.hpp>
#include <dtr/concepts.hpp>
#include <dtr/counters.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/detail/budgeted_memory.hpp>
#include <dtr/detail/cost_queue.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/detail/evictable_pool.hpp>
#include <dtr/detail/execution.hpp>
#include <dtr/detail/invariants.hpp>
#include <dtr/detail/offloader.hpp>
#include <dtr/detail/release_queue.hpp>
#include <dtr/detail/rematerializer.hpp>
#include <dtr/detail/step_tracker.hpp>
#include <dtr/error.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/hooks.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/offload.hpp>
#include <dtr/op_context.hpp>
#include <dtr/options.hpp>
#include <dtr/pin_guard.hpp>
#include <dtr/search/indexed.hpp>
#include <dtr/step_forecast.hpp>
#include <dtr/tensor.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dtr {

//! @brief The runtime's default policy, by name: dtr_next_use through the indexed search
//! (docs/heuristics.md, "The default"). Spelled once, here; code that wants the default and
//! must name it (a sweep over policies, a bench row) uses this alias and follows it.
using default_heuristic = search::indexed<heuristics::dtr_next_use>;

//! @brief The DTR runtime for one device.
//!
//! @tparam Backend   where storages live and operators run (dtr::backend)
//! @tparam Heuristic which storage to evict under pressure (dtr::heuristic); the default,
//!                   dtr_next_use through the indexed search, scores by dtr_eqclass (the
//!                   best policy whose upkeep stays near-constant per event on any program)
//!                   until the program repeats a step the runtime has recorded, and by the
//!                   time to each storage's next use while it does (docs/heuristics.md,
//!                   "The default")
//!
//! Guarantees:
//! - resident bytes never exceed budget() (the budget is a hard limit);
//! - every value read back is bit-identical to an unconstrained run, provided operators
//!   are deterministic;
//! - a call that cannot fit throws dtr::out_of_memory and leaves the runtime as it was
//!   before the call except for evictions and rematerializations (strong guarantee for
//!   the call's own effects); nothing computed is lost.
//!
//! Not thread-safe: one runtime per device and thread, as a framework's allocator would be.
template <class Backend, class Heuristic = default_heuristic>
class runtime final : private detail::runtime_base {
    static_assert(backend<Backend>,
                  "dtr::runtime<Backend, Heuristic>: Backend does not model dtr::backend "
                  "(pointer types, allocate/deallocate/copy, and "
                  "template <class Body> cost_t execute(Body&&) taking a capturing lambda; see "
                  "dtr/concepts.hpp)");
    static_assert(heuristic<Heuristic>,
                  "dtr::runtime<Backend, Heuristic>: Heuristic does not model dtr::heuristic "
                  "(a storage_data type, and score(storage, context) or choose(pool, context); "
                  "see dtr/concepts.hpp)");

    using meta_type = typename Heuristic::storage_data;

public:
    using backend_type = Backend;
    using heuristic_type = Heuristic;
    using pointer = typename Backend::pointer;
    using const_pointer = typename Backend::const_pointer;
    using context = op_context<Backend>;
    //! The storage type heuristics are instantiated with: accessors only.
    using storage_type = detail::storage_node<Backend, meta_type>;
    //! The evictable pool as heuristics see it in `choose` (a range of storage_type).
    using pool_type = detail::pool_list<Backend, meta_type>;
    using read_guard = basic_pin_guard<runtime, false>;
    using write_guard = basic_pin_guard<runtime, true>;

private:
    // Checked here, with the real storage type, so that a wrong hook or choose() fails
    // with a message naming it rather than being silently ignored.
    static_assert(detail::check_hooks<Heuristic, storage_type>::value);

public:
    //! @brief Effects: a runtime with `options` over `backend`, choosing victims with
    //! `heuristic`; nothing is allocated.
    explicit runtime(runtime_options options = {}, Backend backend = Backend{},
                     Heuristic heuristic = Heuristic{})
        : backend_(std::move(backend)), heuristic_(std::move(heuristic)), options_(options) {
        DTR_EXPECTS(options_.prefetch_ahead == 0 || offloading_backend<Backend>,
                    "runtime_options::prefetch_ahead needs a backend with a host tier "
                    "(dtr::offloading_backend); this one has none: leave it 0");
        DTR_EXPECTS(options_.offload_ahead == 0 || copying_ahead_backend<Backend>,
                    "runtime_options::offload_ahead needs a backend that copies out ahead of "
                    "eviction (dtr::copying_ahead_backend: copy_stream_idle, copy_out_ahead, "
                    "fence_host_copy); this one does not");
        // Offload asked of a backend that cannot: refused rather than silently never done.
        if (options_.offload != offload_policy::off) {
            if constexpr (offloading_backend<Backend>)
                DTR_EXPECTS(backend_.has_host_tier(),
                            "runtime_options::offload is on, but this backend has no host tier "
                            "(give it one before constructing the runtime: enable_host_tier on "
                            "host_backend and sim_backend, cuda_backend_options::host_tier); "
                            "without one, leave offload off");
            else
                DTR_EXPECTS(false,
                            "runtime_options::offload is on, but the backend type has no "
                            "host tier (dtr::offloading_backend); leave offload off");
        }
        DTR_EXPECTS(options_.copy_back_charge > 0 &&
                        options_.copy_back_charge <= std::numeric_limits<double>::max(),
                    "runtime_options::copy_back_charge must be finite and > 0");
        DTR_EXPECTS(options_.remat_limit >= 0,
                    "runtime_options::remat_limit must be a number of ns >= 0 (infinity: no "
                    "limit)");
    }

    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    //! @brief Effects: frees every storage. Handles that outlive the runtime become
    //! orphans: they can still be destroyed, but any use throws dtr::logic_error.
    ~runtime();

    // ---- creating tensors -----------------------------------------------------------

    //! @brief A constant (parameter, input): never evicted, never recomputed.
    //!
    //! Effects: allocates `bytes` under the budget, uninitialized; fill them with
    //! pin_for_write() before an operator reads them.
    //! Returns: a handle to the whole constant.
    //! Throws: dtr::out_of_memory when it cannot fit (nothing changed but evictions).
    tensor constant(std::size_t bytes) {
        return constant(bytes, [](buffer_view<pointer>) {});
    }

    //! @brief A constant whose bytes `init(buffer_view<pointer>)` writes.
    //!
    //! Effects: as constant(bytes), then runs `init`, which must not call the runtime.
    //! Throws: dtr::out_of_memory, or what `init` throws (the constant is then freed).
    template <class Init>
    tensor constant(std::size_t bytes, Init&& init);

    //! @brief Runs a one-output operator on `inputs`.
    //!
    //! Effects: secures the inputs (recomputing evicted ones), runs `op` under the budget,
    //! evicting as needed, and records it as the recipe of its output.
    //! Returns: the output.
    //! Throws: dtr::out_of_memory (strong guarantee for the call's own effects),
    //! dtr::thrashing, dtr::logic_error on misuse, and whatever the operator throws.
    //! Complexity: amortized constant beyond the operator, its inputs and outputs, and the
    //! evictions and recomputations it causes.
    template <class Op>
    tensor call(Op&& op, std::span<const tensor> inputs, call_options options = {}) {
        tensor out;
        call_impl(std::forward<Op>(op), inputs, 1, options, &out);
        return out;
    }
    //! @brief As call(op, span, options).
    template <class Op>
    tensor call(Op&& op, std::initializer_list<tensor> inputs, call_options options = {}) {
        return call(std::forward<Op>(op), std::span<const tensor>(inputs.begin(), inputs.size()),
                    std::move(options));
    }

    //! @brief Runs an operator with N outputs: `auto [a, b] = rt.call<2>(op, {x});`.
    //! Effects, Throws: as call().
    template <std::size_t N, class Op>
    std::array<tensor, N> call(Op&& op, std::span<const tensor> inputs, call_options options = {}) {
        std::array<tensor, N> out;
        call_impl(std::forward<Op>(op), inputs, N, options, out.data());
        return out;
    }
    //! @brief As call<N>(op, span, options).
    template <std::size_t N, class Op>
    std::array<tensor, N> call(Op&& op, std::initializer_list<tensor> inputs,
                               call_options options = {}) {
        return call<N>(std::forward<Op>(op), std::span<const tensor>(inputs.begin(), inputs.size()),
                       std::move(options));
    }

    //! @brief Runs an operator whose number of outputs is known only at run time.
    //! Effects, Throws: as call(). Returns: its `outputs` outputs.
    template <class Op>
    std::vector<tensor> call_n(std::size_t outputs, Op&& op, std::span<const tensor> inputs,
                               call_options options = {}) {
        std::vector<tensor> out(outputs);
        call_impl(std::forward<Op>(op), inputs, outputs, options, out.data());
        return out;
    }

    //! @brief Runs an operator with `outputs.size()` outputs into handles the caller owns
    //! (a small inline array of a framework's op path: no vector per call).
    //! Expects: every handle in `outputs` is empty (assigning over a live one would release
    //! it in the middle of the call).
    //! Effects, Throws: as call(); dtr::logic_error, before anything runs, when a handle in
    //! `outputs` is not empty. On an exception `outputs` is left empty.
    template <class Op>
    void call_into(std::span<tensor> outputs, Op&& op, std::span<const tensor> inputs,
                   call_options options = {}) {
        for (std::size_t i = 0; i < outputs.size(); ++i)
            DTR_EXPECTS(!outputs[i], "call_into: output handle " + std::to_string(i) +
                                         " is not empty (pass default-constructed tensors)");
        call_impl(std::forward<Op>(op), inputs, outputs.size(), options, outputs.data());
    }

    //! @brief Runs an in-place operator that updates inputs `mutated` (through
    //! op_context::inout) and has no outputs.
    //!
    //! Effects: the mutated tensors (and, under mutation_scope::storage, every view of their
    //! storages) hold the new values, in new storage versions; the old values stay available
    //! to the operators that read them (copy-on-write).
    //! Throws: as call(); dtr::logic_error for a mutated index out of range.
    template <class Op>
    void mutate(Op&& op, std::span<const tensor> inputs, std::vector<std::uint32_t> mutated,
                std::optional<cost_t> cost = std::nullopt) {
        call_options options{cost, std::move(mutated)};
        call_impl(std::forward<Op>(op), inputs, 0, options, nullptr);
    }
    //! @brief As mutate(op, span, mutated, cost).
    template <class Op>
    void mutate(Op&& op, std::initializer_list<tensor> inputs, std::vector<std::uint32_t> mutated,
                std::optional<cost_t> cost = std::nullopt) {
        mutate(std::forward<Op>(op), std::span<const tensor>(inputs.begin(), inputs.size()),
               std::move(mutated), cost);
    }

    //! @brief A view of bytes [offset, offset + length) of `t`, without running an
    //! operator (pure metadata).
    //!
    //! Returns: a new tensor on `t`'s storage; with the full range, a second, independently
    //! rebindable name for the same value (what the DTR logs call COPY).
    //! Throws: dtr::logic_error when the range exceeds `t`, or on misuse.
    tensor view(const tensor& t, std::size_t offset, std::size_t length);
    //! @brief As view(t, 0, t.size()).
    tensor view(const tensor& t) { return view(t, 0, node_of(t, "view")->length); }

    // ---- access -----------------------------------------------------------------------

    //! @brief Read access to `t`'s bytes.
    //!
    //! Effects: makes `t` resident (recomputing it if needed) and keeps it so while the
    //! guard lives; counts as a use of its storage.
    //! Returns: a guard whose data() is read-only.
    //! Throws: dtr::out_of_memory or dtr::thrashing when rematerializing it fails.
    read_guard pin(const tensor& t);

    //! @brief Write access to a constant that no operator has read yet (initialization).
    //!
    //! Effects, Returns: as pin(), the guard's data() writable. Writing any other storage
    //! would break recomputation; update values with mutate() instead.
    //! Throws: dtr::logic_error for a computed storage or a constant already read.
    write_guard pin_for_write(const tensor& t);

    //! @brief Evicts `t`'s storage now if it is evictable.
    //!
    //! Effects: drops its bytes (keeping the recipe), or copies them out to the backend's
    //! host tier when runtime_options::offload decides so.
    //! Returns: true if it left the device.
    bool evict(const tensor& t);

    //! @brief Evicts `t`'s storage now if it is evictable, dropping its bytes even where
    //! runtime_options::offload would copy them out: for a caller that keeps the bytes
    //! itself (the PyTorch bridge hands a gradient's block over to a constant), so that a
    //! host copy would be a wasted transfer. A host copy the storage has is released.
    //! Returns: true if it left the device.
    bool drop(const tensor& t);

    //! @brief Lets constant `t`'s storage leave the device under offload even where
    //! runtime_options::offload_constants is false (`allowed` = false takes that back).
    //!
    //! For a constant whose bytes nothing outside the runtime holds, in a program whose
    //! other constants must stay: the PyTorch bridge's gradients and optimizer state, beside
    //! parameters that PyTorch keeps. New versions made by mutating it inherit the setting.
    //! Effects: none while offload is off or the backend has no host tier.
    //! Throws: dtr::logic_error on a bad handle or when `t` is not a constant.
    void allow_offload(const tensor& t, bool allowed = true);
    //! @brief Returns: whether `t`'s storage may leave the device for a host tier: a computed
    //! storage always, a constant under runtime_options::offload_constants or allow_offload.
    //! (Whether it does also needs offload on and a backend with a tier.)
    //! Throws: dtr::logic_error on a bad handle.
    [[nodiscard]] bool offload_allowed(const tensor& t) const {
        const storage_t* s = storage_of(t);
        return !s->is_constant || options_.offload_constants || s->may_offload;
    }

    // ---- offload (runtime_options::offload, on a backend modelling dtr::offloading_backend)

    //! @brief Returns: whether `t`'s storage is in the backend's host tier only.
    //! Throws: dtr::logic_error on a bad handle.
    [[nodiscard]] bool is_offloaded(const tensor& t) const { return storage_of(t)->offloaded(); }
    //! @brief A hint that `t` will be read soon.
    //!
    //! Effects: if its storage is offloaded and the budget has room for it, starts its
    //! copy-back now, so that the transfer overlaps the compute until it is read. Room is
    //! made only from storages kept after their last release, where they are the next
    //! victims anyway (a scoring heuristic, while keeps_released() under
    //! kept_priority::first), and only when those alone suffice; and the backend must give
    //! the block at once (a backend below the budget, a fragmented region, a refusal: the
    //! hint gives up). A hint never evicts a storage the program holds.
    //! Returns: whether a copy-back started.
    //! Throws: dtr::logic_error on a bad handle or from inside an operator; what the
    //! backend's copy_in throws (the storage stays offloaded).
    bool prefetch(const tensor& t);

    // ---- steps (runtime_options::steps; docs/design.md, "Steps") ---------------------------

    //! @brief Marks the start of a step of the program (a training iteration): the calls
    //! between two marks are one step, and from the second mark on the runtime forecasts,
    //! call by call, when the program reads each storage next (heuristic_context::forecast),
    //! for as long as the calls match the recorded step. A step that runs otherwise (another
    //! operator, size or input) is dropped at its first differing call and the one it became
    //! is recorded in its place. Call it where each iteration begins (e.g. before the
    //! forward pass or at the optimizer step: the same place each time); a framework that
    //! never calls it is watched for a repeating sequence instead (step_learning::automatic).
    //! Effects: none under step_learning::off besides counters::steps_marked.
    //! Complexity: O(1), or O(calls of the step) when it adopts a new recording.
    //! Throws: dtr::logic_error from inside an operator.
    void begin_step() {
        DTR_EXPECTS(!in_operator_, "begin_step() called from inside an operator");
        steps_.mark();
    }
    //! @brief Returns: whether a recorded step is being followed, its length and position,
    //! and the memory the recording holds.
    [[nodiscard]] step_status step_state() const noexcept { return steps_.status(); }
    //! @brief Returns: the forecast of the program's next reads while it follows a recorded
    //! step (what policies get as heuristic_context::forecast), else null; null too in a step
    //! the forecast guard runs without it (runtime_options::guard_forecast). Valid until the
    //! next call of the runtime.
    [[nodiscard]] const step_forecast* forecast() const noexcept { return steps_.forecast(); }

    // ---- state ------------------------------------------------------------------------

    //! @brief Returns: whether `t`'s storage is in memory.
    [[nodiscard]] bool is_resident(const tensor& t) const { return storage_of(t)->is_resident; }
    //! @brief Returns: whether `t`'s storage can be recomputed (and so evicted).
    [[nodiscard]] bool is_rematerializable(const tensor& t) const {
        return storage_of(t)->rematerializable();
    }
    //! @brief Returns: the budget in bytes.
    [[nodiscard]] std::size_t budget() const noexcept { return options_.budget; }
    //! @brief Changes the budget.
    //!
    //! Effects: evicts until resident bytes fit under `bytes`, then sets the budget and
    //! restarts the rematerialization allowance (see set_remat_limit).
    //! Throws: dtr::out_of_memory (budget unchanged) when not enough is evictable.
    void set_budget(std::size_t bytes);
    //! @brief Sets runtime_options::remat_limit and restarts the allowance.
    //!
    //! Effects: from now on, dtr::thrashing is thrown once recomputation since this call (or
    //! since the last set_budget) costs more than `limit` ns. After a dtr::thrashing error,
    //! every further recomputation throws it again until the budget is raised with
    //! set_budget() or the allowance is restarted here; nothing computed is lost meanwhile.
    //! Throws: dtr::logic_error on a negative or NaN limit, or from inside an operator.
    void set_remat_limit(cost_t limit);
    //! @brief Sets runtime_options::dealloc for releases from now on: eager_evict,
    //! keep_resident and keep_once_bound may be exchanged at any time outside an operator (a
    //! framework keeping released storages only in some phases: outside backward, once the
    //! budget binds); storages kept so far stay until the policy evicts them.
    //! Throws: dtr::logic_error when switching to or from banish, or from inside an operator.
    void set_dealloc(dealloc_policy policy);
    //! @brief Returns: whether a storage that loses its last handle now stays resident
    //! (keep_resident, or keep_once_bound after the budget first made the runtime choose a
    //! victim).
    [[nodiscard]] bool keeps_released() const noexcept {
        return options_.dealloc == dealloc_policy::keep_resident ||
               (options_.dealloc == dealloc_policy::keep_once_bound &&
                counters_.victim_searches != 0);
    }
    //! @brief Returns: bytes resident now (storages and the running operator's buffers).
    [[nodiscard]] std::size_t resident_bytes() const noexcept { return counters_.resident_bytes; }
    //! @brief Returns: the runtime clock, the total cost of every operator run so far (ns).
    //! On a backend with deferred costs (dtr::deferred_costs) it advances by the provisional
    //! cost at once and by the rest when the measurement arrives; it never runs backwards.
    [[nodiscard]] cost_t clock() const noexcept { return clock_; }
    //! @brief Effects: waits for every cost measurement still running on the device and
    //! folds it into the clock, the recorded costs and the counters. Does nothing on
    //! backends that measure synchronously (host, sim). Useful before reading stats() or
    //! clock().
    //! Throws: whatever the backend throws while waiting (e.g. dtr::cuda_error).
    void settle_costs();
    //! @brief Returns: the counters.
    [[nodiscard]] const counters& stats() const noexcept { return counters_; }
    //! @brief Returns: the options (the budget and remat_limit as last set).
    [[nodiscard]] const runtime_options& options() const noexcept { return options_; }
    //! @brief Returns: storage records alive (resident or evicted).
    [[nodiscard]] std::size_t storage_count() const noexcept { return graph_.storages.size(); }
    //! @brief Returns: operator records alive (recipes still needed).
    [[nodiscard]] std::size_t operator_count() const noexcept { return graph_.ops.size(); }
    //! @brief Returns: storages the heuristic may choose from right now.
    [[nodiscard]] std::size_t evictable_count() const noexcept { return pool_.size(); }
    //! @brief Returns: the backend.
    [[nodiscard]] Backend& backend() noexcept { return backend_; }
    //! @brief Returns: the heuristic.
    [[nodiscard]] Heuristic& heuristic() noexcept { return heuristic_; }

    //! @brief Effects: calls f(const storage_type&) for every live storage, in creation
    //! order (diagnostics, statistics). f must not call the runtime.
    template <class F>
    void for_each_storage(F&& f) const {
        for (const storage_t& s : graph_.storages) f(s.view());
    }

    //! @brief Effects: walks the whole graph and throws dtr::logic_error describing the
    //! first broken invariant (tests and debugging). Complexity: linear in the graph.
    void check_invariants() const {
        detail::check_invariants(graph_, this, pool_.size(), counters_, options_, user_pins_,
                                 offload_.awaited_count());
        if (!pool_.kept_lead_the_pool())
            throw logic_error(
                "dtr: invariant broken: a held storage precedes one nobody holds "
                "in the evictable pool of a search strategy");
    }

private:
    template <class, bool>
    friend class basic_pin_guard;
    // The collaborators: each owns its state and reaches the runtime's shared state
    // (backend, heuristic, options, counters, clock, registry) and its fellows through it.
    template <class, class, class>
    friend class detail::execution;
    template <class, class, class>
    friend class detail::rematerializer;
    template <class, class, class>
    friend class detail::evictable_pool;
    template <class, class, class>
    friend class detail::budgeted_memory;
    template <class, class, class>
    friend class detail::release_queue;
    template <class, class, class>
    friend class detail::cost_queue;
    template <class, class, class>
    friend class detail::offloader;
    template <class, class, class>
    friend class detail::step_tracker;

    using storage_t = detail::storage_record<Backend, meta_type>;
    using op_t = detail::op_node<Backend, meta_type>;
    using edge_t = detail::input_edge<Backend, meta_type>;

    //! Marks the runtime busy for one public operation; releases that happen meanwhile
    //! (handles dropped inside operators or by destroyed recipes) are handled at the end.
    class busy_scope {
    public:
        explicit busy_scope(runtime& rt) noexcept : rt_(rt), outer_(!rt.busy_) { rt.busy_ = true; }
        ~busy_scope() {
            if (outer_) {
                rt_.release_.drain();
                rt_.busy_ = false;
            }
        }
        busy_scope(const busy_scope&) = delete;
        busy_scope& operator=(const busy_scope&) = delete;

    private:
        runtime& rt_;
        bool outer_;
    };

    // ---- handles ------------------------------------------------------------------------
    static detail::tensor_node* node(const tensor& t) noexcept { return t.node(); }
    detail::tensor_node* node_of(const tensor& t, const char* what) const;
    storage_t* storage_of(const tensor& t) const {
        return static_cast<storage_t*>(node_of(t, "tensor query")->storage);
    }
    //! prefetch() on a storage: the hint's work, also the forecast's (prefetch_ahead).
    bool prefetch_storage(storage_t* s);
    //! Makes sure `count` tensor nodes can be handed out without allocating.
    void reserve_tensor_nodes(std::size_t count) {
        if (spare_nodes_.size() >= count) return; // the common case: spares left from before
        spare_nodes_.reserve(std::max(count, kept_spare_nodes));
        while (spare_nodes_.size() < count)
            spare_nodes_.push_back(new detail::tensor_node{nullptr, nullptr, 0, 0});
    }
    //! A tensor on `s`; does not allocate after reserve_tensor_nodes(1).
    tensor make_tensor(storage_t* s, std::size_t offset, std::size_t length) {
        reserve_tensor_nodes(1);
        detail::tensor_node* n = spare_nodes_.back();
        spare_nodes_.pop_back();
        *n = detail::tensor_node{this, s, offset, length};
        s->tensors.push_back(*n);
        return tensor(n);
    }
    //! Takes back the node of a released handle: kept as a spare while there is room
    //! (no allocation, so no failure), so that a call's outputs reuse the nodes of the
    //! handles the program dropped instead of a new/delete pair each.
    void recycle_node(detail::tensor_node* n) noexcept {
        if (spare_nodes_.size() < spare_nodes_.capacity())
            spare_nodes_.push_back(n);
        else
            delete n;
    }
    void release_tensor(detail::tensor_node* n) noexcept override {
        if (busy_) {
            // Inside an operation (an operator or a recipe's destructor dropped a handle):
            // the graph may be mid-update, so handle it when the operation finishes.
            release_.defer(n);
            return;
        }
        busy_scope busy(*this);
        release_.release(n);
    }
    void unpin_guard(detail::storage_header* pinned, bool writable) noexcept;
    template <bool Writable>
    basic_pin_guard<runtime, Writable> pin_impl(const tensor& t);

    // ---- calls ------------------------------------------------------------------------
    template <class Op>
    void call_impl(Op&& op, std::span<const tensor> inputs, std::size_t outputs,
                   const call_options& options, tensor* results);
    void check_call(std::span<const tensor> inputs, std::size_t outputs) const;
    void plan_mutation(std::span<const tensor> inputs, const call_options& options,
                       std::vector<storage_t*>& storages,
                       std::vector<detail::tensor_node*>& nodes) const;

    // ---- pins and uses (shared by the collaborators) --------------------------------------
    void pin(storage_t* s) noexcept {
        if (s->pins++ == 0) pool_.refresh(s);
    }
    void unpin(storage_t* s) noexcept {
        if (--s->pins == 0) {
            pool_.refresh(s);
            if (s->unheld()) release_.enqueue(s);
        }
    }
    //! The inputs of `op` are used now (staleness).
    void touch_inputs(op_t& op) {
        for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
            storage_t* s = op.in[i].storage;
            s->accessed = clock_;
            hook_on_access(*s);
        }
    }
    void unpin_inputs(op_t& op) noexcept {
        for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
            edge_t& e = op.in[i];
            if (!e.pinned) continue;
            e.pinned = false;
            unpin(e.storage);
        }
    }

    // ---- hooks (the table in dtr/hooks.hpp): heuristics see storage_type only ------------
    heuristic_context hctx() noexcept {
        return {clock_, &counters_.metadata_accesses, &counters_.heuristic_evaluations,
                steps_.forecast()};
    }
#define DTR_DEFINE_HOOK(name)                                            \
    void hook_##name(storage_t& s) noexcept {                            \
        if constexpr (hook::name##_t::callable<Heuristic, storage_type>) \
            hook::name##_t::invoke(heuristic_, s.view(), hctx());        \
    }
    DTR_HEURISTIC_HOOKS(DTR_DEFINE_HOOK)
#undef DTR_DEFINE_HOOK

    // Shared state.
    Backend backend_;
    Heuristic heuristic_;
    runtime_options options_;
    counters counters_{};
    cost_t clock_ = 0;
    std::size_t user_pins_ = 0;
    cost_t remat_allowance_start_ = 0; //!< counters_.remat_cost when the allowance restarted
    bool busy_ = false;
    bool in_operator_ = false;
    detail::dependency_graph<Backend, meta_type> graph_;
    //! Spare nodes kept for reuse (recycle_node) at most, unless one call needs more.
    static constexpr std::size_t kept_spare_nodes = 16;
    std::vector<detail::tensor_node*> spare_nodes_; //!< owned; see reserve_tensor_nodes

    // The collaborators.
    detail::evictable_pool<runtime, Backend, meta_type> pool_{*this};
    detail::budgeted_memory<runtime, Backend, meta_type> memory_{*this};
    detail::execution<runtime, Backend, meta_type> exec_{*this};
    detail::rematerializer<runtime, Backend, meta_type> remat_{*this};
    detail::release_queue<runtime, Backend, meta_type> release_{*this};
    detail::cost_queue<runtime, Backend, meta_type> costs_{*this};
    detail::offloader<runtime, Backend, meta_type> offload_{*this};
    detail::step_tracker<runtime, Backend, meta_type> steps_{*this};
};

// =====================================================================================
// the path of a call: call -> secure inputs -> run -> commit
// =====================================================================================

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
    check_call(inputs, outputs);
    // Distinct storages among the mutated inputs: each gets one new version. The mutated
    // tensors are remembered now: the operator may reset the caller's handles while it runs.
    std::vector<storage_t*> mutated_storages;
    std::vector<detail::tensor_node*> mutated_nodes;
    if (!options.mutates.empty()) plan_mutation(inputs, options, mutated_storages, mutated_nodes);
    if (options.cost) DTR_EXPECTS(*options.cost >= 0, "negative operator cost");

    busy_scope busy(*this);
    reserve_tensor_nodes(outputs); // handing out the outputs after the run cannot fail
    typename op_t::ptr record =
        exec_.record(std::forward<Op>(op), inputs, outputs, options, mutated_storages);
    const bool steps = options_.steps != step_learning::off;
    if (steps)
        steps_.before_call(
            *record, options.op_key != 0 ? options.op_key : detail::type_key<std::decay_t<Op>>());
    touch_inputs(*record);
    remat_.secure_inputs(*record); // pinned, evicted ones recomputed
    // A measured cost at most the step's lowest at this place (runtime_options::repeat_costs;
    // infinity unless a recorded step is followed). On failure: buffers freed, inputs unpinned.
    exec_.run(*record, false, options.cost, steps_.cost_ceiling());
    if (steps) steps_.after_run(*record); // the forecast's stamps; never throws
    exec_.commit(std::move(record), results, mutated_nodes);
    if (options_.offload_ahead != 0) offload_.copy_ahead();
    if (options_.prefetch_ahead != 0)
        if (const step_forecast* f = steps_.forecast()) offload_.prefetch_by_forecast(*f);
}

template <class B, class H>
void runtime<B, H>::check_call(std::span<const tensor> inputs, std::size_t outputs) const {
    DTR_EXPECTS(!in_operator_,
                "call() from inside an operator (operators must not call the runtime)");
    DTR_EXPECTS(inputs.size() < std::numeric_limits<std::uint32_t>::max() &&
                    outputs < std::numeric_limits<std::uint32_t>::max(),
                "too many inputs or outputs for one call");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const detail::tensor_node* n = inputs[i].node();
        if (n == nullptr || n->owner != static_cast<const detail::runtime_base*>(this))
            node_of(inputs[i], ("call input " + std::to_string(i)).c_str());
        const auto* s = static_cast<const storage_t*>(n->storage);
        DTR_EXPECTS(s->write_guards == 0,
                    "call input " + std::to_string(i) + ": constant storage #" +
                        std::to_string(s->sid) +
                        " has a live write guard from pin_for_write(); release the guard before an "
                        "operator reads the constant (bytes written after an operator read them "
                        "would make its recomputation disagree with its first run)");
    }
}

template <class B, class H>
void runtime<B, H>::plan_mutation(std::span<const tensor> inputs, const call_options& options,
                                  std::vector<storage_t*>& storages,
                                  std::vector<detail::tensor_node*>& nodes) const {
    if (options_.mutation == mutation_scope::tensor) nodes.reserve(options.mutates.size());
    for (std::uint32_t m : options.mutates) {
        DTR_EXPECTS(m < inputs.size(), "mutated input index " + std::to_string(m) +
                                           " out of range: the call has " +
                                           std::to_string(inputs.size()) + " inputs");
        auto* s = static_cast<storage_t*>(inputs[m].node()->storage);
        if (std::find(storages.begin(), storages.end(), s) == storages.end()) storages.push_back(s);
        if (options_.mutation == mutation_scope::tensor) nodes.push_back(inputs[m].node());
    }
}

// =====================================================================================
// constants, views, pins, eviction, budget
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
    auto record = std::unique_ptr<storage_t>(graph_.new_storage(bytes));
    const pointer p = memory_.allocate(bytes);
    try {
        in_operator_ = true;
        init(buffer_view<pointer>(p, bytes));
        in_operator_ = false;
    } catch (...) {
        in_operator_ = false;
        memory_.free(p, bytes);
        throw;
    }
    storage_t* s = record.release();
    s->ptr = p;
    s->is_resident = true;
    s->is_constant = true;
    s->accessed = clock_;
    graph_.storages.push_back(*s);
    hook_on_create(*s);
    return make_tensor(s, 0, bytes);
}

template <class B, class H>
detail::tensor_node* runtime<B, H>::node_of(const tensor& t, const char* what) const {
    detail::tensor_node* n = t.node();
    DTR_EXPECTS(n != nullptr, std::string(what) +
                                  ": empty tensor handle (default-constructed, moved-from "
                                  "or reset)");
    DTR_EXPECTS(n->owner != nullptr,
                std::string(what) + ": the tensor's runtime has been destroyed");
    DTR_EXPECTS(n->owner == static_cast<const detail::runtime_base*>(this),
                std::string(what) + ": the tensor belongs to another runtime");
    return n;
}

template <class B, class H>
tensor runtime<B, H>::view(const tensor& t, std::size_t offset, std::size_t length) {
    detail::tensor_node* n = node_of(t, "view");
    DTR_EXPECTS(!in_operator_,
                "view() called from inside an operator (operators must not call the "
                "runtime; make the output a view with ctx.alias())");
    DTR_EXPECTS(offset <= n->length && length <= n->length - offset,
                "view [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") exceeds a tensor of " + std::to_string(n->length) + " bytes");
    return make_tensor(static_cast<storage_t*>(n->storage), n->offset + offset, length);
}

template <class B, class H>
template <bool Writable>
basic_pin_guard<runtime<B, H>, Writable> runtime<B, H>::pin_impl(const tensor& t) {
    detail::tensor_node* n = node_of(t, Writable ? "pin_for_write" : "pin");
    DTR_EXPECTS(!in_operator_, "pin() called from inside an operator");
    auto* s = static_cast<storage_t*>(n->storage);
    if constexpr (Writable) {
        DTR_EXPECTS(s->producer == nullptr && s->is_constant,
                    "pin_for_write: storage #" + std::to_string(s->sid) +
                        " is computed by an operator; writing it would make recomputation "
                        "disagree with it (update values with mutate())");
        DTR_EXPECTS(s->consumers.empty(),
                    "pin_for_write: constant storage #" + std::to_string(s->sid) +
                        " is already read by " + std::to_string(s->consumers.size()) +
                        " operator record(s) that may recompute from its current bytes "
                        "(update it with mutate())");
    }
    busy_scope busy(*this);
    s->accessed = clock_;
    hook_on_access(*s);
    remat_.make_resident(s);
    pin(s);
    ++user_pins_;
    // A read of the program outside any call: an event of its step (a training loop reads
    // its loss and gradients this way at the end of each step).
    if (options_.steps != step_learning::off) steps_.after_pin(*s, n->length);
    if constexpr (Writable) {
        ++s->write_guards;
        offload_.release_host_copy(s); // its bytes are about to change
    }
    using guard = basic_pin_guard<runtime, Writable>;
    using view_pointer = typename guard::pointer;
    const view_pointer base = s->ptr;
    return guard(*this, t, s, buffer_view<view_pointer>(base + n->offset, n->length));
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
    pool_.evict(s, false);
    return true;
}

template <class B, class H>
bool runtime<B, H>::drop(const tensor& t) {
    storage_t* s = storage_of(t);
    DTR_EXPECTS(!in_operator_, "drop() called from inside an operator");
    if (!s->evictable()) return false;
    busy_scope busy(*this);
    pool_.drop(s, false);
    return true;
}

template <class B, class H>
void runtime<B, H>::allow_offload(const tensor& t, bool allowed) {
    storage_t* s = storage_of(t);
    DTR_EXPECTS(s->is_constant,
                "allow_offload: storage #" + std::to_string(s->sid) +
                    " is not a constant (computed storages leave the device by the policy's "
                    "choice already)");
    s->may_offload = allowed;
}

template <class B, class H>
bool runtime<B, H>::prefetch(const tensor& t) {
    storage_t* s = storage_of(t);
    DTR_EXPECTS(!in_operator_, "prefetch() called from inside an operator");
    return prefetch_storage(s);
}

template <class B, class H>
bool runtime<B, H>::prefetch_storage(storage_t* s) {
    if (!s->offloaded() || s->bytes > options_.budget) return false;
    busy_scope busy(*this);
    const std::size_t room = options_.budget - counters_.resident_bytes;
    if (s->bytes > room && !pool_.evict_kept(s->bytes - room)) return false;
    // Only a block the backend gives at once: its allocator would evict where it refuses
    // (its capacity, fragmentation), whatever the program holds. The read will try again.
    if (!offload_.try_copy_back(s)) return false;
    // About to be read: not the stalest storage, or it would be the next victim.
    s->accessed = clock_;
    hook_on_access(*s);
    ++counters_.prefetches;
    return true;
}

template <class B, class H>
void runtime<B, H>::set_budget(std::size_t bytes) {
    DTR_EXPECTS(!in_operator_, "set_budget() called from inside an operator");
    busy_scope busy(*this);
    // Evict first and change the budget last: any failure on the way keeps the old one.
    memory_.shrink_to(bytes);
    options_.budget = bytes;
    remat_allowance_start_ = counters_.remat_cost;
}

template <class B, class H>
void runtime<B, H>::set_dealloc(dealloc_policy policy) {
    DTR_EXPECTS(!in_operator_, "set_dealloc() called from inside an operator");
    DTR_EXPECTS((policy == dealloc_policy::banish) == (options_.dealloc == dealloc_policy::banish),
                "set_dealloc: only eager_evict, keep_resident and keep_once_bound can be switched "
                "at run time (banish is chosen at construction: its pending banishments cannot "
                "be withdrawn)");
    options_.dealloc = policy;
}

template <class B, class H>
void runtime<B, H>::set_remat_limit(cost_t limit) {
    DTR_EXPECTS(!in_operator_, "set_remat_limit() called from inside an operator");
    DTR_EXPECTS(limit >= 0, "set_remat_limit: the limit must be a non-negative number of ns");
    options_.remat_limit = limit;
    remat_allowance_start_ = counters_.remat_cost;
}

template <class B, class H>
void runtime<B, H>::settle_costs() {
    DTR_EXPECTS(!in_operator_, "settle_costs() called from inside an operator");
    if constexpr (deferred_costs<B>) costs_.collect(cost_collection::wait);
}

template <class B, class H>
runtime<B, H>::~runtime() {
    busy_ = true;
    for (storage_t& s : graph_.storages) {
        // Orphan the handles' tensors: they outlive us and free themselves.
        while (!s.tensors.empty()) {
            detail::tensor_node& tn = s.tensors.front();
            s.tensors.pop_front();
            tn.owner = nullptr;
            tn.storage = nullptr;
        }
        s.consumers.clear();
        if (s.is_resident) backend_.deallocate(s.ptr, s.bytes);
        offload_.release_host_copy(&s);
    }
    pool_.clear();
    // Handles dropped while deferred, and those captured by recipes, are orphans by now.
    release_.discard_deferred();
    for (detail::tensor_node* n : spare_nodes_) delete n;
    graph_.ops.clear_and_dispose([](op_t* op) { op_t::destroy(op); });
    graph_.storages.clear_and_dispose([](storage_t* s) { delete s; });
}

} // namespace dtr
