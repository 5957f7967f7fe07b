// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_DTR with local cost: c(s) / (m(s) * staleness(s)).
#pragma once

#include <dtr/concepts.hpp>

#include <limits>

namespace dtr::heuristics {

//! @brief The DTR paper's heuristic with the evicted neighbourhood ignored: evict the
//! storage that is cheapest to recompute per byte freed and per unit of time since it was
//! last used. Cost, size and staleness are those of the storage alone, so a score costs
//! O(1) and no metadata beyond the runtime's own.
//!
//! score = cost / (size * (now - last_access)); +infinity when the denominator is 0 (a
//! storage just used, or an empty one), as in the paper's simulator.
struct dtr_local {
    struct storage_data {};
    static constexpr const char* name = "dtr_local";

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) const noexcept {
        ctx.count_access();
        const double denominator =
            static_cast<double>(s.size()) * static_cast<double>(ctx.now - s.last_access());
        return denominator > 0 ? static_cast<double>(s.cost()) / denominator
                               : std::numeric_limits<double>::infinity();
    }
};

static_assert(heuristic<dtr_local>);

} // namespace dtr::heuristics
