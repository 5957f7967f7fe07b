// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_held: h_DTR whose downward half of e* counts only evicted descendants that the
//! program still holds.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/cost/estar.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace dtr::heuristics {

//! @brief h_held(t) = (c(t) + c(e*_up(t)) + c(held(e*_down(t)))) / (m(t) x (now - last_access(t))).
//!
//! e*_up(t): the evicted ancestors reachable through evicted storages (what recomputing t
//! needs), as in h_DTR and MSPS. e*_down(t): the evicted descendants reachable through
//! evicted storages, as in h_DTR, but only those with a handle (handle_count() > 0) are
//! charged: storages the program can still ask for. Released storages kept only as metadata
//! are walked through (a held storage below them still counts) but not charged: on the
//! paper's logs most of h_DTR's downward charge is such storages, and few of them are ever
//! recomputed (docs/heuristics.md).
//!
//! Online: handle counts are the program's current references, nothing about the future.
//!
//! Maintenance: the upward half is cost::estar<false>'s cached numerator (invalidated on
//! eviction, rematerialization and destruction). The downward half is recomputed at every
//! score by a walk of the evicted descendants (handle counts change without an event this
//! policy sees, so it is not cached): linear in the evicted region below t, one metadata
//! access per neighbour. Not a factored policy (the downward half is not cached or
//! reported), so search::indexed does not take it; the scan, sampled and skip_small do.
class dtr_held {
public:
    using up_model = cost::estar<false>;
    struct storage_data : up_model::storage_data {
        mutable std::uint64_t held_mark = 0; //!< traversal epoch of the downward walk
    };
    static constexpr const char* name = "dtr_held";

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        const double numerator = model_.numerator(s, ctx) + held_descendants_cost(s, ctx);
        ctx.count_access();
        const double denominator =
            static_cast<double>(s.size()) * static_cast<double>(ctx.now - s.last_access());
        return denominator > 0 ? numerator / denominator : std::numeric_limits<double>::infinity();
    }

    //! @brief The summed cost of the evicted descendants of s reachable through evicted
    //! storages that still have a handle.
    template <class Storage>
    double held_descendants_cost(const Storage& s, const heuristic_context& ctx) {
        const std::uint64_t epoch = ++epoch_;
        s.meta().held_mark = epoch;
        double sum = 0;
        stack_.clear();
        stack_.push_back(&s);
        while (!stack_.empty()) {
            const auto* u = static_cast<const Storage*>(stack_.back());
            stack_.pop_back();
            u->for_each_child([&](const auto& v) {
                ctx.count_access();
                if (v.meta().held_mark == epoch) return;
                v.meta().held_mark = epoch;
                if (v.resident()) return;
                if (v.handle_count() > 0) sum += static_cast<double>(v.cost());
                stack_.push_back(&v);
            });
        }
        return sum;
    }

    template <class Storage>
    void on_evict(Storage& s, const heuristic_context& ctx) {
        model_.on_evict(s, ctx);
    }
    template <class Storage>
    void on_rematerialize(Storage& s, const heuristic_context& ctx) {
        model_.on_rematerialize(s, ctx);
    }
    template <class Storage>
    void on_destroy(Storage& s, const heuristic_context& ctx) {
        model_.on_destroy(s, ctx);
    }

private:
    up_model model_{};
    std::uint64_t epoch_ = 0;
    std::vector<const void*> stack_;
};
static_assert(heuristic<dtr_held>);

} // namespace dtr::heuristics
