// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model "e*": own cost plus the cost of the exact evicted neighbourhood, cached
//! per storage and invalidated only where an eviction or rematerialization changes it.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/cost/decrease_listener.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace dtr::heuristics::cost {

//! @brief c(t) + c(e*(t)): the storage's own cost plus the cost of every evicted storage
//! reachable from it through evicted storages, upwards (ancestors: what recomputing t would
//! need) and, when `Descendants`, downwards (descendants: what would need t to be
//! recomputed). This is the published simulator's `DTR` numerator
//! (`s.compute + region.compute + region_rev.compute`, regions being directed reachability
//! through evicted storages, stopping at resident ones); with `Descendants = false` it is
//! MSPS's numerator (`s.compute + region_rev.compute`).
//!
//! Maintenance. Instead of the simulator's per-storage interior sets, each storage caches
//! the cost of each direction of its neighbourhood (ancestors, descendants), each with a
//! valid bit. e*(t) of a resident t changes only when a storage u on a directed evicted
//! path from or to t changes state, and then t is on the resident frontier of u's own
//! neighbourhood: an ancestor of u (only its descendant half changed: in a DAG u cannot
//! also be its ancestor) or a descendant (only its ancestor half changed). So:
//! - on eviction of u: walk u's evicted neighbourhood and invalidate the matching half of
//!   its resident frontier (their e* grew);
//! - on rematerialization of u: the same walk; those frontier storages' e* shrank, so they
//!   are also reported to the decrease listener (an index must re-key them);
//! - on destruction of an evicted u (no handle, no dependent left): its upward frontier
//!   loses it (shrank, reported).
//! A score reads the cache (O(1)) or, when invalid, recomputes it by one traversal. Every
//! neighbour visited, in walks and recomputations, is one metadata access.
//!
//! Reading chosen where the paper is loose: the neighbourhood is per storage (the unit of
//! eviction), neighbours are the inputs of its recipe and the outputs of operators reading
//! it; operators that only made views of a storage add their cost to it (runtime) but are
//! not neighbours (our runtime recomputes a storage from its recipe alone).
template <bool Descendants = true>
class estar {
public:
    struct storage_data {
        mutable double es_up = 0;          //!< cached cost of the evicted ancestors
        mutable double es_down = 0;        //!< cached cost of the evicted descendants
        mutable std::uint64_t es_mark = 0; //!< traversal epoch (dedupe)
        mutable bool es_up_valid = false;
        mutable bool es_down_valid = false;
    };
    static constexpr char tag_both[] = "estar", tag_up[] = "estar_up";
    static constexpr const char* tag = Descendants ? tag_both : tag_up;
    static constexpr bool descendants = Descendants;

    //! @brief c(t) + c(e*(t)) for a resident t.
    //! Complexity: O(1) with a valid cache, else linear in e*(t) and its frontier.
    template <class Storage>
    double numerator(const Storage& s, const heuristic_context& ctx) {
        const storage_data& d = s.meta();
        if (!d.es_up_valid) {
            d.es_up = half_cost<true>(s, ctx);
            d.es_up_valid = true;
        }
        if constexpr (Descendants) {
            if (!d.es_down_valid) {
                d.es_down = half_cost<false>(s, ctx);
                d.es_down_valid = true;
            }
            return static_cast<double>(s.cost()) + (d.es_up + d.es_down);
        } else {
            return static_cast<double>(s.cost()) + d.es_up;
        }
    }

    //! @brief The neighbourhood's cost by a fresh traversal, ignoring the cache (tests).
    template <class Storage>
    double neighbourhood_cost(const Storage& s, const heuristic_context& ctx) {
        if constexpr (Descendants)
            return half_cost<true>(s, ctx) + half_cost<false>(s, ctx);
        else
            return half_cost<true>(s, ctx);
    }

    template <class Storage, class Listener = ignore_decrease>
    void on_evict(Storage& s, const heuristic_context& ctx, Listener&& = {}) {
        invalidate_frontier(s, ctx, ignore_decrease{}, true);
    }
    template <class Storage, class Listener = ignore_decrease>
    void on_rematerialize(Storage& s, const heuristic_context& ctx, Listener&& listener = {}) {
        invalidate_frontier(s, ctx, listener, true);
    }
    template <class Storage, class Listener = ignore_decrease>
    void on_destroy(Storage& s, const heuristic_context& ctx, Listener&& listener = {}) {
        if (!s.resident()) invalidate_frontier(s, ctx, listener, false);
    }

private:
    //! Cost of the evicted ancestors (Up) or descendants of s, by a fresh traversal.
    template <bool Up, class Storage>
    double half_cost(const Storage& s, const heuristic_context& ctx) {
        const std::uint64_t epoch = ++epoch_;
        s.meta().es_mark = epoch;
        double sum = 0;
        auto add = [&](const auto& u) { sum += static_cast<double>(u.cost()); };
        walk<Up>(s, epoch, ctx, add, [](const auto&) {});
        return sum;
    }

    template <class Storage, class Listener>
    void invalidate_frontier(Storage& s, const heuristic_context& ctx, Listener&& listener,
                             bool downwards) {
        s.meta().es_up_valid = false;
        s.meta().es_down_valid = false;
        const std::uint64_t epoch = ++epoch_;
        s.meta().es_mark = epoch;
        auto skip = [](const auto&) {};
        // The resident ancestors reached upwards have s among their evicted descendants:
        // only their descendant half changed (MSPS has none: nothing to do). The resident
        // descendants reached downwards lose or gain s among their ancestors.
        if constexpr (Descendants) {
            walk<true>(s, epoch, ctx, skip, [&](const auto& u) {
                u.meta().es_down_valid = false;
                listener(const_cast<Storage&>(static_cast<const Storage&>(u)));
            });
        }
        if (downwards)
            walk<false>(s, epoch, ctx, skip, [&](const auto& u) {
                u.meta().es_up_valid = false;
                listener(const_cast<Storage&>(static_cast<const Storage&>(u)));
            });
    }

    //! Depth-first over evicted storages from `from`, upwards (parents) or downwards
    //! (children); calls evicted(u) for each evicted storage reached and frontier(u) for each
    //! resident one, once each per epoch. An explicit stack: evicted chains can be long.
    template <bool Up, class Storage, class Evicted, class Frontier>
    void walk(const Storage& from, std::uint64_t epoch, const heuristic_context& ctx,
              Evicted&& evicted, Frontier&& frontier) {
        stack_.clear();
        stack_.push_back(&from);
        while (!stack_.empty()) {
            const auto* u = static_cast<const Storage*>(stack_.back());
            stack_.pop_back();
            auto visit = [&](const auto& v) {
                ctx.count_access();
                if (v.meta().es_mark == epoch) return;
                v.meta().es_mark = epoch;
                if (v.resident()) {
                    frontier(v);
                } else {
                    evicted(v);
                    stack_.push_back(&v);
                }
            };
            if constexpr (Up)
                u->for_each_parent(visit);
            else
                u->for_each_child(visit);
        }
    }

    std::uint64_t epoch_ = 0;
    std::vector<const void*> stack_;
};

} // namespace dtr::heuristics::cost
