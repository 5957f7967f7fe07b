// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Checkmate's staged representation (R, S matrices) and its conversions.
//!
//! Checkmate (Jain et al., MLSys 2020) describes a schedule of an n-node graph, numbered in
//! topological order, as n *stages*: stage t computes the nodes i with R[t,i] = 1 in
//! ascending order and ends with node t itself (frontier-advancing: R[t,t] = 1, R[t,i] = 0
//! for i > t); S[t,i] = 1 when node i's output is resident at the start of stage t
//! (S[t,i] = 0 for i >= t). This header converts between that form and the flat event
//! schedule (dtr::graph::schedule) that the checker verifies, and evaluates the MILP's memory
//! accounting for a given (R, S), which is what a MIP start must satisfy.
#pragma once

#include <dtr/error.hpp>
#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtr::optimal {

using graph::node_id;
using graph::static_graph;

//! @brief A frontier-advancing staged schedule: n stages over n nodes.
class staged_plan {
public:
    staged_plan() = default;
    //! @brief All-zero R and S for `n` nodes.
    explicit staged_plan(std::size_t n) : n_(n), r_(n * n, 0), s_(n * n, 0) {}

    [[nodiscard]] std::size_t size() const noexcept { return n_; }
    //! @brief R[t,i]: node i is computed in stage t.
    [[nodiscard]] bool r(std::size_t t, node_id i) const noexcept { return r_[t * n_ + i] != 0; }
    //! @brief S[t,i]: node i's output is resident when stage t starts; false for t >= n.
    [[nodiscard]] bool s(std::size_t t, node_id i) const noexcept {
        return t < n_ && s_[t * n_ + i] != 0;
    }
    void set_r(std::size_t t, node_id i, bool v) noexcept { r_[t * n_ + i] = v ? 1 : 0; }
    void set_s(std::size_t t, node_id i, bool v) noexcept { s_[t * n_ + i] = v ? 1 : 0; }

    //! @brief Sum over stages of C_i R[t,i]: the MILP's objective (1a) for this plan.
    [[nodiscard]] double cost(const static_graph& g) const {
        double c = 0.0;
        for (std::size_t t = 0; t < n_; ++t)
            for (node_id i = 0; i <= t; ++i)
                if (r(t, i)) c += g[i].compute_cost;
        return c;
    }

private:
    std::size_t n_ = 0;
    std::vector<unsigned char> r_;
    std::vector<unsigned char> s_;
};

//! @brief The cheapest R for fixed checkpoints S (Checkmate's "solve R given S").
//!
//! With S fixed, the constraints force R[t,t] = 1, R[t,i] >= S[t+1,i] - S[t,i] (1c) and
//! R[t,u] >= R[t,v] - S[t,u] for each edge (u,v) (1b); the least R satisfying them is their
//! closure, and since costs are non-negative it is also the cheapest. S must be strictly
//! lower-triangular and `g` topologically indexed.
//! Complexity: O(n (n + E)).
[[nodiscard]] inline staged_plan minimal_recomputation(const static_graph& g, staged_plan plan) {
    DTR_EXPECTS(g.is_topologically_indexed(),
                "minimal_recomputation: graph must be topologically indexed");
    const std::size_t n = plan.size();
    DTR_EXPECTS(n == g.size(), "minimal_recomputation: plan and graph differ in size");
    for (std::size_t t = 0; t < n; ++t) {
        for (node_id i = 0; i < n; ++i) {
            DTR_EXPECTS(i < t || !plan.s(t, i), "minimal_recomputation: S[" + std::to_string(t) +
                                                    "," + std::to_string(i) +
                                                    "] set on or above the diagonal");
            plan.set_r(t, i, i == t || (i < t && plan.s(t + 1, i) && !plan.s(t, i)));
        }
        // Predecessors have smaller ids, so one descending sweep closes R under (1b).
        for (node_id v = t + 1; v-- > 0;) {
            if (!plan.r(t, v)) continue;
            for (const node_id u : g.predecessors(v))
                if (!plan.s(t, u)) plan.set_r(t, u, true);
        }
    }
    return plan;
}

//! @brief Drops checkpoints that only cost memory: S[t,i] = 1 while no computation of stage t
//! reads i and stage t+1 does not keep it. The MILP's accounting holds such a tensor for the
//! whole stage, so a schedule converted from another planner (whose executor freed it) could
//! look over budget to the MILP; dropping it can also spare the recomputation that produced
//! it. Returns the cheapest-R plan of the pruned S. Complexity: O(n^2 (n + E)) at worst.
[[nodiscard]] inline staged_plan prune_checkpoints(const static_graph& g, staged_plan plan) {
    const std::size_t n = plan.size();
    for (bool changed = true; changed;) {
        plan = minimal_recomputation(g, std::move(plan));
        changed = false;
        for (std::size_t t = n; t-- > 1;)
            for (node_id i = 0; i < t; ++i) {
                if (!plan.s(t, i) || plan.s(t + 1, i)) continue;
                bool read = false;
                for (const node_id j : g.successors(i))
                    if (j <= t && plan.r(t, j)) read = true;
                if (read) continue;
                plan.set_s(t, i, false);
                changed = true;
            }
    }
    return plan;
}

//! @brief Flattens a staged plan into events, the way Checkmate executes it.
//!
//! Stage t: first free every resident tensor that stage t never reads and stage t+1 does not
//! keep; then compute the nodes with R[t,i] = 1 in ascending order (skipping one already
//! resident, which a wasteful R may ask for), and after each computation free each of its
//! inputs and itself that no later computation of the stage reads and S[t+1] does not keep
//! (the deallocation rule behind FREE, eq. (5)). The plan must satisfy (1b) and (1c);
//! otherwise the events are still produced and the checker reports the violation.
//! Complexity: O(n (n + E)).
[[nodiscard]] inline graph::schedule to_schedule(const static_graph& g, const staged_plan& plan) {
    const std::size_t n = plan.size();
    DTR_EXPECTS(n == g.size(), "to_schedule: plan and graph differ in size");
    graph::schedule out;
    std::vector<bool> resident(n, false);
    // used_after(t, u, k): u is read in stage t by a computation after node k, or kept into t+1.
    const auto used_after = [&](std::size_t t, node_id u, node_id k) {
        if (plan.s(t + 1, u)) return true;
        for (const node_id j : g.successors(u))
            if (j > k && j <= t && plan.r(t, j)) return true;
        return false;
    };
    const auto release = [&](node_id u) {
        resident[u] = false;
        out.free(u);
    };
    for (std::size_t t = 0; t < n; ++t) {
        for (node_id u = 0; u < n; ++u)
            if (resident[u] && !plan.r(t, u) && !used_after(t, u, u)) release(u);
        for (node_id i = 0; i <= t; ++i) {
            if (!plan.r(t, i)) continue;
            if (!resident[i]) {
                out.compute(i);
                resident[i] = true;
            }
            for (const node_id u : g.predecessors(i))
                if (resident[u] && !used_after(t, u, i)) release(u);
            if (resident[i] && !used_after(t, i, i)) release(i);
        }
    }
    return out;
}

//! @brief Reads a flat schedule back as stages, if it has the frontier-advancing shape.
//!
//! Requires the first computation of each node to happen in id order (node t is first
//! computed after node t-1). Stage t covers the events after the first computation of t-1
//! up to the first computation of t; R[t,i] marks the nodes computed in it, S[t,i] the nodes
//! resident just before its first computation. Returns nullopt, with `why` set, when the
//! schedule does not have that shape or does not compute every node.
//! Complexity: O(events + n^2).
[[nodiscard]] inline std::optional<staged_plan> from_schedule(const static_graph& g,
                                                              const graph::schedule& s,
                                                              std::string* why = nullptr) {
    const std::size_t n = g.size();
    staged_plan plan(n);
    std::vector<bool> resident(n, false);
    std::size_t stage = 0;      // the node whose first computation ends the current stage
    bool stage_started = false; // S of the current stage recorded
    const auto no = [&](std::string reason) -> std::optional<staged_plan> {
        if (why) *why = std::move(reason);
        return std::nullopt;
    };
    for (std::size_t k = 0; k < s.size(); ++k) {
        const auto [kind, v] = s[k];
        if (v >= n) return no("event " + std::to_string(k) + " names an unknown node");
        if (kind == graph::event_kind::free) {
            resident[v] = false;
            continue;
        }
        if (stage >= n) return no("event " + std::to_string(k) + " computes after the last stage");
        if (v > stage)
            return no("event " + std::to_string(k) + " computes " + g.describe(v) +
                      " before the first computation of " + g.describe(stage));
        if (!stage_started) {
            for (node_id i = 0; i < stage; ++i) plan.set_s(stage, i, resident[i]);
            stage_started = true;
        }
        plan.set_r(stage, v, true);
        resident[v] = true;
        if (v == stage) {
            ++stage;
            stage_started = false;
        }
    }
    if (stage != n) return no("node " + g.describe(stage) + " is never computed");
    return plan;
}

//! @brief FREE[t,i,k] of eq. (5) for an integral plan: after computing k in stage t, the
//! output of i (an input of k, or k itself) is dropped because no later computation of the
//! stage reads it and stage t+1 does not keep it.
[[nodiscard]] inline bool free_flag(const static_graph& g, const staged_plan& plan, std::size_t t,
                                    node_id i, node_id k) {
    if (!plan.r(t, k) || plan.s(t + 1, i)) return false;
    for (const node_id j : g.successors(i))
        if (j > k && j <= t && plan.r(t, j)) return false;
    return true;
}

//! @brief U[t,k] for k = 0..t: the MILP's memory accounting (eqs. (2)-(4)) for an integral
//! plan, in bytes. The MILP requires every U[t,k] <= budget; a MIP start must satisfy this.
//! Complexity: O(t + sum of in-degrees).
[[nodiscard]] inline std::vector<double> stage_memory(const static_graph& g,
                                                      const staged_plan& plan, std::size_t t) {
    std::vector<double> u(t + 1, 0.0);
    double m = plan.r(t, 0) ? static_cast<double>(g[0].output_bytes) : 0.0;
    for (node_id i = 0; i < t; ++i)
        if (plan.s(t, i)) m += static_cast<double>(g[i].output_bytes);
    u[0] = m;
    for (node_id k = 0; k < t; ++k) {
        double freed = 0.0;
        for (const node_id i : g.predecessors(k))
            if (free_flag(g, plan, t, i, k)) freed += static_cast<double>(g[i].output_bytes);
        if (free_flag(g, plan, t, k, k)) freed += static_cast<double>(g[k].output_bytes);
        m = m - freed + (plan.r(t, k + 1) ? static_cast<double>(g[k + 1].output_bytes) : 0.0);
        u[k + 1] = m;
    }
    return u;
}

//! @brief The largest U[t,k] over the whole plan (the MILP's view of its peak memory).
[[nodiscard]] inline double milp_peak_memory(const static_graph& g, const staged_plan& plan) {
    double peak = 0.0;
    for (std::size_t t = 0; t < plan.size(); ++t)
        for (const double u : stage_memory(g, plan, t)) peak = std::max(peak, u);
    return peak;
}

} // namespace dtr::optimal
