// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_anc: h_DTR with the upward half of e* only (evicted ancestors), and staleness.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/estar.hpp>

namespace dtr::heuristics {

//! @brief h_anc(t) = (c(t) + c(e*_up(t))) / (m(t) x (now - last_access(t))), where
//! e*_up(t) is every evicted storage reachable from t upwards (its recipe's inputs,
//! recursively) through evicted storages: exactly what rematerializing t would have to run
//! if it were evicted now.
//!
//! h_DTR also charges t for its evicted descendants (what would need t to be recomputed).
//! On the published training logs that half over-charges: most of the cost of a victim's
//! evicted descendants belongs to storages the program has released (kept only as metadata
//! under eager eviction), and few of those are ever recomputed (docs/heuristics.md gives
//! the measurements), so charging them protects storages that are cheap to drop. MSPS already counts
//! ancestors only, but without staleness it evicts storages about to be used. h_anc is
//! MSPS's numerator under h_DTR's denominator: ablation<cost::estar<false>, true, true>.
//!
//! Maintenance: that of cost::estar (walks of the evicted neighbourhood on eviction,
//! rematerialization and destruction; a cached numerator per storage). A factored policy:
//! search::indexed works with it.
//!
//! Choose it for training workloads under tight budgets (ratios 0.3 and below on the
//! paper's logs): see docs/heuristics.md and docs/beat-it.md.
struct dtr_ancestors : ablation<cost::estar<false>, true, true> {
    static constexpr const char* name = "dtr_ancestors";
};
static_assert(heuristic<dtr_ancestors>);

} // namespace dtr::heuristics
