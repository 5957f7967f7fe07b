// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Baseline planners: checkpoint-all and Chen et al. (2016)'s sqrt(n) and greedy.
//!
//! All of them are *checkpoint plans*: choose a set K of forward nodes to keep, run the
//! program (the nodes in topological = id order) once, and rematerialise what the backward
//! pass needs on demand. segment_schedule() turns any K into events:
//!
//! - forward pass: every node is computed once; a forward tensor that is not in K and not in
//!   the last segment (after the last checkpoint) is dropped as soon as no forward node needs
//!   it any more; everything else is dropped after its last use;
//! - backward pass: before each node, the missing ancestors it needs are recomputed in id
//!   order from the nearest resident tensors, and every recomputed tensor is kept until its
//!   last use; so each segment between checkpoints is recomputed once, which is the cheapest
//!   recomputation for the chosen checkpoints in Chen et al.'s model.
//!
//! With K empty nothing is dropped (one segment), which is checkpoint-all: every tensor freed
//! after its last use, no recomputation, and the largest memory any planner needs ("peak").
//!
//! Candidate sets follow Checkmate's baselines: *linearized* treats every forward node as a
//! candidate; the *articulation-point* variant restricts candidates to articulation points
//! of the undirected forward graph (with a virtual input attached to the first forward node
//! and a virtual output to the last), so that each checkpoint separates the graph.
#pragma once

#include <dtr/error.hpp>
#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/schedule_checker.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace dtr::optimal {

using graph::node_id;
using graph::static_graph;

//! @brief Forward nodes (backward flag false), ascending.
[[nodiscard]] inline std::vector<node_id> forward_nodes(const static_graph& g) {
    std::vector<node_id> f;
    for (node_id v = 0; v < g.size(); ++v)
        if (!g[v].backward) f.push_back(v);
    return f;
}

//! @brief Events for the checkpoint plan `checkpoints` (forward node ids, any order).
//!
//! `g` must be topologically indexed; the program order is 0..n-1.
//! Complexity: O(n + E) plus the recomputed closures, O(n (n + E)) at worst.
//! @throws dtr::logic_error when `g` is not topologically indexed or a checkpoint is not a
//! forward node.
[[nodiscard]] inline graph::schedule segment_schedule(const static_graph& g,
                                                      const std::vector<node_id>& checkpoints) {
    DTR_EXPECTS(g.is_topologically_indexed(),
                "segment_schedule: graph must be topologically indexed");
    const std::size_t n = g.size();
    std::vector<bool> is_checkpoint(n, false);
    bool any = false;
    node_id last = 0;
    for (const node_id c : checkpoints) {
        DTR_EXPECTS(c < n && !g[c].backward,
                    "segment_schedule: checkpoint " + g.describe(c) + " is not a forward node");
        is_checkpoint[c] = true;
        last = any ? std::max(last, c) : c;
        any = true;
    }
    // Dropped during the forward pass: forward, not a checkpoint, not in the last segment
    // (Chen et al. keep the last segment: the backward pass starts on it right away).
    const auto droppable = [&](node_id x) {
        return !g[x].backward && !is_checkpoint[x] && any && x < last;
    };
    std::vector<std::size_t> users(n), forward_users(n), stage_uses(n, 0);
    for (node_id x = 0; x < n; ++x) {
        users[x] = g.successors(x).size();
        for (const node_id y : g.successors(x)) forward_users[x] += g[y].backward ? 0 : 1;
    }
    std::vector<bool> resident(n, false), marked(n, false);
    graph::schedule out;
    std::vector<node_id> list, stack;

    const auto maybe_free = [&](node_id x, bool forward_phase) {
        if (!resident[x] || stage_uses[x] > 0) return;
        bool needed = users[x] > 0;
        if (needed && forward_phase && forward_users[x] == 0 && droppable(x)) needed = false;
        if (!needed) {
            resident[x] = false;
            out.free(x);
        }
    };

    for (node_id v = 0; v < n; ++v) {
        // The missing ancestors v needs, found by DFS through non-resident nodes.
        list.clear();
        for (const node_id u : g.predecessors(v))
            if (!resident[u] && !marked[u]) {
                marked[u] = true;
                stack.push_back(u);
            }
        while (!stack.empty()) {
            const node_id u = stack.back();
            stack.pop_back();
            list.push_back(u);
            for (const node_id p : g.predecessors(u))
                if (!resident[p] && !marked[p]) {
                    marked[p] = true;
                    stack.push_back(p);
                }
        }
        std::sort(list.begin(), list.end());
        list.push_back(v);
        for (const node_id c : list) {
            marked[c] = false;
            for (const node_id p : g.predecessors(c)) ++stage_uses[p];
        }
        const bool forward_phase = !g[v].backward;
        for (const node_id c : list) {
            out.compute(c);
            resident[c] = true;
            for (const node_id p : g.predecessors(c)) --stage_uses[p];
            if (c == v)
                for (const node_id p : g.predecessors(v)) {
                    --users[p];
                    if (forward_phase) --forward_users[p];
                }
            for (const node_id p : g.predecessors(c)) maybe_free(p, forward_phase);
            maybe_free(c, forward_phase);
        }
    }
    return out;
}

//! @brief Checkpoint-all: run in topological order, free each tensor after its last use.
//! Its cost is the graph's total compute cost and its peak memory the largest any plan needs.
[[nodiscard]] inline graph::schedule checkpoint_all(const static_graph& g) {
    return segment_schedule(g, {});
}

//! @brief Articulation points of the undirected forward graph, as Checkmate defines its
//! checkpoint candidates: forward edges only, a virtual input joined to the first forward
//! node and a virtual output joined to the last; a node qualifies when removing it
//! disconnects that graph. Ascending.
//! Complexity: O(F (F + E_fwd)), fine for the few hundred forward nodes of real networks.
[[nodiscard]] inline std::vector<node_id> articulation_points(const static_graph& g) {
    const std::vector<node_id> fwd = forward_nodes(g);
    if (fwd.empty()) return {};
    const std::size_t n = g.size();
    const std::size_t in = n, out = n + 1; // virtual input and output
    std::vector<std::vector<std::size_t>> adj(n + 2);
    std::vector<bool> present(n + 2, false);
    for (const node_id u : fwd)
        for (const node_id v : g.successors(u))
            if (!g[v].backward) {
                adj[u].push_back(v);
                adj[v].push_back(u);
                present[u] = present[v] = true;
            }
    // Checkmate builds the vertex set from forward edges; an isolated forward node is not part
    // of it. The virtual ends attach to the first and last node of that set.
    std::vector<node_id> vs;
    for (const node_id u : fwd)
        if (present[u]) vs.push_back(u);
    if (vs.empty()) return {};
    adj[in].push_back(vs.front());
    adj[vs.front()].push_back(in);
    adj[out].push_back(vs.back());
    adj[vs.back()].push_back(out);
    present[in] = present[out] = true;

    std::vector<node_id> result;
    std::vector<bool> seen(n + 2);
    std::vector<std::size_t> queue;
    for (const node_id cut : vs) {
        std::fill(seen.begin(), seen.end(), false);
        seen[cut] = true;
        std::size_t components = 0;
        for (std::size_t s = 0; s < n + 2; ++s) {
            if (!present[s] || seen[s]) continue;
            ++components;
            seen[s] = true;
            queue.assign(1, s);
            while (!queue.empty()) {
                const std::size_t x = queue.back();
                queue.pop_back();
                for (const std::size_t y : adj[x])
                    if (!seen[y]) {
                        seen[y] = true;
                        queue.push_back(y);
                    }
            }
        }
        if (components > 1) result.push_back(cut);
    }
    return result;
}

//! @brief Chen et al.'s sqrt(n) checkpoints: every k-th candidate, k = floor(sqrt(|C|)).
//! `candidates` ascending.
[[nodiscard]] inline std::vector<node_id> chen_sqrtn_checkpoints(
    const std::vector<node_id>& candidates) {
    if (candidates.empty()) return {};
    const auto k = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::sqrt(static_cast<double>(candidates.size()))));
    std::vector<node_id> out;
    for (std::size_t idx = 0; idx < candidates.size(); ++idx)
        if ((idx + 1) % k == 0) out.push_back(candidates[idx]);
    return out;
}

//! @brief Chen et al.'s greedy checkpoints for segment budget `b` (their Algorithm 3 as
//! Checkmate implements it): walk the forward nodes in topological order accumulating output
//! bytes; at a candidate whose running sum exceeds `b`, checkpoint it and restart the sum.
[[nodiscard]] inline std::vector<node_id> chen_greedy_checkpoints(
    const static_graph& g, const std::vector<node_id>& candidates, std::uint64_t b) {
    std::vector<bool> is_candidate(g.size(), false);
    for (const node_id c : candidates) is_candidate[c] = true;
    std::vector<node_id> out;
    std::uint64_t running = 0;
    for (const node_id v : forward_nodes(g)) {
        running += g[v].output_bytes;
        if (is_candidate[v] && running > b) {
            out.push_back(v);
            running = 0;
        }
    }
    return out;
}

//! @brief One evaluated checkpoint plan.
struct plan_point {
    std::vector<node_id> checkpoints;
    graph::schedule events;
    double cost = 0.0;           //!< from the checker
    std::uint64_t peak = 0;      //!< from the checker
    std::uint64_t parameter = 0; //!< the greedy segment budget that produced it (0 for sqrt(n))
};

//! @brief Evaluates a checkpoint set with the independent checker (no budget).
//! @throws dtr::logic_error if the plan fails the check (a bug in segment_schedule).
[[nodiscard]] inline plan_point evaluate_plan(const static_graph& g,
                                              std::vector<node_id> checkpoints,
                                              std::uint64_t parameter = 0) {
    plan_point p;
    p.events = segment_schedule(g, checkpoints);
    const auto r = graph::check_schedule(g, p.events);
    DTR_EXPECTS(r.ok(), "checkpoint plan failed the check: " + r.reason());
    p.checkpoints = std::move(checkpoints);
    p.cost = r.cost();
    p.peak = r.peak_memory();
    p.parameter = parameter;
    return p;
}

//! @brief Every distinct plan the greedy strategy produces as its segment budget sweeps all
//! values that matter (0 and each sum of consecutive forward outputs, and one byte less), so
//! that the best plan under any memory budget is among them.
//! Complexity: O(F^3) greedy passes over F forward nodes, plus one evaluation per distinct
//! plan.
[[nodiscard]] inline std::vector<plan_point> chen_greedy_sweep(
    const static_graph& g, const std::vector<node_id>& candidates) {
    const std::vector<node_id> fwd = forward_nodes(g);
    std::vector<std::uint64_t> prefix(fwd.size() + 1, 0);
    for (std::size_t i = 0; i < fwd.size(); ++i) prefix[i + 1] = prefix[i] + g[fwd[i]].output_bytes;
    std::set<std::uint64_t> thresholds{0};
    for (std::size_t a = 0; a < fwd.size(); ++a)
        for (std::size_t b = a + 1; b <= fwd.size(); ++b) {
            const std::uint64_t s = prefix[b] - prefix[a];
            thresholds.insert(s);
            if (s > 0) thresholds.insert(s - 1);
        }
    std::set<std::vector<node_id>> seen;
    std::vector<plan_point> out;
    for (const std::uint64_t b : thresholds) {
        auto k = chen_greedy_checkpoints(g, candidates, b);
        if (!seen.insert(k).second) continue;
        out.push_back(evaluate_plan(g, std::move(k), b));
    }
    return out;
}

//! @brief The cheapest plan whose peak fits `budget`; nullptr when none does.
[[nodiscard]] inline const plan_point* best_under(const std::vector<plan_point>& plans,
                                                  std::uint64_t budget) {
    const plan_point* best = nullptr;
    for (const auto& p : plans)
        if (p.peak <= budget &&
            (!best || p.cost < best->cost || (p.cost == best->cost && p.peak < best->peak)))
            best = &p;
    return best;
}

} // namespace dtr::optimal
