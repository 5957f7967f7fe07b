// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The runtime's statistics: what ran, what moved, what it cost to decide.
#pragma once

#include <dtr/options.hpp>

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace dtr {

//! @brief Monotonic counters (except the two *_bytes gauges) kept by every runtime.
struct counters {
    std::uint64_t operators_run = 0;      //!< first executions of operators (calls)
    std::uint64_t rematerializations = 0; //!< re-executions that restored evicted storages
    std::uint64_t evictions = 0;          //!< storages evicted by the heuristic under pressure
    std::uint64_t eager_evictions = 0;    //!< storages evicted because their last handle dropped
    std::uint64_t banishments = 0;        //!< storages freed for good by the banish policy
    std::uint64_t storages_freed = 0;     //!< storage records destroyed (no handle, no dependent)
    std::uint64_t allocations = 0;        //!< successful backend allocations
    std::uint64_t bytes_allocated = 0;    //!< total bytes of those allocations
    std::uint64_t allocation_retries = 0; //!< backend refusals inside the budget (fragmentation)
    std::uint64_t pin_yields = 0;         //!< restores whose waiting frames gave their pins up
    //! restore_pins::planned: times a restore let its holds go (an allocation found nothing
    //! else to evict)
    std::uint64_t hold_releases = 0;
    //! in-place updates written into the old version's block (in_place_writes::reuse_when_unshared)
    std::uint64_t in_place_reuses = 0;
    std::size_t resident_bytes = 0;          //!< gauge: bytes resident now
    std::size_t peak_resident_bytes = 0;     //!< gauge: highest resident_bytes so far
    std::uint64_t heuristic_evaluations = 0; //!< scores computed while choosing victims
    std::uint64_t metadata_accesses = 0;     //!< storage metadata reads/writes by the heuristic
    std::uint64_t victim_searches = 0;       //!< victim choices made
    std::uint64_t victim_search_ns = 0;      //!< wall time spent choosing victims
    cost_t compute_cost = 0;                 //!< total cost of first executions
    cost_t remat_cost = 0;                   //!< total cost of rematerializations
    //! time of the runtime's own work inside operators' bodies (the evictions their outputs
    //! needed), on the backend's cost clock, taken out of their measured costs (dtr::cost_clock)
    cost_t runtime_work_in_operators = 0;
    //! allocations the budget allowed that the backend refused at first (no block large enough)
    std::uint64_t fragmented_allocations = 0;
    //! storages evicted as part of a window (runtime_options::fragmentation = window)
    std::uint64_t window_evictions = 0;
    // ---- offload (runtime_options::offload; all 0 when it is off) ----
    std::uint64_t offloads = 0;          //!< victims copied out to the host tier
    std::uint64_t offloads_clean = 0;    //!< victims that already had a host copy: no out-copy
    std::uint64_t copies_ahead = 0;      //!< out-copies of resident storages (offload_ahead)
    std::uint64_t constant_offloads = 0; //!< of offloads + offloads_clean, constants
    std::uint64_t copy_backs = 0;        //!< offloaded storages copied back to the device
    std::uint64_t prefetches = 0;        //!< of copy_backs, issued before an operator needed them
    //! of prefetches, issued by the runtime from the forecast (runtime_options::prefetch_ahead)
    std::uint64_t forecast_prefetches = 0;
    //! of forecast_prefetches, inputs of recomputations to come: offloaded ancestors of
    //! dropped storages the next calls read
    std::uint64_t forecast_recompute_prefetches = 0;
    std::uint64_t bytes_offloaded = 0;   //!< device -> host bytes
    std::uint64_t bytes_copied_back = 0; //!< host -> device bytes
    std::size_t host_bytes = 0;          //!< gauge: bytes held in the host tier now
    std::size_t peak_host_bytes = 0;     //!< gauge: highest host_bytes so far
    cost_t transfer_cost = 0;            //!< modelled cost of every transfer issued (ns)
    cost_t transfer_stall = 0;           //!< clock time spent waiting for transfers (ns)
    //! of transfer_stall, waiting for a copy-back that an operator (or a read) needs to land
    cost_t copy_back_stall = 0;
    //! of transfer_stall, waiting for out-copies to finish reading a block about to be reused
    cost_t block_reuse_stall = 0;
    // ---- steps (runtime_options::steps; docs/design.md, "Steps") ----
    std::uint64_t steps_marked = 0;  //!< runtime::begin_step() calls
    std::uint64_t steps_learned = 0; //!< recordings adopted as the step to follow
    //! times the program left the recorded step (another operator, size or input)
    std::uint64_t step_divergences = 0;
    std::uint64_t forecast_calls = 0; //!< calls that ran following a recorded step
    //! events the recorded step does not have, skipped over while following it
    std::uint64_t step_insertions = 0;
    //! followed steps run without the forecast by the guard's choice
    //! (runtime_options::guard_forecast)
    std::uint64_t forecast_withheld = 0;
};

//! @brief Writes the counters as `name=value` pairs on one line (logs, test failures).
inline std::ostream& operator<<(std::ostream& os, const counters& c) {
    return os << "operators_run=" << c.operators_run
              << " rematerializations=" << c.rematerializations << " evictions=" << c.evictions
              << " eager_evictions=" << c.eager_evictions << " banishments=" << c.banishments
              << " storages_freed=" << c.storages_freed << " allocations=" << c.allocations
              << " bytes_allocated=" << c.bytes_allocated
              << " allocation_retries=" << c.allocation_retries << " pin_yields=" << c.pin_yields
              << " hold_releases=" << c.hold_releases << " in_place_reuses=" << c.in_place_reuses
              << " resident_bytes=" << c.resident_bytes
              << " peak_resident_bytes=" << c.peak_resident_bytes
              << " heuristic_evaluations=" << c.heuristic_evaluations
              << " metadata_accesses=" << c.metadata_accesses
              << " victim_searches=" << c.victim_searches
              << " victim_search_ns=" << c.victim_search_ns << " compute_cost=" << c.compute_cost
              << " remat_cost=" << c.remat_cost
              << " runtime_work_in_operators=" << c.runtime_work_in_operators
              << " fragmented_allocations=" << c.fragmented_allocations
              << " window_evictions=" << c.window_evictions << " offloads=" << c.offloads
              << " offloads_clean=" << c.offloads_clean << " copies_ahead=" << c.copies_ahead
              << " constant_offloads=" << c.constant_offloads << " copy_backs=" << c.copy_backs
              << " prefetches=" << c.prefetches << " forecast_prefetches=" << c.forecast_prefetches
              << " forecast_recompute_prefetches=" << c.forecast_recompute_prefetches
              << " bytes_offloaded=" << c.bytes_offloaded
              << " bytes_copied_back=" << c.bytes_copied_back << " host_bytes=" << c.host_bytes
              << " peak_host_bytes=" << c.peak_host_bytes << " transfer_cost=" << c.transfer_cost
              << " transfer_stall=" << c.transfer_stall << " copy_back_stall=" << c.copy_back_stall
              << " block_reuse_stall=" << c.block_reuse_stall << " steps_marked=" << c.steps_marked
              << " steps_learned=" << c.steps_learned << " step_divergences=" << c.step_divergences
              << " forecast_calls=" << c.forecast_calls << " step_insertions=" << c.step_insertions
              << " forecast_withheld=" << c.forecast_withheld;
}

} // namespace dtr
