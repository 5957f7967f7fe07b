// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Allocation under the budget: evict until a request fits, ask the backend, evict
//! more when the backend has no block, and explain an allocation that cannot be made; and
//! the allocation of a hint, which evicts nothing.
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
#include <cstdint>
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
    //!
    //! `copied_back`: the offloaded storage the block is for (a copy-back), or null: a buffer
    //! of the running operator or, outside an operator, a new constant. Under
    //! placement_policy::constants_high the blocks of storages without a recipe (constants,
    //! and copy-backs of such storages) come from the top of the region; the out_of_memory
    //! message names what the block was for.
    //! Throws: dtr::out_of_memory when nothing evictable is left, or at once, evicting
    //! nothing, when the request is larger than the backend's whole region.
    pointer allocate(std::size_t bytes, const storage* copied_back = nullptr);

    //! @brief For a hint (runtime::prefetch): a block for copying `copied_back` back, if the
    //! budget has room for it now and the backend gives one at once.
    //! Returns: the block, or the null pointer with nothing evicted (whatever the backend's
    //! reason: capacity, fragmentation, a transient refusal).
    pointer try_allocate(const storage& copied_back);

    //! @brief Gives `bytes` at `p` back to the backend.
    void free(pointer p, std::size_t bytes) noexcept {
        rt_.backend_.deallocate(p, bytes);
        rt_.counters_.resident_bytes -= bytes;
    }

    //! @brief Evicts victims until resident bytes are at most `bytes`.
    //! Throws: dtr::out_of_memory (nothing changed but evictions) when not enough is evictable.
    void shrink_to(std::size_t bytes);

private:
    //! Why an allocation failed.
    enum class refusal : std::uint8_t {
        budget,  //!< over the budget with nothing evictable left
        backend, //!< the backend returned no block
        system,  //!< the system allocator behind the backend threw std::bad_alloc
        region,  //!< larger than the backend's whole region
    };

    //! One request to the backend, placed as runtime_options::placement says for the block's
    //! use; the null pointer when it refuses (`system_refused` set when it threw bad_alloc).
    pointer ask_backend(std::size_t bytes, const storage* copied_back, bool& system_refused);
    //! Counts `bytes` taken from the backend as resident; waits for the out-copies whose
    //! blocks the backend may have handed out again.
    void count_allocation(std::size_t bytes) noexcept;
    //! Whether `bytes`, rounded to the region's alignment, exceed the backend's whole region
    //! (on a backend that describes one: dtr::reports_memory).
    [[nodiscard]] bool beyond_region(std::size_t bytes) const noexcept;
    [[noreturn]] void throw_out_of_memory(std::size_t bytes, const storage* copied_back,
                                          refusal why) const;

    using base::rt_;
};

template <class Rt, class Backend, class Meta>
auto budgeted_memory<Rt, Backend, Meta>::allocate(std::size_t bytes, const storage* copied_back)
    -> pointer {
    const runtime_options& options = rt_.options_;
    counters& stats = rt_.counters_;
    if (bytes > options.budget) throw_out_of_memory(bytes, copied_back, refusal::budget);
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
    // What no eviction can make room for fails before anything is evicted.
    if (bytes > options.budget - stats.resident_bytes && beyond_region(bytes))
        throw_out_of_memory(bytes, copied_back, refusal::region);
    while (bytes > options.budget - stats.resident_bytes) {
        start_timing();
        storage* victim = rt_.pool_.choose_victim();
        if (victim == nullptr) {
            if (rt_.offload_.offload_fixed()) continue; // a constant leaves for the host tier
            if (rt_.remat_.yield_pins()) continue; // a restore's lower frames let go: try again
            throw_out_of_memory(bytes, copied_back, refusal::budget);
        }
        rt_.pool_.evict(victim, false);
    }
    for (;;) {
        const pointer p = ask_backend(bytes, copied_back, system_refused);
        if (p != pointer{}) {
            count_allocation(bytes);
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
            if (beyond_region(bytes)) throw_out_of_memory(bytes, copied_back, refusal::region);
        }
        const refusal why = system_refused ? refusal::system : refusal::backend;
        start_timing();
        if (!system_refused) {
            const window_outcome w = rt_.pool_.evict_window(bytes);
            if (w == window_outcome::none) {
                if (rt_.offload_.offload_fixed()) continue;
                if (rt_.remat_.yield_pins()) continue;
                throw_out_of_memory(bytes, copied_back, why);
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
            throw_out_of_memory(bytes, copied_back, why);
        }
        ++stats.allocation_retries;
        rt_.pool_.evict(victim, false);
    }
}

template <class Rt, class Backend, class Meta>
auto budgeted_memory<Rt, Backend, Meta>::try_allocate(const storage& copied_back) -> pointer {
    const std::size_t bytes = copied_back.bytes;
    if (bytes > rt_.options_.budget - rt_.counters_.resident_bytes) return pointer{};
    bool system_refused = false;
    const pointer p = ask_backend(bytes, &copied_back, system_refused);
    if (p != pointer{}) count_allocation(bytes);
    return p;
}

template <class Rt, class Backend, class Meta>
auto budgeted_memory<Rt, Backend, Meta>::ask_backend(std::size_t bytes, const storage* copied_back,
                                                     bool& system_refused) -> pointer {
    try {
        if constexpr (requires(Backend & b) { b.allocate(bytes, arena::placement::high); }) {
            // Storages without a recipe are walls for fragmentation-aware eviction: new
            // constants (outside an operator's run, the only allocations besides copy-backs)
            // and copy-backs of constants. A computed storage's copy-back is not one.
            const bool wall =
                copied_back != nullptr ? copied_back->producer == nullptr : !rt_.exec_.running();
            const bool high = rt_.options_.placement == placement_policy::constants_high && wall;
            return rt_.backend_.allocate(
                bytes, high ? arena::placement::high : arena::placement::best_fit);
        } else {
            return rt_.backend_.allocate(bytes);
        }
    } catch (const out_of_memory&) {
        throw;
    } catch (const std::bad_alloc&) {
        // The system allocator behind the backend failed (a host backend under an
        // unlimited budget): a refusal like any other, explained as ours.
        system_refused = true;
        return pointer{};
    }
}

template <class Rt, class Backend, class Meta>
void budgeted_memory<Rt, Backend, Meta>::count_allocation(std::size_t bytes) noexcept {
    counters& stats = rt_.counters_;
    stats.resident_bytes += bytes;
    stats.peak_resident_bytes = std::max(stats.peak_resident_bytes, stats.resident_bytes);
    ++stats.allocations;
    stats.bytes_allocated += bytes;
    rt_.offload_.wait_for_freed_memory(); // offloaded victims' blocks: reusable once copied out
}

template <class Rt, class Backend, class Meta>
bool budgeted_memory<Rt, Backend, Meta>::beyond_region(std::size_t bytes) const noexcept {
    if constexpr (reports_memory<Backend>) {
        const std::optional<memory_report> m = rt_.backend_.memory_info();
        if (!m) return false;
        return region_bytes(bytes, m->alignment) > m->capacity;
    } else {
        (void)bytes;
        return false;
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
                                                             const storage* copied_back,
                                                             refusal why) const {
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
    std::optional<memory_report> m;
    if constexpr (reports_memory<Backend>) m = rt_.backend_.memory_info();
    const std::size_t need = region_bytes(bytes, m ? m->alignment : 1);
    std::ostringstream msg;
    msg << "dtr: out of memory: cannot allocate " << bytes << " bytes";
    if (copied_back != nullptr)
        msg << " to copy storage #" << copied_back->sid << " back from the host tier";
    else if (rt_.exec_.running())
        msg << " for operator #" << rt_.exec_.running_op().id
            << (rt_.exec_.rematerializing() ? " (rematerializing it)" : "");
    else
        msg << " for a new constant";
    msg << " under a budget of " << d.budget << " bytes; " << d.resident
        << " bytes resident, of which " << d.pinned << " bytes in " << d.pinned_storages
        << " storages cannot be evicted (pinned: " << pinned << ", constants: " << constants
        << ", without a recipe: " << unrecipied << ") and " << in_flight
        << " bytes are buffers of the running operator";
    switch (why) {
        case refusal::budget:
            msg << "; nothing evictable is left";
            break;
        case refusal::region:
            msg << "; the request is larger than the backend's whole region of " << m->capacity
                << " bytes: no eviction can make room for it";
            break;
        case refusal::system:
            msg << "; the budget allows it but the system allocator behind the backend failed "
                   "(std::bad_alloc) even with everything evictable evicted";
            break;
        case refusal::backend:
            // Only the region's figures can tell why; a refusal they do not explain is not
            // blamed on fragmentation.
            if (m && m->largest_free >= need)
                msg << "; the budget allows it, but the backend refused it although its largest "
                       "free block would hold it (neither fragmentation nor a full region: a "
                       "transient or injected refusal)";
            else
                msg << "; the budget allows it but the backend has no block of that size";
            break;
    }
    if (m) {
        // Tell fragmentation (free bytes enough, no block large enough) from exhaustion.
        d.largest_free = m->largest_free;
        d.free_total = m->free;
        const auto old_precision = msg.precision(3);
        msg << "; backend region of " << m->capacity << " bytes: " << m->free << " bytes free in "
            << m->free_blocks << (m->free_blocks == 1 ? " block" : " blocks")
            << ", largest free block " << m->largest_free << " bytes, fragmentation "
            << 100.0 * m->fragmentation() << "%";
        msg.precision(old_precision);
        if (why == refusal::backend && m->largest_free < need && m->free >= need)
            msg << " (the free bytes would hold the " << need
                << " bytes needed, but no contiguous block does: fragmentation)";
    }
    throw out_of_memory(msg.str(), d);
}

} // namespace dtr::detail
