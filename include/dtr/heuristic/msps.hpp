// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_MSPS: memory saved per second of recomputation, counting evicted ancestors.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/estar.hpp>

namespace dtr::heuristics {

//! @brief h_MSPS(t) = (c(t) + c(evicted ancestors of t reachable through evicted
//! storages)) / m(t); no staleness. The published simulator's `MSPS` (Capuchin-style
//! policy, as the paper evaluates it): its numerator is `s.compute + region_rev.compute`,
//! the upward half of e*.
//!
//! Choose it to reproduce the paper's baseline; it ignores recency, so it can evict a
//! storage about to be used.
struct msps : ablation<cost::estar<false>, true, false> {
    static constexpr const char* name = "msps";
};
static_assert(heuristic<msps>);

} // namespace dtr::heuristics
