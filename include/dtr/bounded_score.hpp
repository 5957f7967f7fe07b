// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The optional bounded score of a scoring policy, and how the scans call a policy's
//! score: against the best score found so far, when the policy can use it.
#pragma once

#include <dtr/concepts.hpp>

#include <concepts>
#include <limits>

namespace dtr {

//! @brief A scoring policy that can also score a storage against a bound:
//! `score(s, ctx, bound)` returns score(s, ctx), except that when score(s, ctx) > bound it
//! may return instead any v with bound < v <= score(s, ctx).
//!
//! Why: the scans (the runtime's, search::exhaustive, sampled, skip_small) keep the last
//! lowest score, so a storage whose score is greater than the best one found so far cannot
//! be chosen, and nothing needs its exact score. They pass that best score as the bound
//! (dtr::score_against), which makes their choice the same as with score(s, ctx). A policy
//! whose numerator is a sum of nonnegative terms found by walks (dtr_held_bounded) stops
//! its walks as soon as the partial score is greater than the bound: partial sums of
//! nonnegative terms never exceed the whole, and rounding is monotone, so the partial score
//! is at most the score.
//!
//! A bound of +infinity asks for the exact score. Optional: a policy with only
//! score(s, ctx) is scored that way.
template <class H>
concept bounded_scoring_heuristic = scoring_heuristic<H> &&
    requires(H& h, const detail::storage_archetype<typename H::storage_data>& s,
             const heuristic_context& ctx, double bound) {
    { h.score(s, ctx, bound) } -> std::convertible_to<double>;
};

//! @brief h's score of s for a scan whose best score so far is `bound` (+infinity: none).
//! Returns: h.score(s, ctx, bound) when h has it (dtr::bounded_scoring_heuristic), else
//! h.score(s, ctx); either way a value greater than max(bound, 0) exactly when score(s, ctx)
//! is, and score(s, ctx) itself otherwise.
//! Throws: what the policy's score throws.
template <class H, class Storage>
[[nodiscard]] double score_against(H& h, const Storage& s, const heuristic_context& ctx,
                                   double bound) {
    // A negative best is passed as 0: a value cut against it is then positive, so it neither
    // wins nor ends the scan as a zero score would, and the choice stays the exact scan's.
    if constexpr (requires { h.score(s, ctx, bound); })
        return static_cast<double>(h.score(s, ctx, bound < 0 ? 0.0 : bound));
    else
        return static_cast<double>(h.score(s, ctx));
}

} // namespace dtr
