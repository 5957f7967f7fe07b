// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Largest first: evict the biggest storage.
#pragma once

#include <dtr/concepts.hpp>

#include <limits>

namespace dtr::heuristics {

//! @brief Evicts the largest evictable storage (score = 1 / size; empty storages last).
//! Frees the most memory per eviction and ignores recomputation cost.
//!
//! Checked against the published simulator's `LargestStorage` (heuristic/etc.py): exactly
//! 1 / size, +infinity for an empty storage; it is also the paper's "no cost, size, no
//! staleness" ablation (AbSize).
struct largest {
    struct storage_data {};
    static constexpr const char* name = "largest";

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) const noexcept {
        ctx.count_access();
        return s.size() > 0 ? 1.0 / static_cast<double>(s.size())
                            : std::numeric_limits<double>::infinity();
    }
};

static_assert(heuristic<largest>);

} // namespace dtr::heuristics
