// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_held with both walks bounded: the score of dtr_held at a fixed cost per score
//! and none per event.
#pragma once

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
//! Complexity: score: at most 2K metadata accesses, plus the neighbour lists of the at most
//! 2K storages it expands (the graph offers no early stop; visits past the bound are skipped
//! without an access). Events: O(1).
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

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        const double numerator =
            static_cast<double>(s.cost()) + walk_cost<true>(s, ctx) + walk_cost<false>(s, ctx);
        ctx.count_access();
        const double denominator =
            static_cast<double>(s.size()) * static_cast<double>(ctx.now - s.last_access());
        return denominator > 0 ? numerator / denominator : std::numeric_limits<double>::infinity();
    }

    //! @brief The summed cost of the evicted storages that a walk of at most K visits from s
    //! reaches through evicted storages: all of them upwards (Up), those with a handle
    //! downwards. Returns: that cost. Complexity: at most K metadata accesses.
    template <bool Up, class Storage>
    double walk_cost(const Storage& s, const heuristic_context& ctx) {
        const std::uint64_t epoch = ++epoch_;
        s.meta().walk_mark = epoch;
        std::size_t left = limit_;
        double sum = 0;
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
                if (Up || v.handle_count() > 0) sum += static_cast<double>(v.cost());
                queue_.push_back(&v);
            };
            if constexpr (Up)
                u->for_each_parent(visit);
            else
                u->for_each_child(visit);
        }
        return sum;
    }

private:
    std::size_t limit_ = default_walk_limit;
    std::uint64_t epoch_ = 0;
    std::vector<const void*> queue_; // reused: no allocation per score once grown to K + 1
};
static_assert(heuristic<dtr_held_bounded>);

} // namespace dtr::heuristics
