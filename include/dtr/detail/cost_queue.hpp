// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Deferred costs (backends modelling dtr::deferred_costs): the measurements
//! execute() started and has not handed over yet, and how each one corrects the clock, the
//! counters and the recorded costs when it arrives.
#pragma once

#include <dtr/counters.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/detail/duration_text.hpp>
#include <dtr/error.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace dtr::detail {

//! @brief The queue of measurements in flight, in execute() order. Unused (and empty) on
//! backends that measure synchronously.
//!
//! @tparam Rt the runtime: its backend, clock, counters and hooks.
template <class Rt, class Backend, class Meta>
class cost_queue : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using op_type = typename base::op;
    using typename base::storage;

    explicit cost_queue(Rt& rt) noexcept : base(rt) {}

    //! @brief Before an execute(): folds in what has arrived, and makes room so that the
    //! entry pushed after it cannot fail to allocate.
    void prepare() {
        // Before anything changes, so that a device error surfacing here leaves no trace.
        collect(cost_collection::routine);
        if (pending_.size() == pending_.capacity()) pending_.reserve(2 * pending_.capacity() + 16);
    }
    //! @brief One entry per measurement the backend started (never fails after prepare()).
    void started(cost_t provisional, bool remat) noexcept {
        pending_.push_back({nullptr, provisional, remat, false});
    }
    //! @brief The last measurement started corrects `op`'s record (null: only the clock and
    //! the counters) when it arrives.
    void correct_last(op_type* o, cost_t provisional, bool remat) noexcept {
        pending_.back() = {o, provisional, remat, true};
    }
    //! @brief `o` goes away: its pending measurements correct nothing but the clock.
    void forget(const op_type* o) noexcept {
        for (std::size_t i = head_; i < pending_.size(); ++i)
            if (pending_[i].op == o) pending_[i].op = nullptr;
    }

    //! @brief Takes the measurements the backend hands over in `mode`.
    //! Throws: what the backend's collect_costs() throws; dtr::logic_error when it handed
    //! over a cost that is not a finite number >= 0 (that one is ignored: its run keeps the
    //! provisional cost; the others are taken).
    void collect(cost_collection mode) {
        if constexpr (deferred_costs<Backend>) {
            bool bad = false;
            cost_t first_bad = 0;
            rt_.backend_.collect_costs(
                [&](cost_t actual) noexcept {
                    if (std::isfinite(actual) && actual >= 0) {
                        apply(actual);
                    } else {
                        skip();
                        if (!bad) first_bad = actual;
                        bad = true;
                    }
                },
                mode);
            // Drop the entries handed over; in steady state some are always in flight, so
            // waiting for the queue to empty would let it grow without bound.
            if (head_ == pending_.size()) {
                pending_.clear();
                head_ = 0;
            } else if (head_ >= 64 && 2 * head_ >= pending_.size()) {
                pending_.erase(pending_.begin(),
                               pending_.begin() + static_cast<std::ptrdiff_t>(head_));
                head_ = 0;
            }
            DTR_EXPECTS(!bad, "the backend's collect_costs() handed over a cost of " +
                                  duration_text(first_bad) +
                                  "; a measured cost must be a finite number of ns >= 0 (its "
                                  "operator keeps the provisional cost)");
        } else {
            (void)mode;
        }
    }

private:
    //! A measurement started by execute() and not handed over yet.
    struct pending_cost {
        op_type* op;        //!< record to correct; null when gone or not a first run
        cost_t provisional; //!< what execute() returned and the runtime recorded
        bool remat;
        bool apply; //!< false when the recorded cost was supplied, not measured
    };

    //! The next measurement arrived but is not a duration: its run keeps what it recorded.
    void skip() noexcept {
        if (head_ != pending_.size()) ++head_;
    }

    void apply(cost_t actual) noexcept {
        // More results than executions would break the protocol; never pair them with nothing.
        if (head_ == pending_.size()) return;
        const pending_cost p = pending_[head_++];
        if (!p.apply) return;
        const cost_t delta = actual - p.provisional;
        // Staleness is measured on the clock: a clock running backwards would make storages
        // used since look used in the future. An overestimate is kept on the clock only.
        if (delta > 0) rt_.clock_ += delta;
        (p.remat ? rt_.counters_.remat_cost : rt_.counters_.compute_cost) += delta;
        if (p.op == nullptr) return;
        p.op->cost += delta;
        p.op->for_each_product([&](storage& s) {
            // A heuristic that indexes the pool by cost sees the change as the storage
            // leaving and rejoining it, as when its pins change.
            const bool member = s.pool_hook.is_linked();
            if (member) rt_.hook_on_pool_erase(s);
            s.compute_cost += delta;
            if (member) rt_.hook_on_pool_insert(s);
        });
    }

    using base::rt_;
    std::vector<pending_cost> pending_; //!< [head_, size) await their measurement
    std::size_t head_ = 0;
};

} // namespace dtr::detail
