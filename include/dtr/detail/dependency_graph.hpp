// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The runtime's dependency graph: storages (units of eviction), operator records
//! (recipes), the input edges between them, and the registry of all of them.
//!
//! Not to be confused with the static training graphs of the tools (bench/): this graph is
//! built online, one record per call, and shrinks as storages are freed.
//!
//! Storages are immutable once computed: an in-place update makes a new storage version
//! (copy-on-write), so every storage's bytes are a pure function of its recipe and its
//! parents' bytes. That is what makes recomputation bit-exact. Operator records reference
//! their inputs by storage and byte range, not by tensor, so tensors (the user's handles)
//! can move to a new version freely.
//!
//! One vocabulary for a storage: heuristics see `storage_node` (accessors only; its state
//! is protected), the runtime and its collaborators work on `storage_record`, which derives
//! from it and makes that state public inside dtr::detail.
#pragma once

#include <dtr/detail/op_function.hpp>
#include <dtr/offload.hpp>
#include <dtr/op_context.hpp>
#include <dtr/options.hpp>
#include <dtr/tensor.hpp>

#include <boost/intrusive/list.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace dtr::detail {

namespace bi = boost::intrusive;
using list_hook = bi::list_member_hook<bi::link_mode<bi::safe_link>>;

//! The part of a storage that tensor handles see (as an opaque pointer).
struct storage_header {
    using tensor_list =
        bi::list<tensor_node, bi::member_hook<tensor_node, tensor_hook, &tensor_node::hook>,
                 bi::constant_time_size<true>, bi::size_type<std::size_t>>;

protected:
    storage_header() = default;
    ~storage_header() = default;

    //! Tensors currently viewing this storage; each has at least one handle, so the list's
    //! size is the storage's number of external references.
    tensor_list tensors;
};

template <class Backend, class Meta>
struct op_node;
template <class Backend, class Meta>
class storage_node;
template <class Backend, class Meta>
struct storage_record;

//! One input of an operator record: a byte range of a storage version. Linked into the
//! storage's consumer list while the record lives (the storage's dependents).
template <class Backend, class Meta>
struct input_edge {
    storage_record<Backend, Meta>* storage = nullptr;
    op_node<Backend, Meta>* op = nullptr;
    std::size_t offset = 0;
    std::size_t length = 0;
    //! Index into op_node::versions when this input views a storage the call mutates
    //! (the operator then sees the new version); -1 otherwise.
    std::int32_t version = -1;
    bool mutated = false; //!< listed in call_options::mutates
    bool pinned = false;  //!< pinned for the operator's run (a record runs once at a time)
    list_hook consumer_hook{};
};

//! What one output of an operator is.
template <class Backend, class Meta>
struct output_slot {
    //! The live storage this output created (null once freed, and for aliases).
    storage_record<Backend, Meta>* storage = nullptr;
    std::size_t bytes = 0;         //!< size recorded at the first run (fresh outputs)
    std::int32_t alias_input = -1; //!< input this output views, or -1 for a fresh output
    std::size_t alias_offset = 0;  //!< relative to the input's view
    std::size_t alias_length = 0;
};

//! The new version of one mutated storage.
template <class Backend, class Meta>
struct version_slot {
    storage_record<Backend, Meta>* storage = nullptr; //!< live new version (null once freed)
    std::uint32_t input = 0;                          //!< first input that views the old version
};

//! A recipe: the operator, its inputs and what it produced. Lives while at least one
//! storage it produced is alive and still rematerializable from it (`live`).
//! Made by op_node::make and freed by op_node::destroy (or its owning pointer, op_node::ptr):
//! the record and its three arrays share one heap block, one allocation per call instead of
//! up to four (allocations are much of a call's cost when nothing is evicted).
template <class Backend, class Meta>
struct op_node {
    using edge = input_edge<Backend, Meta>;
    using output = output_slot<Backend, Meta>;
    using version = version_slot<Backend, Meta>;

    //! Frees a record made by make().
    struct deleter {
        void operator()(op_node* o) const noexcept { destroy(o); }
    };
    using ptr = std::unique_ptr<op_node, deleter>;

    //! @brief A record for `f` with `inputs` edges, `outputs` output slots and `versions`
    //! version slots, value-initialized, in one allocation.
    //! @throws std::bad_alloc; whatever moving `f` into the record throws (nothing is leaked).
    template <class F>
    static ptr make(F&& f, std::uint64_t id, std::uint32_t inputs, std::uint32_t outputs,
                    std::uint32_t versions) {
        constexpr std::size_t block_alignment = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
        static_assert(alignof(op_node) <= block_alignment && alignof(edge) <= block_alignment &&
                      alignof(output) <= block_alignment && alignof(version) <= block_alignment);
        const layout l(inputs, outputs, versions);
        std::byte* block = static_cast<std::byte*>(::operator new(l.total));
        // An empty array is null (most records have no versions): nothing points past the
        // block, which GCC's -Warray-bounds would otherwise flag where it cannot see the count.
        auto* in0 = inputs == 0 ? nullptr : reinterpret_cast<edge*>(block + l.in);
        std::uninitialized_value_construct_n(in0, inputs);
        auto* out0 = outputs == 0 ? nullptr : reinterpret_cast<output*>(block + l.out);
        std::uninitialized_value_construct_n(out0, outputs);
        auto* ver0 = versions == 0 ? nullptr : reinterpret_cast<version*>(block + l.ver);
        std::uninitialized_value_construct_n(ver0, versions);
        try {
            return ptr(::new (static_cast<void*>(block)) op_node(
                std::forward<F>(f), id, inputs, outputs, versions, in0, out0, ver0));
        } catch (...) {
            destroy_arrays(in0, inputs, out0, outputs, ver0, versions);
            ::operator delete(static_cast<void*>(block));
            throw;
        }
    }

    //! @brief Frees a record made by make() and its arrays.
    static void destroy(op_node* o) noexcept {
        if (o == nullptr) return;
        destroy_arrays(o->in, o->n_inputs, o->out, o->n_outputs, o->ver, o->n_versions);
        o->~op_node();
        ::operator delete(static_cast<void*>(o));
    }

    op_node(const op_node&) = delete;
    op_node& operator=(const op_node&) = delete;

    op_function<op_context<Backend>> fn;
    std::uint64_t id;
    std::uint32_t n_inputs, n_outputs, n_versions;
    // The arrays, in the record's block; each null when empty.
    edge* in;     //!< n_inputs edges
    output* out;  //!< n_outputs slots
    version* ver; //!< n_versions slots (most records have none)
    cost_t cost = 0;
    bool cost_supplied = false; //!< recomputations reuse `cost` instead of measuring
    //! restore_pins::planned: the restore whose plan walked this record (once per plan).
    std::uint32_t plan_epoch = 0;
    std::uint32_t live = 0; //!< storages alive whose recipe this is
    list_hook all_hook{};

private:
    //! Byte offsets of the arrays after the record, and the block's size.
    struct layout {
        std::size_t in, out, ver, total;
        layout(std::uint32_t inputs, std::uint32_t outputs, std::uint32_t versions) noexcept
            : in(aligned<edge>(sizeof(op_node))),
              out(aligned<output>(in + inputs * sizeof(edge))),
              ver(aligned<version>(out + outputs * sizeof(output))),
              total(ver + versions * sizeof(version)) {}
        //! `offset` rounded up to T's alignment.
        template <class T>
        static constexpr std::size_t aligned(std::size_t offset) noexcept {
            return (offset + alignof(T) - 1) / alignof(T) * alignof(T);
        }
    };

    template <class F>
    op_node(F&& f, std::uint64_t id_, std::uint32_t inputs, std::uint32_t outputs,
            std::uint32_t versions, edge* in_, output* out_, version* ver_)
        : fn(std::forward<F>(f)),
          id(id_),
          n_inputs(inputs),
          n_outputs(outputs),
          n_versions(versions),
          in(in_),
          out(out_),
          ver(ver_) {}
    ~op_node() = default;

    static void destroy_arrays(edge* in, std::uint32_t inputs, output* out, std::uint32_t outputs,
                               version* ver, std::uint32_t versions) noexcept {
        std::destroy_n(ver, versions);
        std::destroy_n(out, outputs);
        std::destroy_n(in, inputs);
    }

public:
    //! Calls f(storage_record&) for each live storage this record is the recipe of.
    template <class F>
    void for_each_product(F&& f) const {
        for (std::uint32_t i = 0; i < n_outputs; ++i)
            if (out[i].storage != nullptr) f(*out[i].storage);
        for (std::uint32_t i = 0; i < n_versions; ++i)
            if (ver[i].storage != nullptr) f(*ver[i].storage);
    }
};

//! @brief A storage as a heuristic sees it: one backend allocation, the unit of eviction.
//!
//! Policies read it through these const member functions and keep their own data in
//! `meta()`; the runtime's state is not theirs to see (it is reached through
//! storage_record, inside the runtime). This is `runtime<B, H>::storage_type`, the type
//! hooks, `score` and `choose` receive.
template <class Backend, class Meta>
class storage_node : public storage_header {
public:
    using op_type = op_node<Backend, Meta>;
    using edge_type = input_edge<Backend, Meta>;

    //! @brief Stable identifier (creation order).
    [[nodiscard]] std::uint64_t id() const noexcept { return sid; }
    //! @brief Bytes of the allocation (the memory eviction frees).
    [[nodiscard]] std::size_t size() const noexcept { return bytes; }
    //! @brief Cost of recomputing this storage alone: its operator's cost, plus the cost
    //! of operators that made views of it (as in the DTR simulator's storage compute).
    [[nodiscard]] cost_t cost() const noexcept { return compute_cost; }
    //! @brief Runtime clock at the last use of this storage as an operator input (or at its
    //! creation).
    [[nodiscard]] cost_t last_access() const noexcept { return accessed; }
    //! @brief True unless getting it back needs a recomputation: resident on the device, or
    //! offloaded to the host tier (it comes back by transfer; runtime_options::offload).
    [[nodiscard]] bool resident() const noexcept { return is_resident || host.valid(); }
    //! @brief True while its bytes are in the host tier only (runtime_options::offload).
    [[nodiscard]] bool offloaded() const noexcept { return !is_resident && host.valid(); }
    //! @brief True when this storage has a recipe (it can be evicted and recomputed).
    [[nodiscard]] bool rematerializable() const noexcept { return producer != nullptr; }
    //! @brief True while evicting it is allowed (resident, rematerializable, unpinned).
    [[nodiscard]] bool evictable() const noexcept {
        return is_resident && producer != nullptr && pins == 0;
    }
    //! @brief External references (tensors with handles) on this storage.
    [[nodiscard]] std::size_t handle_count() const noexcept { return tensors.size(); }
    //! @brief True when no handle refers to it: the program released it, and it stays for
    //! its dependents' recipes or because the release keeps it (dealloc_policy).
    [[nodiscard]] bool unheld() const noexcept { return tensors.empty(); }
    //! @brief Live operator records that take this storage as input.
    [[nodiscard]] std::size_t dependent_count() const noexcept { return consumers.size(); }
    //! @brief The runtime's forecast of this storage's next read by the program, as a stamp
    //! that dtr::step_forecast reads (heuristic_context::forecast): 0 when there is none.
    [[nodiscard]] std::uint64_t next_use() const noexcept { return use_stamp; }
    //! @brief The policy's own data for this storage.
    [[nodiscard]] Meta& meta() noexcept { return heuristic_data; }
    [[nodiscard]] const Meta& meta() const noexcept { return heuristic_data; }

    //! @brief Calls f(storage_node&) for each input storage of this storage's recipe
    //! (repeats possible when an input is used twice). Nothing for constants.
    template <class F>
    void for_each_parent(F&& f) const {
        if (producer == nullptr) return;
        for (std::uint32_t i = 0; i < producer->n_inputs; ++i)
            f(static_cast<storage_node&>(*producer->in[i].storage));
    }
    //! @brief Calls f(storage_node&) for each live storage computed from this one (the
    //! products of every operator record that reads it). Heuristics may update their own
    //! meta() of the neighbours they are given.
    template <class F>
    void for_each_child(F&& f) const {
        for (const edge_type& e : consumers)
            e.op->for_each_product([&](storage_node& child) { f(child); });
    }

protected:
    using consumer_list =
        bi::list<edge_type, bi::member_hook<edge_type, list_hook, &edge_type::consumer_hook>,
                 bi::constant_time_size<true>, bi::size_type<std::size_t>>;

    storage_node(std::uint64_t id_, std::size_t bytes_) : sid(id_), bytes(bytes_) {}
    ~storage_node() = default;

    // The state the accessors read; the rest lives in storage_record.
    std::uint64_t sid;
    std::size_t bytes;
    op_type* producer = nullptr; //!< recipe; null for constants and banished children
    cost_t compute_cost = 0;
    cost_t accessed = 0;
    //! Next read forecast by the step tracker (dtr::step_forecast's stamp; 0: none).
    std::uint64_t use_stamp = 0;
    std::uint32_t pins = 0; //!< operator inputs in use, rematerialization frames, guards
    bool is_resident = false;
    consumer_list consumers;
    list_hook pool_hook{}; //!< membership in the evictable pool
    [[no_unique_address]] Meta heuristic_data{};
    //! Host copy (offload); empty on backends without a host tier.
    [[no_unique_address]] host_slot<Backend> host{};
};

//! @brief A storage as the runtime sees it: storage_node's state made public, plus what
//! only the runtime uses. Never handed to a heuristic as such.
template <class Backend, class Meta>
struct storage_record final : storage_node<Backend, Meta> {
    using base = storage_node<Backend, Meta>;
    using pointer = typename Backend::pointer;

    storage_record(std::uint64_t id_, std::size_t bytes_) : base(id_, bytes_) {}

    //! @brief The heuristic's view of this storage.
    [[nodiscard]] base& view() noexcept { return *this; }
    [[nodiscard]] const base& view() const noexcept { return *this; }
    //! @brief The record behind a storage a heuristic handed back (every storage_node is one).
    [[nodiscard]] static storage_record* of(base* s) noexcept {
        return static_cast<storage_record*>(s);
    }

    using base::accessed;
    using base::bytes;
    using base::compute_cost;
    using base::consumers;
    using base::heuristic_data;
    using base::host;
    using base::is_resident;
    using base::pins;
    using base::pool_hook;
    using base::producer;
    using base::sid;
    using base::tensors;
    using base::use_stamp;
    using typename base::consumer_list;

    pointer ptr{};
    std::uint32_t write_guards = 0; //!< live pin_for_write guards (also counted in pins)
    bool is_constant = false;       //!< created by runtime::constant (or a version of one)
    bool may_offload = false;       //!< a constant runtime::allow_offload lets leave
    bool banish_pending = false;    //!< released under the banish policy, not yet safe
    bool queued = false;            //!< on the release queue (collection or banish re-check)
    bool restore_held = false;      //!< held by a planned restore (one of its pins)
    bool awaited = false; //!< dropped, read by the forecast: in the offloader's awaited map
    //! Lost its last handle (release_queue::on_last_handle); none comes back. Before its
    //! first handle a new storage is unheld too, but not released.
    bool released = false;
    //! restore_pins::planned: the reads the running restore's recipes still make of this
    //! storage, valid while `plan_epoch` is the restore's; where it sits in the list of
    //! held storages while `restore_held`.
    std::uint32_t plan_epoch = 0;
    std::uint32_t plan_reads = 0;
    std::uint32_t hold_slot = 0;
    //! The step tracker's number of the last call slot (an input read or an output made by a
    //! program's call) that named this storage; ~0: none yet.
    std::uint64_t last_slot = ~std::uint64_t{0};
    list_hook all_hook{}; //!< membership in the registry's list of all storages
};

//! @brief The registry: every live storage and operator record, in creation order, and the
//! identifiers of the next ones.
template <class Backend, class Meta>
class dependency_graph {
public:
    using storage = storage_record<Backend, Meta>;
    using op = op_node<Backend, Meta>;
    template <class T>
    using member_list = bi::list<T, bi::member_hook<T, list_hook, &T::all_hook>,
                                 bi::constant_time_size<true>, bi::size_type<std::size_t>>;

    dependency_graph() = default;
    dependency_graph(const dependency_graph&) = delete;
    dependency_graph& operator=(const dependency_graph&) = delete;
    //! Frees every record left (the runtime has released their memory and handles).
    ~dependency_graph() {
        ops.clear_and_dispose([](op* o) { op::destroy(o); });
        storages.clear_and_dispose([](storage* s) { delete s; });
    }

    //! A storage record with the next identifier, not registered yet.
    storage* new_storage(std::size_t bytes) { return new storage(next_storage_id_++, bytes); }
    //! A record for `f` with the next identifier, not registered yet.
    template <class F>
    typename op::ptr new_op(F&& f, std::uint32_t inputs, std::uint32_t outputs,
                            std::uint32_t versions) {
        return op::make(std::forward<F>(f), next_op_id_++, inputs, outputs, versions);
    }

    member_list<storage> storages; //!< resident or evicted
    member_list<op> ops;           //!< recipes still needed

private:
    std::uint64_t next_storage_id_ = 0;
    std::uint64_t next_op_id_ = 0;
};

//! @brief Base of the runtime's collaborators (dtr/detail/execution.hpp and its fellows):
//! the reference to the runtime through which each reaches the shared state and the
//! others, and the graph's types. Not copyable: a collaborator belongs to one runtime.
template <class Rt, class Backend, class Meta>
class collaborator {
public:
    using storage = storage_record<Backend, Meta>;
    using op = op_node<Backend, Meta>;
    using edge = input_edge<Backend, Meta>;

    collaborator(const collaborator&) = delete;
    collaborator& operator=(const collaborator&) = delete;

protected:
    explicit collaborator(Rt& rt) noexcept : rt_(rt) {}
    ~collaborator() = default;

    Rt& rt_;
};

} // namespace dtr::detail
