// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Policies that know when the program reads each storage next: the runtime's
//! forecast (Belady's information, from the step it has recorded) in place of staleness
//! where there is one, an online policy's own score where there is none.
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_held_bounded.hpp>
#include <dtr/hooks.hpp>
#include <dtr/step_forecast.hpp>

#include <limits>
#include <utility>

namespace dtr::heuristics {

//! @brief An online policy whose staleness gives way to the time until the next read.
//!
//! Score of a storage t with a forecast (heuristic_context::forecast, while the program
//! follows a step the runtime has recorded, docs/design.md "Steps"):
//!
//!     N(t) / (m(t) x d(t))
//!
//! with N(t) and m(t) the online policy's numerator and size factor (its cost model, e.g.
//! dtr_eqclass's union-find classes), and d(t) the program time until the program reads t
//! next (dtr::step_forecast::time_to_next_use: the recorded step's costs of the calls in
//! between). So, of two storages with the same cost and size, the one read later goes
//! first, and one the program will not read again in this step goes before both; a storage
//! the running call reads is pinned, never a victim. Without a forecast for t (no step
//! recorded, the program has left it, or t was last touched before it was learned) the
//! score is the online policy's own, staleness included: the fallback the runtime returns
//! to within one call of a divergence.
//!
//! Online: any scoring policy whose staleness is `ctx.now - s.last_access()`. For the score
//! skeleton's policies (dtr_eqclass, dtr_local, ...) the forecast score divides the cost
//! model's numerator directly; for the others (dtr_held_bounded) it is the policy's score
//! at a clock placed d(t) after t's last access. A bounded policy stays bounded
//! (dtr::bounded_scoring_heuristic). Events go to the online policy unchanged, so the
//! upkeep is the online policy's; a score adds O(1) (a stamp and two table reads). Not a
//! factored policy: search::indexed's keys assume staleness.
template <class Online>
class next_use_aware {
public:
    using storage_data = typename Online::storage_data;
    using online_type = Online;

    next_use_aware() = default;
    explicit next_use_aware(Online online) : online_(std::move(online)) {}

    //! @brief The score (see the class comment); +infinity when the denominator is 0.
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        if (ctx.forecast != nullptr) {
            const double d = ctx.forecast->time_to_next_use(s);
            if (d >= 0) return informed(s, ctx, d, std::numeric_limits<double>::infinity());
        }
        return static_cast<double>(online_.score(s, ctx));
    }

    //! @brief The score against a scan's best so far, where the online policy takes one
    //! (dtr::bounded_scoring_heuristic).
    template <class Storage, class O = Online>
        requires bounded_scoring_heuristic<O>
    double score(const Storage& s, const heuristic_context& ctx, double bound) {
        if (ctx.forecast != nullptr) {
            const double d = ctx.forecast->time_to_next_use(s);
            if (d >= 0) return informed(s, ctx, d, bound);
        }
        return static_cast<double>(online_.score(s, ctx, bound));
    }

    //! @brief Returns: the online policy (its statistics, its own tuning).
    [[nodiscard]] Online& online() noexcept { return online_; }
    [[nodiscard]] const Online& online() const noexcept { return online_; }

    // ---- events: the online policy's upkeep, unchanged ------------------------------------
#define DTR_NEXT_USE_FORWARD(hook_name)                                      \
    template <class Storage>                                                 \
    void hook_name(Storage& s, const heuristic_context& ctx) {               \
        hook::hook_name##_t::invoke(online_, s, ctx);                        \
    }
    DTR_HEURISTIC_HOOKS(DTR_NEXT_USE_FORWARD)
#undef DTR_NEXT_USE_FORWARD

private:
    //! The score with staleness replaced by the time until the next read, `d` >= 0.
    template <class Storage>
    double informed(const Storage& s, const heuristic_context& ctx, double d, double bound) {
        if constexpr (factored_heuristic<Online>) {
            (void)bound;
            const double numerator = online_.numerator(s, ctx);
            ctx.count_access();
            double denominator = d;
            if constexpr (Online::uses_size) denominator *= static_cast<double>(s.size());
            return denominator > 0 ? numerator / denominator
                                   : std::numeric_limits<double>::infinity();
        } else {
            // The online policy's staleness is ctx.now - last_access: placing the clock d
            // after the last access makes it d.
            heuristic_context at = ctx;
            at.now = s.last_access() + d;
            if constexpr (bounded_scoring_heuristic<Online>)
                return static_cast<double>(online_.score(s, at, bound));
            else
                return static_cast<double>(online_.score(s, at));
        }
    }

    Online online_{};
};

//! @brief dtr_eqclass with the forecast: the default's cost model and near-constant upkeep,
//! Belady's distance where the program repeats a recorded step.
struct dtr_next_use : next_use_aware<dtr_eqclass> {
    static constexpr const char* name = "dtr_next_use";
    using next_use_aware<dtr_eqclass>::next_use_aware;
};
static_assert(heuristic<dtr_next_use>);

//! @brief dtr_held_bounded with the forecast: its walks' numerator (evicted ancestors, held
//! evicted descendants), the distance to the next read in place of staleness.
struct dtr_held_next_use : next_use_aware<dtr_held_bounded> {
    static constexpr const char* name = "dtr_held_next_use";
    using next_use_aware<dtr_held_bounded>::next_use_aware;
};
static_assert(heuristic<dtr_held_next_use>);
static_assert(bounded_scoring_heuristic<dtr_held_next_use>);

} // namespace dtr::heuristics
