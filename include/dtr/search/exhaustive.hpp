// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The exhaustive scan as an explicit strategy (the runtime's default search).
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/search/detail/forwarding.hpp>

namespace dtr::search {

//! @brief The exhaustive scan of `pool` with `h`'s scores (bounded by the best so far where
//! `h` takes a bound): the last lowest wins, a score of 0 stops it; nullptr for an empty
//! pool. What search::exhaustive decides, and what search::indexed decides while the
//! forecast its policy reads is in force.
template <class Pool, class H>
typename Pool::value_type* exhaustive_choice(Pool& pool, H& h, const heuristic_context& ctx) {
    detail::last_lowest<typename Pool::value_type> pick;
    for (auto& s : pool) {
        ctx.count_evaluation();
        if (!pick.offer(s, score_against(h, s, ctx, pick.best_score()))) break;
    }
    return pick.best();
}

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
        return exhaustive_choice(pool, this->inner_, ctx);
    }
};

} // namespace dtr::search
