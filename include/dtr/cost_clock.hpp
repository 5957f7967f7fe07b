// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::cost_clock: the optional backend member through which the runtime keeps its
//! own work out of the costs it measures.
//!
//! Why. A measured cost is what Backend::execute reports for an operator's whole body, and
//! the body's output allocations (op_context::output) may make the runtime evict first:
//! choose victims, free blocks, copy victims out, wait for those copies. That time is the
//! runtime's, not the operator's. Counted in, it makes an operator look as dear as the
//! evictions it happened to trigger on its first run, for as long as its record lives (the
//! policies read that cost), and during a recomputation it counts towards
//! runtime_options::remat_limit: one slow victim search can look like thrashing.
//!
//! A backend that can read the clock its execute() measures with offers `cost_clock()`; the
//! runtime reads it before and after the evictions an allocation inside an operator makes
//! and subtracts the difference from the operator's measured cost
//! (counters::runtime_work_in_operators). Supplied costs (call_options::cost) are never
//! touched. Backends with deferred costs (dtr::deferred_costs) measure on the device after
//! the fact and are excluded: their host-side evictions are not in a device-side figure.
#pragma once

#include <dtr/deferred_cost.hpp>
#include <dtr/options.hpp>

#include <concepts>

namespace dtr {

//! @brief A backend whose execute() measures on a clock the runtime can read
//! (`cost_clock()`, in the same unit: nanoseconds), and reports no deferred costs.
template <class B>
concept cost_clock = !deferred_costs<B> && requires(B & b) {
    { b.cost_clock() } -> std::convertible_to<cost_t>;
};

} // namespace dtr
