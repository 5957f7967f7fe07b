// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_held with both walks bounded: the score of dtr_held at a fixed cost per score
//! and none per event.
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace dtr::heuristics {

//! @brief h_held_K(t) = (c(t) + c(up_K(t)) + c(held(down_K(t)))) / (m(t) x (now -
//! last_access(t))).
//!
//! up_K(t), down_K(t): the evicted ancestors and descendants of t reachable through evicted
//! storages, as in dtr_held, but each found by a breadth-first walk that stops after K
//! neighbour visits (K = walk_limit(), default_walk_limit unless given): the nearest part of
//! each neighbourhood, which is what recomputing t or its nearest dependants needs first. As
//! in dtr_held, the downward half charges only storages with a handle and walks through the
//! released ones. Where both neighbourhoods fit in K visits the score is dtr_held's.
//!
//! Why bounded: dtr_held's upward half is a cache that every eviction, rematerialization and
//! destruction invalidates by walking the evicted neighbourhood, and its downward half is a
//! fresh walk at every score, so on a long evicted chain each event costs the chain's length.
//! Here nothing is cached (no invalidation walk: the event hooks do nothing) and each score
//! is two walks of at most K visits, so every score costs O(K) metadata accesses whatever
//! the graph, and events cost nothing.
//!
//! Scans pass their best score so far (dtr::bounded_scoring_heuristic, <dtr/bounded_score.hpp>):
//! the walks of a storage stop once its partial score exceeds it, which leaves the scan's
//! choice as it is and spares most walks (a storage whose own cost already exceeds the bound
//! costs one access).
//!
//! Complexity: score: at most 2K + 1 metadata accesses, plus the neighbour lists of the at
//! most 2K storages it expands (the graph offers no early stop; visits past the bound are
//! skipped without an access). Events: O(1).
//!
//! Online: handle counts are the program's current references. Not a factored policy (its
//! halves are neither cached nor reported), so search::indexed does not take it.
class dtr_held_bounded {
public:
    //! K, chosen by measurement on the paper's logs and our traces (docs/heuristics.md,
    //! "The default"): of 16, 64, 128, 256, 512 and 1024, the smallest that finishes every
    //! run dtr_held finishes at ratios 0.5, 0.3 and 0.2 there and keeps every floor at or
    //! below dtr_eqclass's (64 and 128 lift LSTM's and MobileNetV2's).
    static constexpr std::size_t default_walk_limit = 256;

    struct storage_data {
        mutable std::uint64_t walk_mark = 0; //!< epoch of the walk that last reached it
    };
    static constexpr const char* name = "dtr_held_bounded";

    dtr_held_bounded() noexcept = default;
    //! @brief A policy whose walks stop after `walk_limit` neighbour visits each.
    //! Throws: nothing.
    explicit dtr_held_bounded(std::size_t walk_limit) noexcept : limit_(walk_limit) {}

    //! @brief Returns: K, the visits each walk may make.
    [[nodiscard]] std::size_t walk_limit() const noexcept { return limit_; }

    //! @brief h_held_K(s). Returns: the score; +infinity when the denominator is not
    //! positive. Complexity: at most 2K + 1 metadata accesses.
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        return score(s, ctx, std::numeric_limits<double>::infinity());
    }

    //! @brief h_held_K(s) against a scan's best score so far (dtr::bounded_scoring_heuristic).
    //! Returns: the score when it is at most `bound`, else a partial score greater than
    //! `bound` and at most the score. Complexity: at most 2K + 1 metadata accesses; one when
    //! the storage's own cost already puts it above the bound.
    //!
    //! The walks are the score's cost, and most of a scan's storages cannot win: checking the
    //! partial score after each cost added stops their walks as soon as they are out. The
    //! partial sums are formed exactly as the score's numerator, c(s) + up + down, so each
    //! partial score is at most the score (nonnegative terms, monotone rounding) and a
    //! storage is cut only when its score is greater than the bound: the scan's choice is
    //! the one it makes with exact scores (last lowest wins, so a tie is never cut).
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx, double bound) {
        ctx.count_access();
        const double denominator =
            static_cast<double>(s.size()) * static_cast<double>(ctx.now - s.last_access());
        // Nothing the walks find makes the score finite: no need to walk.
        if (!(denominator > 0)) return std::numeric_limits<double>::infinity();
        const double own = static_cast<double>(s.cost());
        if (own / denominator > bound) return own / denominator;
        const walk_result up = walk<true>(s, ctx, own, denominator, bound);
        const double upwards = own + up.sum;
        if (up.cut) return upwards / denominator;
        const walk_result down = walk<false>(s, ctx, upwards, denominator, bound);
        return (upwards + down.sum) / denominator;
    }

    //! @brief The summed cost of the evicted storages that a walk of at most K visits from s
    //! reaches through evicted storages: all of them upwards (Up), those with a handle
    //! downwards. Returns: that cost. Complexity: at most K metadata accesses.
    template <bool Up, class Storage>
    double walk_cost(const Storage& s, const heuristic_context& ctx) {
        return walk<Up>(s, ctx, 0, 1, std::numeric_limits<double>::infinity()).sum;
    }

private:
    struct walk_result {
        double sum; //!< the cost charged by the walk so far
        bool cut;   //!< stopped because (base + sum) / denominator > bound
    };

    //! The walk of walk_cost, stopped as soon as (base + sum) / denominator > bound, where
    //! sum is the cost charged so far. Complexity: at most K metadata accesses.
    template <bool Up, class Storage>
    walk_result walk(const Storage& s, const heuristic_context& ctx, double base,
                     double denominator, double bound) {
        const std::uint64_t epoch = ++epoch_;
        s.meta().walk_mark = epoch;
        std::size_t left = limit_;
        walk_result r{0, false};
        queue_.clear();
        queue_.push_back(&s);
        // Breadth first: the bound keeps the nearest storages, the first a recomputation needs.
        for (std::size_t head = 0; head < queue_.size() && left > 0; ++head) {
            const auto* u = static_cast<const Storage*>(queue_[head]);
            auto visit = [&](const auto& v) {
                if (left == 0) return;
                --left;
                ctx.count_access();
                if (v.meta().walk_mark == epoch) return;
                v.meta().walk_mark = epoch;
                if (v.resident()) return;
                if (Up || v.handle_count() > 0) {
                    r.sum += static_cast<double>(v.cost());
                    if ((base + r.sum) / denominator > bound) {
                        r.cut = true;
                        left = 0; // the rest of this neighbour list, and the walk, end here
                        return;
                    }
                }
                queue_.push_back(&v);
            };
            if constexpr (Up)
                u->for_each_parent(visit);
            else
                u->for_each_child(visit);
        }
        return r;
    }

    std::size_t limit_ = default_walk_limit;
    std::uint64_t epoch_ = 0;
    std::vector<const void*> queue_; // reused: no allocation per score once grown to K + 1
};
static_assert(heuristic<dtr_held_bounded>);
static_assert(bounded_scoring_heuristic<dtr_held_bounded>);

} // namespace dtr::heuristics
