// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Allocation under the budget: evict until a request fits, ask the backend, evict
//! more when the backend has no block, and explain an allocation that cannot be made.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/concepts.hpp>
#include <dtr/cost_clock.hpp>
#include <dtr/counters.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/detail/evictable_pool.hpp>
#include <dtr/error.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/options.hpp>

#include <algorithm>
#include <cstddef>
#include <new>
#include <optional>
#include <sstream>
#include <string>

namespace dtr::detail {

//! @brief Every byte the runtime takes from or gives back to the backend goes through here,
//! so that resident bytes never exceed the budget.
//!
//! @tparam Rt the runtime: its backend, options, counters, pool and restore stack.
template <class Rt, class Backend, class Meta>
class budgeted_memory : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::storage;
    using pointer = typename Backend::pointer;

    explicit budgeted_memory(Rt& rt) noexcept : base(rt) {}

    //! @brief `bytes` from the backend, evicting victims first until they fit under the
    //! budget, and more while the backend refuses (fragmentation).
    //! Throws: dtr::out_of_memory when nothing evictable is left.
    pointer allocate(std::size_t bytes);

    //! @brief Gives `bytes` at `p` back to the backend.
    void free(pointer p, std::size_t bytes) noexcept {
        rt_.backend_.deallocate(p, bytes);
        rt_.counters_.resident_bytes -= bytes;
    }

    //! @brief Evicts victims until resident bytes are at most `bytes`.
    //! Throws: dtr::out_of_memory (nothing changed but evictions) when not enough is evictable.
    void shrink_to(std::size_t bytes);

private:
    [[noreturn]] void throw_out_of_memory(std::size_t bytes, bool backend_refused,
                                          bool system_refused = false) const;

    using base::rt_;
};

template <class Rt, class Backend, class Meta>
auto budgeted_memory<Rt, Backend, Meta>::allocate(std::size_t bytes) -> pointer {
    const runtime_options& options = rt_.options_;
    counters& stats = rt_.counters_;
    if (bytes > options.budget) throw_out_of_memory(bytes, false);
    bool system_refused = false;
    bool refused = false; // the backend refused this request once already
    // Evicting for an operator's output is the runtime's work, not the operator's: on a
    // backend with a readable cost clock its time is taken out of the measured cost
    // (dtr::cost_clock). The clock is read only once an eviction is needed.
    bool timing = false;
    cost_t work_start = 0;
    const auto start_timing = [&] {
        if constexpr (cost_clock<Backend>) {
            if (!timing && rt_.exec_.running()) {
                timing = true;
                work_start = rt_.backend_.cost_clock();
            }
        }
    };
    while (bytes > options.budget - stats.resident_bytes) {
        start_timing();
        storage* victim = rt_.pool_.choose_victim();
        if (victim == nullptr) {
            if (rt_.offload_.offload_fixed()) continue; // a constant leaves for the host tier
            if (rt_.remat_.yield_pins()) continue; // a restore's lower frames let go: try again
            throw_out_of_memory(bytes, false);
        }
        rt_.pool_.evict(victim, false);
    }
    for (;;) {
        pointer p{};
        try {
            // Outside an operator's run, the only allocations are constants'.
            if constexpr (requires(Backend & b) { b.allocate(bytes, arena::placement::high); }) {
                const bool high =
                    options.placement == placement_policy::constants_high && !rt_.exec_.running();
                p = rt_.backend_.allocate(
                    bytes, high ? arena::placement::high : arena::placement::best_fit);
            } else {
                p = rt_.backend_.allocate(bytes);
            }
        } catch (const out_of_memory&) {
            throw;
        } catch (const std::bad_alloc&) {
            // The system allocator behind the backend failed (a host backend under an
            // unlimited budget): a refusal like any other, explained as ours.
            system_refused = true;
        }
        if (p != pointer{}) {
            stats.resident_bytes += bytes;
            stats.peak_resident_bytes = std::max(stats.peak_resident_bytes, stats.resident_bytes);
            ++stats.allocations;
            stats.bytes_allocated += bytes;
            rt_.offload_
                .wait_for_freed_memory(); // offloaded victims' blocks: reusable once copied out
            if constexpr (cost_clock<Backend>) {
                if (timing) rt_.exec_.add_runtime_work(rt_.backend_.cost_clock() - work_start);
            }
            return p;
        }
        // The budget allows it but the backend has no block (fragmentation, or a capacity
        // below the budget). On a backend that describes its region, evict the cheapest
        // window of neighbours that frees a block; otherwise (or under one_by_one) keep
        // evicting in heuristic order and retry.
        if (!refused) {
            refused = true;
            ++stats.fragmented_allocations;
        }
        start_timing();
        if (!system_refused) {
            const window_outcome w = rt_.pool_.evict_window(bytes);
            if (w == window_outcome::none) {
                if (rt_.offload_.offload_fixed()) continue;
                if (rt_.remat_.yield_pins()) continue;
                throw_out_of_memory(bytes, true);
            }
            if (w == window_outcome::evicted) {
                ++stats.allocation_retries;
                continue;
            }
        }
        storage* victim = rt_.pool_.choose_victim();
        if (victim == nullptr) {
            if (rt_.offload_.offload_fixed()) continue;
            if (rt_.remat_.yield_pins()) continue;
            throw_out_of_memory(bytes, true, system_refused);
        }
        ++stats.allocation_retries;
        rt_.pool_.evict(victim, false);
    }
}

template <class Rt, class Backend, class Meta>
void budgeted_memory<Rt, Backend, Meta>::shrink_to(std::size_t bytes) {
    counters& stats = rt_.counters_;
    while (stats.resident_bytes > bytes) {
        storage* victim = rt_.pool_.choose_victim();
        if (victim == nullptr && rt_.offload_.offload_fixed()) continue;
        if (victim == nullptr) {
            out_of_memory::details d{};
            d.requested = stats.resident_bytes - bytes; // the excess that could not be freed
            d.budget = bytes;
            d.resident = stats.resident_bytes;
            throw out_of_memory(
                "dtr: out of memory: cannot lower the budget to " + std::to_string(bytes) +
                    " bytes: " + std::to_string(stats.resident_bytes) +
                    " bytes resident and nothing evictable is left (budget kept at " +
                    std::to_string(rt_.options_.budget) + ")",
                d);
        }
        rt_.pool_.evict(victim, false);
    }
}

template <class Rt, class Backend, class Meta>
void budgeted_memory<Rt, Backend, Meta>::throw_out_of_memory(std::size_t bytes,
                                                             bool backend_refused,
                                                             bool system_refused) const {
    out_of_memory::details d;
    d.requested = bytes;
    d.budget = rt_.options_.budget;
    d.resident = rt_.counters_.resident_bytes;
    std::size_t constants = 0, unrecipied = 0, pinned = 0;
    for (const storage& s : rt_.graph_.storages) {
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
                                      for (const storage& s : rt_.graph_.storages)
                                          if (s.is_resident) sum += s.bytes;
                                      return sum;
                                  }());
    std::ostringstream msg;
    msg << "dtr: out of memory: cannot allocate " << bytes << " bytes";
    if (rt_.exec_.running())
        msg << " for operator #" << rt_.exec_.running_op().id
            << (rt_.exec_.rematerializing() ? " (rematerializing it)" : "");
    msg << " under a budget of " << d.budget << " bytes; " << d.resident
        << " bytes resident, of which " << d.pinned << " bytes in " << d.pinned_storages
        << " storages cannot be evicted (pinned: " << pinned << ", constants: " << constants
        << ", without a recipe: " << unrecipied << ") and " << in_flight
        << " bytes are buffers of the running operator";
    if (system_refused)
        msg << "; the budget allows it but the system allocator behind the backend failed "
               "(std::bad_alloc) even with everything evictable evicted";
    else if (backend_refused)
        msg << "; the budget allows it but the backend has no block of that size";
    else
        msg << "; nothing evictable is left";
    if constexpr (reports_memory<Backend>) {
        // Tell fragmentation (free bytes enough, no block large enough) from exhaustion.
        if (const std::optional<memory_report> m = rt_.backend_.memory_info()) {
            d.largest_free = m->largest_free;
            d.free_total = m->free;
            const auto old_precision = msg.precision(3);
            msg << "; backend region of " << m->capacity << " bytes: " << m->free
                << " bytes free in " << m->free_blocks
                << (m->free_blocks == 1 ? " block" : " blocks") << ", largest free block "
                << m->largest_free << " bytes, fragmentation " << 100.0 * m->fragmentation() << "%";
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

} // namespace dtr::detail
