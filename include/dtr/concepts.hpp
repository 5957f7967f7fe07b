// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The two customization points of dtr::runtime: dtr::backend (where memory lives
//! and operators run) and dtr::heuristic (which storage to evict).
#pragma once

#include <dtr/options.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace dtr {

//! @brief A memory and execution resource, in the spirit of RMM's device_memory_resource.
//!
//! - `pointer` / `const_pointer`: addresses in the backend's memory; value-initialized means
//!   "none"; `p + n` advances by n bytes. Host backends use std::byte*; device backends may
//!   use device addresses the host never dereferences; the simulator uses integers.
//! - `allocate(bytes)`: a block of at least `bytes` bytes suitably aligned, or `pointer{}`
//!   when the backend has no room (the runtime then evicts and retries; it never asks the
//!   backend for more than its budget allows). Other failures throw.
//! - `deallocate(p, bytes)`: returns a block; never throws.
//! - `copy(dst, src, bytes)`: copies within the backend (copy-on-write of in-place updates).
//! - `execute(body)`: runs an operator body and returns its cost in nanoseconds on the
//!   backend's clock. The body is a capturing lambda (`void()`), not a function pointer:
//!   declare `template <class Body> cost_t execute(Body&& body)`. The runtime ignores the
//!   result when the caller supplied the cost; a measured cost it records must be a finite
//!   number >= 0 (otherwise the call throws dtr::logic_error, its run discarded).
//!
//! Optional members, detected and used when present (docs/backends.md):
//! - `allocate(bytes, arena::placement)`: a placed allocation (the arena backends), used
//!   under runtime_options::placement;
//! - `memory_info()` (dtr::reports_memory, <dtr/memory_report.hpp>): the layout of a fixed
//!   region (free bytes, largest free block), reported in dtr::out_of_memory;
//! - `collect_costs(sink, mode)` (dtr::deferred_costs, <dtr/deferred_cost.hpp>): costs
//!   measured asynchronously; execute() then returns a provisional cost.
//! - `cost_clock()` (dtr::cost_clock, <dtr/cost_clock.hpp>): the clock execute() measures
//!   with, so that the runtime keeps the evictions an operator's outputs make out of its
//!   measured cost.
namespace detail {

//! What the runtime hands to Backend::execute: a callable with state, as its lambdas are
//! (so that a backend accepting only `void (*)()` fails the concept, not deep inside).
struct execute_body_archetype {
    void* state;
    void operator()() const;
};

} // namespace detail

template <class B>
concept backend = requires(B& b, typename B::pointer p, typename B::const_pointer cp, std::size_t n,
                           detail::execute_body_archetype body) {
    typename B::pointer;
    typename B::const_pointer;
    requires std::regular<typename B::pointer>;
    requires std::convertible_to<typename B::pointer, typename B::const_pointer>;
    { p + n } -> std::convertible_to<typename B::pointer>;
    { cp + n } -> std::convertible_to<typename B::const_pointer>;
    { b.allocate(n) } -> std::same_as<typename B::pointer>;
    { b.deallocate(p, n) }
    noexcept;
    {b.copy(p, cp, n)};
    { b.execute(body) } -> std::convertible_to<cost_t>;
    { b.execute(detail::execute_body_archetype{}) } -> std::convertible_to<cost_t>;
};

//! @brief Optional capability of a backend whose allocations tile one fixed region (the
//! dtr::arena backends: host_arena_backend, cuda_backend, sim_backend::with_arena): it
//! describes the region's address layout, so that when the budget allows an allocation but
//! no free block holds it, the runtime can evict the cheapest window of adjacent blocks
//! (dtr::cheapest_window) instead of evicting in heuristic order until a block appears
//! (runtime_options::fragmentation).
//! - `has_layout()`: whether this instance has such a region (false: the capability is
//!   unused, e.g. a sim_backend with an endless address space);
//! - `layout_alignment()`: the region rounds every request up to a multiple of this;
//! - `region_offset(p)`: the offset in the region of the block that allocate() returned as p;
//! - `for_each_block(fn)`: calls `fn(offset, size, is_free)` for every block in address order.
//! Freeing every evictable block of a window must leave one free block covering it (the
//! allocator coalesces), and allocate() must then succeed for a request that fits it.
template <class B>
concept reports_layout = requires(const B& b, typename B::const_pointer p,
                                  void (*fn)(std::size_t, std::size_t, bool)) {
    { b.has_layout() } -> std::convertible_to<bool>;
    { b.layout_alignment() } -> std::convertible_to<std::size_t>;
    { b.region_offset(p) } -> std::convertible_to<std::size_t>;
    b.for_each_block(fn);
};

class step_forecast;

//! @brief What a heuristic receives besides the storage: the runtime clock, two counters it
//! increments: storage-metadata reads and writes (the paper's machine-independent overhead
//! measure) and score evaluations (for policies that replace the runtime's scan with their
//! own `choose`), and the forecast of the program's next reads while there is one.
struct heuristic_context {
    cost_t now = 0;
    std::uint64_t* metadata_accesses = nullptr;
    std::uint64_t* evaluations = nullptr;
    //! When the program is following a step the runtime has recorded: when each storage is
    //! read next (<dtr/step_forecast.hpp>); null otherwise.
    const step_forecast* forecast = nullptr;
    void count_access(std::uint64_t n = 1) const noexcept {
        if (metadata_accesses != nullptr) *metadata_accesses += n;
    }
    void count_evaluation(std::uint64_t n = 1) const noexcept {
        if (evaluations != nullptr) *evaluations += n;
    }
};

namespace detail {

//! The interface a heuristic may use on a storage; the concept checks heuristics against
//! it so that a policy compiles with any backend. Declared only: never instantiated.
template <class Meta>
struct storage_archetype {
    std::uint64_t id() const noexcept;
    std::size_t size() const noexcept;
    cost_t cost() const noexcept;
    cost_t last_access() const noexcept;
    bool resident() const noexcept;
    bool offloaded() const noexcept;
    bool rematerializable() const noexcept;
    bool evictable() const noexcept;
    std::size_t handle_count() const noexcept;
    std::size_t dependent_count() const noexcept;
    std::uint64_t next_use() const noexcept;
    Meta& meta() noexcept;
    const Meta& meta() const noexcept;
    template <class F>
    void for_each_parent(F&& f) const;
    template <class F>
    void for_each_child(F&& f) const;
};

} // namespace detail

//! @brief A policy's per-storage metadata: `H::storage_data`, default-constructible; the
//! runtime keeps one inside every storage (reach it with `s.meta()`).
template <class H>
concept has_storage_data = std::default_initializable<typename H::storage_data>;

//! @brief An eviction policy that scores storages.
//!
//! `score(s, ctx)`: lower means "evict first" (the cost of evicting s). The runtime's default
//! search scans every evictable storage, keeps the last lowest score, and stops early at a
//! score of 0, as the DTR simulator does. The search strategies (dtr/search) wrap scoring
//! policies. A policy whose score can stop early once it exceeds a bound may also offer
//! `score(s, ctx, bound)` (dtr::bounded_scoring_heuristic, <dtr/bounded_score.hpp>); the
//! scans then pass it their best score so far.
template <class H>
concept scoring_heuristic = has_storage_data<H> &&
    requires(H& h, const detail::storage_archetype<typename H::storage_data>& s,
             const heuristic_context& ctx) {
    { h.score(s, ctx) } -> std::convertible_to<double>;
};

//! @brief An eviction policy that picks the victim itself from the evictable pool `Pool`
//! (a range of storages; the runtime's is `runtime<B, H>::pool_type`), replacing the scan:
//! `choose(pool, ctx)` returns a pointer to a member of the pool, or nullptr for none.
template <class H, class Pool>
concept choosing_heuristic = has_storage_data<H> &&
    requires(H& h, Pool& pool, const heuristic_context& ctx) {
    { h.choose(pool, ctx) } -> std::convertible_to<typename Pool::value_type*>;
};

namespace detail {

struct choose_probe {
    int choose;
};
template <class H>
struct choose_probe_derived : H, choose_probe {};
//! Whether H has a member named `choose` (whatever its signature): the name is then
//! ambiguous in a class that also inherits choose_probe's.
template <class H>
constexpr bool names_choose() {
    if constexpr (!std::is_class_v<H> || std::is_final_v<H>)
        return false;
    else
        return !requires { &choose_probe_derived<H>::choose; };
}

} // namespace detail

//! @brief A policy that reads heuristic_context::forecast (declares `static constexpr bool
//! reads_forecast = true`): while a forecast is in force the runtime leaves the order of
//! released storages it keeps to the policy (kept_priority::first does not apply).
template <class H>
concept reads_forecast = requires {
    requires H::reads_forecast;
};

//! @brief An eviction policy: storage metadata and either `score` (dtr::scoring_heuristic)
//! or `choose` (dtr::choosing_heuristic, checked against the runtime's pool when the
//! runtime is instantiated); optionally the event hooks of <dtr/hooks.hpp>. See
//! docs/heuristics.md, "Write your own policy".
template <class H>
concept heuristic = scoring_heuristic<H> ||(has_storage_data<H>&& detail::names_choose<H>());

} // namespace dtr
