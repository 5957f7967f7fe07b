// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_DTR: the paper's full heuristic, with the exact evicted neighbourhood e*.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/estar.hpp>

namespace dtr::heuristics {

//! @brief h_DTR(t) = (c(t) + c(e*(t))) / (m(t) x (now - last_access(t))).
//!
//! e*(t): the evicted storages reachable from t through evicted storages, upwards and
//! downwards (see cost::estar). Matches the published simulator's `DTR` heuristic over its
//! optimized runtime's regions. Scores read a per-storage cache, which evictions,
//! rematerializations and destructions invalidate on the resident frontier of the
//! neighbourhood they touch.
//!
//! Choose it when the budget is tight and recomputation chains get long: it is the policy
//! that sees them. Its maintenance walks evicted neighbourhoods, so it costs more metadata
//! accesses than dtr_eqclass or dtr_local.
struct dtr : ablation<cost::estar<>, true, true> {
    static constexpr const char* name = "dtr";
};
static_assert(heuristic<dtr>);

//! @brief The paper's reduced heuristic of Theorem 3.1: e* without staleness,
//! (c(t) + c(e*(t))) / m(t) (the simulator's AbESize).
using dtr_reduced = ablation<cost::estar<>, true, false>;
static_assert(heuristic<dtr_reduced>);

} // namespace dtr::heuristics
