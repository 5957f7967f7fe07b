// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The exhaustive scan as an explicit strategy (the runtime's default search).
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/search/detail/forwarding.hpp>

namespace dtr::search {

//! @brief Scores every evictable storage with H and evicts the last one with the lowest
//! score, stopping early at a score of 0: the runtime's default search and the published
//! simulator's rule, made selectable (and timeable) like the other strategies.
//!
//! Complexity: one score per evictable storage per decision.
template <class H>
class exhaustive : public detail::forwarding<H> {
    static_assert(scoring_heuristic<H>,
                  "dtr::search::exhaustive<H>: H does not score storages "
                  "(dtr::scoring_heuristic); a policy with its own choose() "
                  "cannot be searched");

public:
    using storage_data = typename H::storage_data;
    //! The strategy alone, as on command lines.
    static constexpr char strategy_name[] = "exhaustive";
    //! "exhaustive:<H::name>".
    static constexpr const char* name = detail::joined_name<strategy_name, H>::value;

    using detail::forwarding<H>::forwarding;

    //! @brief The victim by a full scan; nullptr for an empty pool.
    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const heuristic_context& ctx) {
        using storage = typename Pool::value_type;
        if (pool.empty()) return nullptr;
        detail::last_lowest<storage> pick;
        for (storage& s : pool) {
            ctx.count_evaluation();
            if (!pick.offer(s, score_against(this->inner_, s, ctx, pick.best_score()))) break;
        }
        return pick.best();
    }
};

} // namespace dtr::search
