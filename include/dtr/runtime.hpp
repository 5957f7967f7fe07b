// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::runtime: Dynamic Tensor Rematerialization over any backend and heuristic.
//!
//! The one header a framework includes. Route every operator call and tensor lifetime
//! through a runtime; it keeps resident bytes under the budget by evicting storages the
//! heuristic picks and recomputing them, from their recorded operators, when they are
//! needed again. See docs/design.md for the data model and invariants.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/backend/host.hpp>
#include <dtr/backend/sim.hpp>
#include <dtr/buffer_view.hpp>
#include <dtr/concepts.hpp>
#include <dtr/counters.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/error.hpp>
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/hooks.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/op_context.hpp>
#include <dtr/options.hpp>
#include <dtr/pin_guard.hpp>
#include <dtr/tensor.hpp>
#include <dtr/detail/graph.hpp>

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

//! @brief The DTR runtime for one device.
//!
//! @tparam Backend   where storages live and operators run (dtr::backend)
//! @tparam Heuristic which storage to evict under pressure (dtr::heuristic); the default,
//!                   dtr_eqclass, is the best policy whose upkeep stays near-constant per
//!                   event on any program (docs/heuristics.md, "The default")
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
template <class Backend, class Heuristic = heuristics::dtr_eqclass>
class runtime final : private detail::runtime_base, private detail::executor<Backend> {
    static_assert(backend<Backend>,
                  "dtr::runtime<Backend, Heuristic>: Backend does not model dtr::backend "
                  "(pointer types, allocate/deallocate/copy, and "
                  "template <class Body> cost_t execute(Body&&) taking a capturing lambda; see "
                  "dtr/concepts.hpp)");
    static_assert(heuristic<Heuristic>,
                  "dtr::runtime<Backend, Heuristic>: Heuristic does not model dtr::heuristic "
                  "(a storage_data type, and score(storage, context) or choose(pool, context); "
                  "see dtr/concepts.hpp)");

public:
    using backend_type = Backend;
    using heuristic_type = Heuristic;
    using pointer = typename Backend::pointer;
    using const_pointer = typename Backend::const_pointer;
    using context = op_context<Backend>;
    //! The storage type heuristics are instantiated with.
    using storage_type = detail::storage_node<Backend, typename Heuristic::storage_data>;
    using read_guard = basic_pin_guard<runtime, false>;
    using write_guard = basic_pin_guard<runtime, true>;

private:
    // Checked here, with the real storage type, so that a wrong hook or choose() fails
    // with a message naming it rather than being silently ignored.
    static_assert(detail::check_hooks<Heuristic, storage_type>::value);

public:
    //! @brief A runtime with the given options over `backend`, choosing victims with
    //! `heuristic`.
    explicit runtime(runtime_options options = {}, Backend backend = Backend{},
                     Heuristic heuristic = Heuristic{})
        : backend_(std::move(backend)), heuristic_(std::move(heuristic)), options_(options) {}

    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    //! @brief Frees every storage. Handles that outlive the runtime become orphans: they
    //! can still be destroyed, but any use throws dtr::logic_error.
    ~runtime();

    // ---- creating tensors -----------------------------------------------------------

    //! @brief A constant (parameter, input): never evicted, never recomputed. Its bytes are
    //! uninitialized; fill them with pin_for_write() before using it.
    //! @throws dtr::out_of_memory when it cannot fit under the budget.
    tensor constant(std::size_t bytes) {
        return constant(bytes, [](buffer_view<pointer>) {});
    }

    //! @brief A constant whose bytes `init(buffer_view<pointer>)` writes. `init` must not
    //! call the runtime.
    template <class Init>
    tensor constant(std::size_t bytes, Init&& init);

    //! @brief Runs a one-output operator on `inputs` and returns its output.
    //! @throws dtr::out_of_memory (strong guarantee), dtr::logic_error on misuse, and
    //! whatever the operator throws.
    template <class Op>
    tensor call(Op&& op, std::span<const tensor> inputs, call_options options = {}) {
        tensor out;
        call_impl(std::forward<Op>(op), inputs, 1, options, &out);
        return out;
    }
    template <class Op>
    tensor call(Op&& op, std::initializer_list<tensor> inputs, call_options options = {}) {
        return call(std::forward<Op>(op), std::span<const tensor>(inputs.begin(), inputs.size()),
                    std::move(options));
    }

    //! @brief Runs an operator with N outputs: `auto [a, b] = rt.call<2>(op, {x});`.
    template <std::size_t N, class Op>
    std::array<tensor, N> call(Op&& op, std::span<const tensor> inputs, call_options options = {}) {
        std::array<tensor, N> out;
        call_impl(std::forward<Op>(op), inputs, N, options, out.data());
        return out;
    }
    template <std::size_t N, class Op>
    std::array<tensor, N> call(Op&& op, std::initializer_list<tensor> inputs,
                               call_options options = {}) {
        return call<N>(std::forward<Op>(op),
                       std::span<const tensor>(inputs.begin(), inputs.size()), std::move(options));
    }

    //! @brief Runs an operator whose number of outputs is known only at run time.
    template <class Op>
    std::vector<tensor> call_n(std::size_t outputs, Op&& op, std::span<const tensor> inputs,
                               call_options options = {}) {
        std::vector<tensor> out(outputs);
        call_impl(std::forward<Op>(op), inputs, outputs, options, out.data());
        return out;
    }

    //! @brief Runs an in-place operator that updates inputs `mutated` (through
    //! op_context::inout) and has no outputs. Afterwards the mutated tensors (and, under
    //! mutation_scope::storage, every view of their storages) hold the new values; the old
    //! values stay available to the operators that read them (copy-on-write).
    template <class Op>
    void mutate(Op&& op, std::span<const tensor> inputs, std::vector<std::uint32_t> mutated,
                std::optional<cost_t> cost = std::nullopt) {
        call_options options{cost, std::move(mutated)};
        call_impl(std::forward<Op>(op), inputs, 0, options, nullptr);
    }
    template <class Op>
    void mutate(Op&& op, std::initializer_list<tensor> inputs, std::vector<std::uint32_t> mutated,
                std::optional<cost_t> cost = std::nullopt) {
        mutate(std::forward<Op>(op), std::span<const tensor>(inputs.begin(), inputs.size()),
               std::move(mutated), cost);
    }

    //! @brief A new tensor viewing bytes [offset, offset + length) of `t`, without running an
    //! operator (pure metadata). With the full range it is a second, independently
    //! rebindable name for the same value (what the DTR logs call COPY).
    tensor view(const tensor& t, std::size_t offset, std::size_t length);
    tensor view(const tensor& t) { return view(t, 0, node_of(t, "view")->length); }

    // ---- access -----------------------------------------------------------------------

    //! @brief Makes `t` resident (recomputing it if needed) and keeps it so while the guard
    //! lives; the guard's data() is read-only.
    //! @throws dtr::out_of_memory when rematerializing it cannot fit.
    read_guard pin(const tensor& t);

    //! @brief Like pin(), but writable: only for constants that no operator has read yet
    //! (initialization). Writing any other storage would break recomputation; update values
    //! with mutate() instead.
    write_guard pin_for_write(const tensor& t);

    //! @brief Evicts `t`'s storage now if it is evictable. @return true if it was evicted.
    bool evict(const tensor& t);

    // ---- state ------------------------------------------------------------------------

    [[nodiscard]] bool is_resident(const tensor& t) const { return storage_of(t)->is_resident; }
    //! @brief True when `t`'s storage can be recomputed (and so evicted).
    [[nodiscard]] bool is_rematerializable(const tensor& t) const {
        return storage_of(t)->rematerializable();
    }
    [[nodiscard]] std::size_t budget() const noexcept { return options_.budget; }
    //! @brief Changes the budget, evicting until resident bytes fit under it. A new budget
    //! also restarts the rematerialization allowance (see set_remat_limit).
    //! @throws dtr::out_of_memory (budget unchanged) when not enough is evictable.
    void set_budget(std::size_t bytes);
    //! @brief Sets runtime_options::remat_limit and restarts the allowance: from now on,
    //! dtr::thrashing is thrown once recomputation since this call (or since the last
    //! set_budget) costs more than `limit` ns. After a dtr::thrashing error, every further
    //! recomputation throws it again until the budget is raised with set_budget() or the
    //! allowance is restarted here; nothing computed is lost meanwhile.
    //! @throws dtr::logic_error on a negative or NaN limit, or from inside an operator.
    void set_remat_limit(cost_t limit);
    [[nodiscard]] std::size_t resident_bytes() const noexcept { return counters_.resident_bytes; }
    //! @brief The runtime clock: total cost of every operator run so far (ns). On a backend
    //! with deferred costs (dtr::deferred_costs) it advances by the provisional cost at once
    //! and by the rest when the measurement arrives; it never runs backwards.
    [[nodiscard]] cost_t clock() const noexcept { return clock_; }
    //! @brief Waits for every cost measurement still running on the device and folds it into
    //! the clock, the recorded costs and the counters. Does nothing on backends that measure
    //! synchronously (host, sim). Useful before reading stats() or clock().
    //! @throws whatever the backend throws while waiting (e.g. dtr::cuda_error).
    void settle_costs();
    [[nodiscard]] const counters& stats() const noexcept { return counters_; }
    [[nodiscard]] const runtime_options& options() const noexcept { return options_; }
    //! @brief Storage records alive (resident or evicted).
    [[nodiscard]] std::size_t storage_count() const noexcept { return all_storages_.size(); }
    //! @brief Operator records alive (recipes still needed).
    [[nodiscard]] std::size_t operator_count() const noexcept { return all_ops_.size(); }
    //! @brief Storages the heuristic may choose from right now.
    [[nodiscard]] std::size_t evictable_count() const noexcept { return pool_.size(); }
    [[nodiscard]] Backend& backend() noexcept { return backend_; }
    [[nodiscard]] Heuristic& heuristic() noexcept { return heuristic_; }

    //! @brief Calls f(const storage_type&) for every live storage, in creation order
    //! (diagnostics, statistics). f must not call the runtime.
    template <class F>
    void for_each_storage(F&& f) const {
        for (const storage_type& s : all_storages_) f(s);
    }

    //! @brief Walks the whole graph and throws dtr::logic_error describing the first broken
    //! invariant (tests and debugging). @par Complexity: linear in the graph.
    void check_invariants() const;

private:
    template <class, bool>
    friend class basic_pin_guard;

    using meta_type = typename Heuristic::storage_data;
    using storage_t = storage_type;
    using op_t = detail::op_node<Backend, meta_type>;
    using edge_t = detail::input_edge<Backend, meta_type>;
    template <class T>
    using member_list = boost::intrusive::list<
        T, boost::intrusive::member_hook<T, detail::list_hook, &T::all_hook>,
        boost::intrusive::constant_time_size<true>, boost::intrusive::size_type<std::size_t>>;
    using pool_list = boost::intrusive::list<
        storage_t, boost::intrusive::member_hook<storage_t, detail::list_hook, &storage_t::pool_hook>,
        boost::intrusive::constant_time_size<true>, boost::intrusive::size_type<std::size_t>>;

public:
    //! The evictable pool as heuristics see it in `choose` (a range of storage_type).
    using pool_type = pool_list;

private:
    //! Buffers of the operator being run.
    struct output_state {
        pointer ptr{};
        std::size_t bytes = 0;
        storage_t* target = nullptr; //!< storage being (re)filled; null: scratch to discard
        bool declared = false;
        bool alias = false;
    };
    struct version_state {
        pointer ptr{};
        std::size_t bytes = 0;
        storage_t* target = nullptr;
        bool allocated = false;
    };
    //! One step of the rematerialization work stack: an operator waiting for its inputs.
    struct frame {
        op_t* op;
        std::uint32_t next_input; //!< inputs before it are pinned
        bool started;             //!< the inputs resident on arrival are pinned
        bool yielded = false;     //!< its pins were given up (yield_frame_pins): re-validate
        std::uint8_t yields = 0;  //!< how often it gave them up
    };

    //! Marks the runtime busy for one public operation; releases that happen meanwhile
    //! (handles dropped inside operators or by destroyed recipes) are handled at the end.
    class busy_scope {
    public:
        explicit busy_scope(runtime& rt) noexcept : rt_(rt), outer_(!rt.busy_) { rt.busy_ = true; }
        ~busy_scope() {
            if (outer_) {
                rt_.finish();
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
    detail::tensor_node* node_of(const tensor& t, const char* what) const;
    storage_t* storage_of(const tensor& t) const {
        return static_cast<storage_t*>(node_of(t, "tensor query")->storage);
    }
    //! Makes sure `count` tensor nodes can be handed out without allocating.
    void reserve_tensor_nodes(std::size_t count);
    //! A tensor on `s`; does not allocate after reserve_tensor_nodes(1).
    tensor make_tensor(storage_t* s, std::size_t offset, std::size_t length);
    void release_tensor(detail::tensor_node* node) noexcept override;
    void release_now(detail::tensor_node* node) noexcept;
    void unpin_guard(detail::storage_header* pinned, bool writable) noexcept;
    template <bool Writable>
    basic_pin_guard<runtime, Writable> pin_impl(const tensor& t);

    // ---- calls ------------------------------------------------------------------------
    template <class Op>
    void call_impl(Op&& op, std::span<const tensor> inputs, std::size_t outputs,
                   const call_options& options, tensor* results);
    void run(op_t& op, bool remat, std::optional<cost_t> supplied);
    void discard_execution(op_t& op, bool remat) noexcept;
    buffer_view<pointer> allocate_output(std::size_t index, std::size_t bytes) override;
    void alias_output(std::size_t output, std::size_t input, std::size_t offset,
                      std::size_t length) override;

    // ---- residency ----------------------------------------------------------------------
    void touch_inputs(op_t& op);
    void secure_inputs(op_t& root);
    //! Under restore_pins::yield_when_full, unpins the inputs of the restore frames below
    //! the top; @return whether anything was released (the caller may evict again).
    bool yield_frame_pins() noexcept;
    //! Recomputes `op`, whose inputs are pinned, and unpins them (also on failure).
    void rematerialize(op_t& op);
    void unpin_inputs(op_t& op) noexcept;
    void make_resident(storage_t* target);
    void pin(storage_t* s) noexcept {
        if (s->pins++ == 0) refresh_pool(s);
    }
    void unpin(storage_t* s) noexcept {
        if (--s->pins == 0) {
            refresh_pool(s);
            if (s->tensors.empty()) enqueue(s);
        }
    }
    void refresh_pool(storage_t* s) noexcept;

    // ---- memory -------------------------------------------------------------------------
    pointer allocate(std::size_t bytes);
    void free_memory(pointer p, std::size_t bytes) noexcept;
    storage_t* choose_victim();
    //! What evict_window() did.
    enum class window_outcome : std::uint8_t {
        evicted,     //!< evicted a window: the retry gets a block
        none,        //!< no window spans the request: evicting more cannot help
        unavailable, //!< the backend has no layout, or the policy is one_by_one
    };
    window_outcome evict_window(std::size_t bytes);
    void evict_storage(storage_t* s, bool eager) noexcept;
    [[noreturn]] void throw_out_of_memory(std::size_t bytes, bool backend_refused,
                                          bool system_refused = false) const;

    // ---- deferred costs (backends modelling dtr::deferred_costs) -----------------------
    //! A measurement started by execute() and not handed over yet, in execute() order.
    struct pending_cost {
        op_t* op;           //!< record to correct; null when gone or not a first run
        cost_t provisional; //!< what execute() returned and the runtime recorded
        bool remat;
        bool apply;         //!< false when the recorded cost was supplied, not measured
    };
    void collect_costs(cost_collection mode);
    void apply_cost(cost_t actual) noexcept;
    heuristic_context hctx() noexcept {
        return {clock_, &counters_.metadata_accesses, &counters_.heuristic_evaluations};
    }

    // ---- lifetime -----------------------------------------------------------------------
    storage_t* new_storage(std::size_t bytes) {
        return new storage_t(next_storage_id_++, bytes);
    }
    void on_last_handle(storage_t* s) noexcept;
    void enqueue(storage_t* s) noexcept;
    void finish() noexcept;
    void examine(storage_t* s) noexcept;
    bool banish_safe(const storage_t* s) const noexcept;
    void banish(storage_t* s) noexcept;
    void destroy_storage(storage_t* s) noexcept;
    void destroy_op(op_t* op) noexcept;

    // ---- hooks (the table in dtr/hooks.hpp) -----------------------------------------
#define DTR_DEFINE_HOOK(name)                                                               \
    void hook_##name(storage_t& s) noexcept {                                               \
        if constexpr (hook::name##_t::callable<Heuristic, storage_t>)                       \
            hook::name##_t::invoke(heuristic_, s, hctx());                                  \
    }
    DTR_HEURISTIC_HOOKS(DTR_DEFINE_HOOK)
#undef DTR_DEFINE_HOOK

    Backend backend_;
    Heuristic heuristic_;
    runtime_options options_;
    counters counters_{};
    cost_t clock_ = 0;
    std::uint64_t next_storage_id_ = 0;
    std::uint64_t next_op_id_ = 0;
    std::size_t user_pins_ = 0;
    cost_t remat_allowance_start_ = 0; //!< counters_.remat_cost when the allowance restarted
    bool busy_ = false;
    bool in_operator_ = false;

    member_list<storage_t> all_storages_;
    member_list<op_t> all_ops_;
    pool_list pool_;

    // Work lists, kept to reuse their capacity.
    std::vector<storage_t*> examine_queue_;
    detail::tensor_node* deferred_ = nullptr; //!< releases to handle when not busy
    std::vector<frame> frames_;
    std::vector<detail::tensor_node*> spare_nodes_; //!< owned; see reserve_tensor_nodes

    // State of the operator being run (executions never nest).
    op_t* exec_op_ = nullptr;
    bool exec_remat_ = false;
    std::vector<output_state> exec_outputs_;
    std::vector<version_state> exec_versions_;
    std::vector<detail::input_binding<Backend>> exec_bindings_;

    // Fragmentation-aware eviction (evict_window): the region's blocks, the storage owning
    // each evictable one, and the evictable storages by region offset.
    std::vector<window_block> window_blocks_;
    std::vector<storage_t*> window_owners_;
    std::vector<std::pair<std::size_t, storage_t*>> window_candidates_;

    // Deferred costs: [pending_head_, size) are awaiting their measurement.
    std::vector<pending_cost> pending_costs_;
    std::size_t pending_head_ = 0;
};

} // namespace dtr

#include <dtr/detail/runtime_calls.hpp>
#include <dtr/detail/runtime_residency.hpp>
#include <dtr/detail/runtime_lifetime.hpp>
