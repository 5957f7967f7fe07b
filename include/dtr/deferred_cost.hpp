// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::deferred_costs: the optional backend member for devices that learn an
//! operator's cost only after the operator has run, asynchronously (CUDA events).
//!
//! Why. A device backend's execute() enqueues work and returns long before the work ends.
//! Waiting for it to learn the cost (a stream synchronization per operator) would serialize
//! host and device and cost more than DTR saves. Such a backend instead returns a
//! *provisional* cost from execute() and hands the true cost over later.
//!
//! The protocol, between the runtime and a backend B modelling deferred_costs:
//!  1. Every execute() that returns normally starts exactly one measurement; one that
//!     throws starts none. execute() returns the provisional cost (what the host knows at
//!     once, e.g. the time it spent enqueueing).
//!  2. `b.collect_costs(sink, mode)` calls `sink(cost)` once for each finished measurement
//!     not handed over yet, in the order of the execute() calls that started them, and
//!     returns how many it handed over. Every measurement is handed over exactly once. The
//!     sink does not throw. Each cost is a finite number of ns >= 0: the runtime ignores one
//!     that is not (its run keeps the provisional cost) and, once collect_costs returns,
//!     throws dtr::logic_error naming it.
//!  3. `mode` says how much the runtime needs the figures now (cost_collection). Only
//!     cost_collection::wait may block.
//!
//! The runtime pairs the n-th cost handed over with the n-th execute() and corrects what it
//! recorded from the provisional cost: the operator's cost, the compute cost of the storages
//! it produced (which heuristics read), the cost counters, and its clock (forward only: the
//! clock orders accesses for staleness and never runs backwards). It collects before every
//! operator (cost_collection::routine), before every victim search (cost_collection::ready)
//! and on runtime::settle_costs() (cost_collection::wait).
#pragma once

#include <dtr/options.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace dtr {

//! @brief How urgently the runtime wants the costs of finished operators.
enum class cost_collection : std::uint8_t {
    //! Between operators. Nothing depends on the figures yet: the backend may hand over
    //! nothing, and should do no expensive query unless its own bookkeeping is filling up.
    routine,
    //! Before choosing a victim: hand over every measurement that has finished, without
    //! waiting for the ones still running.
    ready,
    //! Wait for every measurement started so far and hand all of them over.
    wait,
};

//! @brief A backend whose operator costs arrive after execute() returns (see the file
//! comment for the protocol).
template <class B>
concept deferred_costs = requires(B& b, void (*sink)(cost_t), cost_collection mode) {
    { b.collect_costs(sink, mode) } -> std::convertible_to<std::size_t>;
};

} // namespace dtr
