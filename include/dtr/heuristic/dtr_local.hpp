// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_DTR^local: c(s) / (m(s) * staleness(s)).
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/local.hpp>

namespace dtr::heuristics {

//! @brief The DTR paper's heuristic with the evicted neighbourhood ignored: evict the
//! storage that is cheapest to recompute per byte freed and per unit of time since it was
//! last used. Cost, size and staleness are those of the storage alone, so a score costs
//! O(1) and no metadata beyond the runtime's own.
//!
//! score = cost / (size * (now - last_access)); +infinity when the denominator is 0 (a
//! storage just used, or an empty one), as in the paper's simulator (`DTRLocal`).
//!
//! Choose it when metadata must stay minimal or recomputation chains stay short.
struct dtr_local : ablation<cost::local, true, true> {
    static constexpr const char* name = "dtr_local";
};

static_assert(heuristic<dtr_local>);

} // namespace dtr::heuristics
