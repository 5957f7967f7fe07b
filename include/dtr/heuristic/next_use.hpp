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

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace dtr::heuristics {

//! @brief An online policy whose staleness gives way to the time until the next use.
//!
//! Score of a storage t with a forecast (heuristic_context::forecast, while the program
//! follows a step the runtime has recorded, docs/design.md "Steps"):
//!
//!     (c(t) + c(evicted ancestors of t)) / (m(t) x d(t))
//!
//! d(t) is the program time until t is next used (dtr::step_forecast::time_to_next_use): read
//! by a call, or needed resident to recompute an evicted storage that a call reads. The
//! numerator is what evicting t would cost at that use, to recompute t and the evicted
//! ancestors it needs: for dtr_eqclass the classes of t's evicted parents
//! (cost::eqclass::numerator_up), for dtr_held_bounded its bounded upward walk. The evicted
//! descendants that dtr_eqclass also charges are not charged: the forecast has already made
//! t as urgent as the earliest of them. So, of two storages with the same cost and size, the
//! one used later goes first, and one neither read nor needed again in the known future
//! goes before both; a storage the running call reads is pinned, never a victim. One
//! exception to "used never": a small input of a far larger storage the program holds and
//! reads later is scored as needed at that read (guarded_input_ratio).
//!
//! Without a forecast for t (no step recorded, the program has just left it, or t was last
//! touched before it was learned) the score is the online policy's own, staleness included:
//! the fallback the runtime returns to within one call of a divergence. Events go to the
//! online policy unchanged, so the upkeep is the online policy's; a score with a forecast
//! costs two stamp reads and the numerator (one find per evicted parent for dtr_eqclass).
//! Not a factored policy: search::indexed's keys assume staleness.
//!
//! The rescue. An online step that runs away (a first step at a tight budget, before there
//! is anything to forecast) recomputes the same storages again and again. Once one storage
//! has been rematerialized rescue_remats times with no forecast in force, the scores
//! without a forecast become dtr_held's for the rest of the runtime's life:
//!
//!     (c(t) + c(evicted ancestors of t) + c(held evicted descendants of t)) / (m(t) x s(t))
//!
//! each half by a walk of at most rescue_walk_limit neighbour visits (dtr_held walks the
//! whole evicted region; the bound keeps a score's cost constant). On the paper's logs it
//! finishes every first step that dtr_eqclass's scores lose and that has a schedule at 0.2
//! of the peak or above (docs/heuristics.md, "The rescue"). A restore that recomputes each
//! storage of a long chain once never triggers it, so the online upkeep stays the online
//! policy's there; a program that triggers it pays up to 2 x rescue_walk_limit accesses per
//! score without a forecast, and search::indexed scans instead of using its index
//! (rescuing()).
template <class Online>
class next_use_aware {
public:
    //! Evicted storages visited below a storage to find when it is needed for a restore:
    //! the bound keeps a score's cost constant (docs/heuristics.md, "dtr_next_use"). At 32
    //! the walk missed needs below longer evicted chains (InceptionV4 at 0.15 of its peak
    //! then lost its second step). A walk that finds a read stops once its partial score is
    //! above the scan's best; one that finds none runs to the limit (the exhaustive scan's
    //! restore of a 10^6-long evicted chain: 0.5 s at 32, 1.0 s at 64, 3.0 s at 256).
    static constexpr std::size_t need_walk_limit = 64;
    //! A storage s the known future neither reads nor needs is still scored as needed at the
    //! next read of a resident storage the program holds that was computed from s and is at
    //! least this many times its size (the earliest such read). That storage, if evicted
    //! before its read, is recomputed from s: with s evicted first as used never, the
    //! recomputation would run through s and its evicted ancestors too. Kept, s holds little
    //! memory next to what it guards. (The recorded VGG-11 step: the 1.6 MB input of the
    //! 411 MB fc6 weight gradient, which the step holds to its end; evicted as used never, the
    //! gradient's recomputation at the end ran the whole forward pass again: 1.47x at 0.9 of
    //! the peak, 1.04x with it kept.) The need walk finds such reads on its first level, among
    //! the resident children it passes over anyway.
    static constexpr double guarded_input_ratio = 128;
    //! Evicted ancestors visited to price a storage's recomputation.
    static constexpr std::size_t cost_walk_limit = 128;
    //! How far, in steps, the next use of a storage the forecast sees no use of is put.
    static constexpr double unused_steps = 1e6;
    //! Rematerializations of one storage without a forecast that turn the rescue on.
    static constexpr std::uint32_t rescue_remats = 2;
    //! Neighbour visits of each of a rescue score's two walks.
    static constexpr std::size_t rescue_walk_limit = 1024;

    //! The online policy's data, the mark of the walks below, and the storage's
    //! rematerializations without a forecast (the rescue's trigger).
    struct storage_data : Online::storage_data {
        mutable std::uint64_t next_use_walk = 0;
        std::uint32_t online_remats = 0;
    };
    using online_type = Online;
    //! Kept storages are ordered by the forecast, not put first (dtr::reads_forecast).
    static constexpr bool reads_forecast = true;

    next_use_aware() = default;
    explicit next_use_aware(Online online) : online_(std::move(online)) {}

    //! @brief The score (see the class comment); +infinity when the denominator is 0.
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        return score(s, ctx, std::numeric_limits<double>::infinity());
    }

    //! @brief The score against a scan's best so far (dtr::bounded_scoring_heuristic):
    //! with a forecast, no walk at all where the lowest score the storage can get (that of
    //! one used never) is above `bound`, and the walks stop as soon as the partial score is
    //! above it (the numerator only grows and the time until the next use only shrinks as
    //! they go, so a partial score never exceeds the score); without one, the online
    //! policy's score (against the bound where it takes one).
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx, double bound) {
        if (ctx.forecast != nullptr && ctx.forecast->time_to_next_use(s) >= 0)
            return informed(s, ctx, *ctx.forecast, bound);
        if (rescuing_) return rescued(s, ctx, bound);
        return score_against(online_, s, ctx, bound);
    }

    //! @brief Returns: the online policy (its statistics, its own tuning).
    [[nodiscard]] Online& online() noexcept { return online_; }
    [[nodiscard]] const Online& online() const noexcept { return online_; }

    //! @brief Returns: whether the rescue is on (see the class comment): the scores without
    //! a forecast are then no longer the online policy's.
    [[nodiscard]] bool rescuing() const noexcept { return rescuing_; }

    // ---- events: the online policy's upkeep, unchanged; the rescue's trigger ---------------
#define DTR_NEXT_USE_FORWARD(hook_name)                        \
    template <class Storage>                                   \
    void hook_name(Storage& s, const heuristic_context& ctx) { \
        hook::hook_name##_t::invoke(online_, s, ctx);          \
    }
    // Every hook of DTR_HEURISTIC_HOOKS (dtr/hooks.hpp) but on_rematerialize, below.
    DTR_NEXT_USE_FORWARD(on_create)
    DTR_NEXT_USE_FORWARD(on_access)
    DTR_NEXT_USE_FORWARD(on_evict)
    DTR_NEXT_USE_FORWARD(on_release)
    DTR_NEXT_USE_FORWARD(on_destroy)
    DTR_NEXT_USE_FORWARD(on_pool_insert)
    DTR_NEXT_USE_FORWARD(on_pool_erase)
#undef DTR_NEXT_USE_FORWARD
    template <class Storage>
    void on_rematerialize(Storage& s, const heuristic_context& ctx) {
        hook::on_rematerialize_t::invoke(online_, s, ctx);
        count_rematerialization(s, ctx);
    }
    //! @brief The rescue's trigger: counts a rematerialization of s made without a forecast.
    //! on_rematerialize calls it; so does a search that sends the events straight to the
    //! online policy (search::indexed).
    template <class Storage>
    void count_rematerialization(Storage& s, const heuristic_context& ctx) noexcept {
        if (ctx.forecast == nullptr && !rescuing_ && ++s.meta().online_remats >= rescue_remats)
            rescuing_ = true;
    }

private:
    //! The score with a forecast: `d` >= 0 is the time until s is next read. It is used
    //! earlier when an evicted storage recomputed from it is read first (it must be resident
    //! to restore that one): the walk down the evicted storages below s, at most
    //! need_walk_limit visits, finds the earliest; where it finds none, s may get the read
    //! of a storage it guards (guarded_input_ratio). The numerator is the cost of s and of the
    //! evicted ancestors its recomputation needs (the walk up, at most cost_walk_limit
    //! visits). Both walks stop once the partial score is above `bound`.
    template <class Storage>
    double informed(const Storage& s, const heuristic_context& ctx, const step_forecast& f,
                    double bound) {
        ctx.count_access();
        const double bytes = static_cast<double>(s.size());
        double numerator = static_cast<double>(s.cost());
        // The score of s if it is neither read nor needed in the known future: before every
        // storage that is, the cheapest per byte first (no walk: its ancestors matter only if
        // the forecast is wrong), as if its next use were a million steps away. It is also the
        // lowest score s can get: a use found within the known future (at most two steps
        // away) only raises it. Where even that is above the bound, s cannot win, and its
        // walks are skipped: once the scan has found a storage used never, the others cost
        // one access each, not up to 192 (the PyTorch bridge's TreeLSTM, whose resident
        // storages sit above long dead evicted chains).
        const double used_never = numerator / (bytes * unused_steps * f.step_time());
        if (f.step_time() > 0 && used_never > bound) return used_never;
        // Read by the program: when. A storage neither read nor needed in the known future
        // (the walk below finds no read) is used never, as far as the forecast knows: 0.
        double d = f.time_to_next_read(s);
        auto partial = [&] {
            const double denominator = d * bytes;
            return denominator > 0 ? numerator / denominator
                                   : std::numeric_limits<double>::infinity();
        };
        if (d >= 0 && partial() > bound) return partial();
        bool cut = false;
        // The guarded read (guarded_input_ratio): the earliest read of a resident child of s
        // held by the program and guarded_input_ratio times its size, met on the walk's
        // first level.
        const double guarding_size = bytes * guarded_input_ratio;
        double guarded = -1;
        walk<false>(
            s, ctx, need_walk_limit,
            [&](const auto& c) {
                const double read = f.time_to_next_read(c);
                if (read >= 0 && (d < 0 || read < d)) {
                    d = read;
                    cut = partial() > bound;
                }
                return !cut;
            },
            [&](const auto& c) {
                // (a read already found wins over any guarded one: no stamp to read)
                if (d >= 0 || c.handle_count() == 0 ||
                    static_cast<double>(c.size()) < guarding_size)
                    return;
                const double read = f.time_to_next_read(c);
                if (read >= 0 && (guarded < 0 || read < guarded)) guarded = read;
            });
        if (cut) return partial();
        if (d < 0) d = guarded;
        if (d < 0) return used_never;
        walk<true>(s, ctx, cost_walk_limit, [&](const auto& u) {
            numerator += static_cast<double>(u.cost());
            cut = partial() > bound;
            return !cut;
        });
        return partial();
    }

    //! walk()'s default for resident neighbours: nothing.
    struct ignore_resident {
        template <class Storage>
        void operator()(const Storage&) const noexcept {}
    };

    //! Calls visit(u) for each evicted storage reachable from s through evicted storages,
    //! upwards (parents) or downwards (children), breadth first, each once, at most `limit`
    //! neighbour visits (one metadata access each), until visit returns false; and
    //! first_level_resident(u) for each resident neighbour of s itself that it meets.
    template <bool Up, class Storage, class Visit, class VisitResident = ignore_resident>
    void walk(const Storage& s, const heuristic_context& ctx, std::size_t limit, Visit&& visit,
              VisitResident&& first_level_resident = {}) {
        const std::uint64_t epoch = ++epoch_;
        s.meta().next_use_walk = epoch;
        walk_.clear();
        walk_.push_back(&s);
        for (std::size_t head = 0; head < walk_.size() && limit > 0; ++head) {
            auto step = [&](const auto& u) {
                if (limit == 0) return;
                --limit;
                ctx.count_access();
                if (u.meta().next_use_walk == epoch) return;
                u.meta().next_use_walk = epoch;
                if (u.resident()) {
                    if (head == 0) first_level_resident(u);
                    return;
                }
                if (!visit(u)) {
                    limit = 0;
                    return;
                }
                walk_.push_back(&u);
            };
            const auto* at = static_cast<const Storage*>(walk_[head]);
            if constexpr (Up)
                at->for_each_parent(step);
            else
                at->for_each_child(step);
        }
    }

    //! The rescue's score without a forecast: dtr_held's, each half by a bounded walk,
    //! the walks stopped once the partial score is above `bound`.
    template <class Storage>
    double rescued(const Storage& s, const heuristic_context& ctx, double bound) {
        ctx.count_access();
        const double denominator =
            static_cast<double>(s.size()) * static_cast<double>(ctx.now - s.last_access());
        if (!(denominator > 0)) return std::numeric_limits<double>::infinity();
        double numerator = static_cast<double>(s.cost());
        bool cut = numerator / denominator > bound;
        if (!cut)
            walk<true>(s, ctx, rescue_walk_limit, [&](const auto& u) {
                numerator += static_cast<double>(u.cost());
                cut = numerator / denominator > bound;
                return !cut;
            });
        if (!cut)
            walk<false>(s, ctx, rescue_walk_limit, [&](const auto& u) {
                if (u.handle_count() > 0) numerator += static_cast<double>(u.cost());
                cut = numerator / denominator > bound;
                return !cut;
            });
        return numerator / denominator;
    }

    Online online_{};
    std::vector<const void*> walk_; //!< the walks' queue, kept for its capacity
    std::uint64_t epoch_ = 0;       //!< of the last walk
    bool rescuing_ = false;         //!< the rescue is on (see the class comment)
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
static_assert(bounded_scoring_heuristic<dtr_next_use>);

} // namespace dtr::heuristics
