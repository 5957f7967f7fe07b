// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief An independent checker: executes a schedule on a static graph and verifies it.
//!
//! Every planner (checkpoint-all, Chen et al., Checkmate's MILP and its rounding, DTR) is
//! judged by this one function, which shares no code with any of them: it replays the events
//! against a resident set and recomputes cost and peak memory from the graph alone. A result
//! that fails the check carries the reason and no cost or memory figure, so nothing can
//! report a number for an invalid schedule.
//!
//! ## Semantics (Checkmate's model)
//!
//! - A node's output is one tensor of `output_bytes`; it is either resident or not.
//! - `compute v` needs every predecessor of v resident and v itself not resident. While v
//!   runs, memory is the sum of all resident tensors plus v's output; that sum must not
//!   exceed the budget. Afterwards v is resident. Its cost adds `compute_cost`.
//! - `free v` needs v resident and removes it.
//! - The schedule **finishes training** when, in addition, every node of the graph (forward,
//!   loss and backward alike, hence every sink such as the last gradient) is computed at
//!   least once. Tensors may remain resident at the end (they counted towards the peak while
//!   resident); nothing else is required of the final state.
//!
//! Peak memory is the largest "resident + output being computed" over all compute events
//! (free events only lower memory).
#pragma once

#include <dtr/error.hpp>
#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dtr::graph {

//! @brief Why a schedule was rejected.
enum class check_failure : std::uint8_t {
    none,             //!< the schedule passed
    unknown_node,     //!< an event names a node id outside the graph
    missing_input,    //!< compute v while a predecessor of v is not resident
    already_resident, //!< compute v while v's output is still resident
    not_resident,     //!< free v while v's output is not resident
    over_budget,      //!< compute v would exceed the memory budget
    never_computed,   //!< the schedule ends with some node never computed
};

//! @brief Short name of a failure kind ("missing_input", ...).
[[nodiscard]] constexpr const char* to_string(check_failure f) noexcept {
    switch (f) {
        case check_failure::none:
            return "none";
        case check_failure::unknown_node:
            return "unknown_node";
        case check_failure::missing_input:
            return "missing_input";
        case check_failure::already_resident:
            return "already_resident";
        case check_failure::not_resident:
            return "not_resident";
        case check_failure::over_budget:
            return "over_budget";
        case check_failure::never_computed:
            return "never_computed";
    }
    return "unknown";
}

//! @brief Outcome of check_schedule().
//!
//! On success, cost(), peak_memory() and the counters describe the schedule. On failure only
//! the diagnosis is available: the figures' accessors throw, so a failed schedule cannot
//! leak a number into a report.
class check_result {
public:
    //! @brief True when the schedule is valid and finishes training within the budget.
    [[nodiscard]] bool ok() const noexcept { return failure_ == check_failure::none; }
    explicit operator bool() const noexcept { return ok(); }

    //! @brief What went wrong (check_failure::none on success).
    [[nodiscard]] check_failure failure() const noexcept { return failure_; }
    //! @brief Index of the offending event; the schedule's size for never_computed.
    [[nodiscard]] std::size_t event_index() const noexcept { return event_index_; }
    //! @brief The node the offending event names (for never_computed: the first such node).
    [[nodiscard]] node_id node() const noexcept { return node_; }
    //! @brief For missing_input: the predecessor that was not resident.
    [[nodiscard]] node_id missing() const noexcept { return missing_; }
    //! @brief For over_budget: the bytes the compute event needed (resident + output).
    [[nodiscard]] std::uint64_t needed_bytes() const noexcept { return needed_; }
    //! @brief A sentence naming the event, the node and the problem; "ok" on success.
    [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

    //! @brief Total compute cost of all compute events. @throws dtr::logic_error on failure.
    [[nodiscard]] double cost() const { return require(cost_); }
    //! @brief Largest memory at any compute event. @throws dtr::logic_error on failure.
    [[nodiscard]] std::uint64_t peak_memory() const { return require(peak_); }
    //! @brief Index of the first compute event reaching the peak. @throws on failure.
    [[nodiscard]] std::size_t peak_event() const { return require(peak_event_); }
    //! @brief Number of compute events. @throws dtr::logic_error on failure.
    [[nodiscard]] std::size_t computations() const { return require(computations_); }
    //! @brief Compute events beyond the first per node. @throws dtr::logic_error on failure.
    [[nodiscard]] std::size_t recomputations() const { return require(recomputations_); }

private:
    friend check_result check_schedule(const static_graph&, const schedule&, std::uint64_t);

    template <class T>
    const T& require(const T& x) const {
        DTR_EXPECTS(ok(), "check_result: no figures for a schedule that failed the check (" +
                              reason_ + ")");
        return x;
    }

    check_failure failure_ = check_failure::none;
    std::size_t event_index_ = 0;
    node_id node_ = 0;
    node_id missing_ = 0;
    std::uint64_t needed_ = 0;
    std::string reason_ = "ok";
    double cost_ = 0.0;
    std::uint64_t peak_ = 0;
    std::size_t peak_event_ = 0;
    std::size_t computations_ = 0;
    std::size_t recomputations_ = 0;
};

//! @brief Executes `s` on `g` and checks dependencies, the budget and that training finishes.
//!
//! Stops at the first violation. Memory is counted in bytes with exact integer arithmetic.
//! Complexity: O(events + sum of in-degrees of computed nodes + V).
//! Throws: std::bad_alloc only.
[[nodiscard]] inline check_result check_schedule(
    const static_graph& g, const schedule& s,
    std::uint64_t budget = std::numeric_limits<std::uint64_t>::max()) {
    check_result r;
    const std::size_t n = g.size();
    std::vector<bool> resident(n, false);
    std::vector<std::size_t> times(n, 0);
    std::uint64_t memory = 0;
    const auto fail = [&](check_failure f, std::size_t i, node_id v, std::string why) {
        r.failure_ = f;
        r.event_index_ = i;
        r.node_ = v;
        r.reason_ =
            i < s.size() ? "event " + std::to_string(i) + ": " + std::move(why) : std::move(why);
        return r;
    };

    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto [kind, v] = s[i];
        if (v >= n)
            return fail(check_failure::unknown_node, i, v,
                        "node id " + std::to_string(v) + " is not in the graph (" +
                            std::to_string(n) + " nodes)");
        if (kind == event_kind::free) {
            if (!resident[v])
                return fail(check_failure::not_resident, i, v,
                            "free " + g.describe(v) + ": the tensor is not resident");
            resident[v] = false;
            memory -= g[v].output_bytes;
            continue;
        }
        if (resident[v])
            return fail(check_failure::already_resident, i, v,
                        "compute " + g.describe(v) +
                            ": its output is still resident "
                            "(free it before recomputing)");
        for (const node_id u : g.predecessors(v)) {
            if (!resident[u]) {
                r.missing_ = u;
                return fail(
                    check_failure::missing_input, i, v,
                    "compute " + g.describe(v) + ": input " + g.describe(u) + " is not resident");
            }
        }
        const std::uint64_t needed = memory + g[v].output_bytes;
        if (needed > budget) {
            r.needed_ = needed;
            return fail(check_failure::over_budget, i, v,
                        "compute " + g.describe(v) + " needs " + std::to_string(needed) +
                            " bytes (resident " + std::to_string(memory) + " + output " +
                            std::to_string(g[v].output_bytes) + "), " +
                            std::to_string(needed - budget) + " bytes over the budget of " +
                            std::to_string(budget));
        }
        memory = needed;
        resident[v] = true;
        if (needed > r.peak_ || r.computations_ == 0) {
            r.peak_ = needed;
            r.peak_event_ = i;
        }
        r.cost_ += g[v].compute_cost;
        ++r.computations_;
        if (times[v]++ > 0) ++r.recomputations_;
    }
    for (node_id v = 0; v < n; ++v)
        if (times[v] == 0)
            return fail(check_failure::never_computed, s.size(), v,
                        "after the last event: " + g.describe(v) +
                            " was never computed, so training did not finish");
    return r;
}

} // namespace dtr::graph
