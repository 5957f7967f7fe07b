// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::graph::schedule: the one format every planner emits for a static graph.
//!
//! A schedule is a flat list of events, each either "compute node v" (materialise v's output
//! tensor from its resident inputs) or "free node v" (drop v's output tensor). Checkmate's
//! staged R/S matrices, Chen et al.'s segment plans and a DTR run (its op calls, evictions and
//! rematerialisations) all flatten to this, so a single independent checker
//! (schedule_checker.hpp) can verify any of them and recompute their cost and peak memory
//! the same way. The format deliberately has no notion of stages, checkpoints or
//! heuristics: only what a device would execute.
#pragma once

#include <dtr_tools/graph/static_graph.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtr::graph {

//! @brief What an event does.
enum class event_kind : std::uint8_t {
    compute, //!< run the node's operator; its inputs must be resident, its output is not yet
    free,    //!< drop the node's output tensor; it must be resident
};

//! @brief One step of a schedule.
struct event {
    event_kind kind = event_kind::compute;
    node_id node = 0;
    friend bool operator==(const event&, const event&) = default;
};

//! @brief A sequence of compute and free events over the nodes of one static_graph.
//!
//! Building a schedule checks nothing: verifying it is schedule_checker's job, so that a
//! planner's bug cannot hide behind the container.
class schedule {
public:
    //! @brief Appends "compute v".
    void compute(node_id v) { events_.push_back({event_kind::compute, v}); }
    //! @brief Appends "free v".
    void free(node_id v) { events_.push_back({event_kind::free, v}); }
    //! @brief Appends one event.
    void push_back(event e) { events_.push_back(e); }
    //! @brief Reserves room for `n` events.
    void reserve(std::size_t n) { events_.reserve(n); }

    //! @brief The events, in execution order.
    [[nodiscard]] const std::vector<event>& events() const noexcept { return events_; }
    [[nodiscard]] std::size_t size() const noexcept { return events_.size(); }
    [[nodiscard]] bool empty() const noexcept { return events_.empty(); }
    [[nodiscard]] auto begin() const noexcept { return events_.begin(); }
    [[nodiscard]] auto end() const noexcept { return events_.end(); }
    [[nodiscard]] const event& operator[](std::size_t i) const noexcept { return events_[i]; }

    //! @brief Number of compute events (first computations and recomputations alike).
    [[nodiscard]] std::size_t compute_count() const noexcept {
        std::size_t n = 0;
        for (const auto& e : events_) n += e.kind == event_kind::compute ? 1 : 0;
        return n;
    }

    //! @brief One event per line ("compute conv1 (#0)", "free conv1 (#0)"), for debugging and
    //! for diffing two planners' output. Complexity: O(size()).
    [[nodiscard]] std::string to_string(const static_graph& g) const {
        std::string out;
        for (const auto& e : events_) {
            out += e.kind == event_kind::compute ? "compute " : "free ";
            out += g.describe(e.node);
            out += '\n';
        }
        return out;
    }

    friend bool operator==(const schedule&, const schedule&) = default;

private:
    std::vector<event> events_;
};

} // namespace dtr::graph
