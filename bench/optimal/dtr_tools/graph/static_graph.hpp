// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::graph::static_graph: a validated, immutable dataflow graph of a training step.
//!
//! The offline planners (Checkmate's MILP, Chen et al.'s heuristics, a DTR simulation) all
//! reason about the same object: one node per operator, whose single output tensor costs
//! `output_bytes` of memory and `compute_cost` to (re)compute, and edges for data
//! dependencies. The graph checks its invariants once, at construction (ids in range, no
//! self loops, no duplicate edges, no cycles), so every planner can rely on them instead of
//! re-checking.
#pragma once

#include <dtr/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dtr::graph {

//! @brief Index of a node in a static_graph (0-based, dense).
using node_id = std::size_t;

//! @brief One operator of a static graph and the tensor it produces.
struct node {
    std::string name;               //!< for messages and reports; need not be unique
    double compute_cost = 0.0;      //!< cost of one (re)computation; must be >= 0
    std::uint64_t output_bytes = 0; //!< size of the operator's single output tensor
    bool backward = false;          //!< part of the backward pass (loss and gradients)
};

//! @brief A data dependency: `target` reads the output of `source`.
struct edge {
    node_id source = 0;
    node_id target = 0;
    friend bool operator==(const edge&, const edge&) = default;
};

//! @brief A directed acyclic dataflow graph with per-node cost and memory.
//!
//! Immutable after construction; copies are independent. Adjacency lists are sorted by
//! node id, so iteration order (and everything derived from it) is deterministic.
class static_graph {
public:
    //! @brief The empty graph.
    static_graph() = default;

    //! @brief Builds and validates a graph.
    //! Complexity: O(V + E log E).
    //! @throws dtr::logic_error naming the offending edge or node when an edge id is out of
    //! range, an edge is a self loop or a duplicate, a cost is negative or not finite, or the
    //! edges form a cycle (the message lists the cycle by name and id).
    static_graph(std::vector<node> nodes, std::vector<edge> edges)
        : nodes_(std::move(nodes)), edges_(std::move(edges)) {
        const std::size_t n = nodes_.size();
        for (std::size_t v = 0; v < n; ++v)
            DTR_EXPECTS(
                nodes_[v].compute_cost >= 0.0 &&
                    nodes_[v].compute_cost <= std::numeric_limits<double>::max(),
                "static_graph: node " + describe(v) + " has a negative or non-finite compute cost");
        for (std::size_t j = 0; j < edges_.size(); ++j) {
            const auto [u, w] = edges_[j];
            DTR_EXPECTS(u < n && w < n, "static_graph: edge #" + std::to_string(j) + " (" +
                                            std::to_string(u) + " -> " + std::to_string(w) +
                                            ") names a node outside 0.." +
                                            std::to_string(n == 0 ? 0 : n - 1));
            DTR_EXPECTS(u != w, "static_graph: edge #" + std::to_string(j) +
                                    " is a self loop on node " + describe(u));
        }
        preds_.assign(n, {});
        succs_.assign(n, {});
        for (const auto& e : edges_) {
            preds_[e.target].push_back(e.source);
            succs_[e.source].push_back(e.target);
        }
        for (std::size_t v = 0; v < n; ++v) {
            std::sort(preds_[v].begin(), preds_[v].end());
            std::sort(succs_[v].begin(), succs_[v].end());
            const auto dup = std::adjacent_find(succs_[v].begin(), succs_[v].end());
            DTR_EXPECTS(dup == succs_[v].end(),
                        "static_graph: duplicate edge " + describe(v) + " -> " + describe(*dup));
        }
        order_ = kahn_order();
        if (order_.size() != n) {
            const auto cycle = find_cycle();
            std::string text;
            for (const node_id v : cycle) text += describe(v) + " -> ";
            text += describe(cycle.front());
            DTR_EXPECTS(false, "static_graph: the edges form a cycle: " + text);
        }
        topologically_indexed_ = std::is_sorted(order_.begin(), order_.end());
    }

    //! @brief Number of nodes.
    [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
    //! @brief Number of edges.
    [[nodiscard]] std::size_t edge_count() const noexcept { return edges_.size(); }
    //! @brief True for the graph without nodes.
    [[nodiscard]] bool empty() const noexcept { return nodes_.empty(); }

    //! @brief The node with id `v`. @throws dtr::logic_error when `v` is out of range.
    [[nodiscard]] const node& at(node_id v) const {
        DTR_EXPECTS(v < nodes_.size(), "static_graph: node id " + std::to_string(v) +
                                           " is out of range (size " +
                                           std::to_string(nodes_.size()) + ")");
        return nodes_[v];
    }
    //! @brief The node with id `v`; `v` must be in range (unchecked).
    [[nodiscard]] const node& operator[](node_id v) const noexcept { return nodes_[v]; }
    //! @brief All nodes, indexed by id.
    [[nodiscard]] std::span<const node> nodes() const noexcept { return nodes_; }
    //! @brief All edges, in construction order.
    [[nodiscard]] std::span<const edge> edges() const noexcept { return edges_; }
    //! @brief Nodes whose outputs `v` reads, ascending. `v` must be in range.
    [[nodiscard]] std::span<const node_id> predecessors(node_id v) const noexcept {
        return preds_[v];
    }
    //! @brief Nodes that read the output of `v`, ascending. `v` must be in range.
    [[nodiscard]] std::span<const node_id> successors(node_id v) const noexcept {
        return succs_[v];
    }

    //! @brief A topological order; among ready nodes the smallest id comes first, so a graph
    //! whose ids are already topological gets 0, 1, ..., n-1.
    [[nodiscard]] std::span<const node_id> topological_order() const noexcept { return order_; }

    //! @brief True when every edge goes from a smaller to a larger id (the planners that
    //! number stages by node id, like Checkmate's MILP, need this).
    [[nodiscard]] bool is_topologically_indexed() const noexcept { return topologically_indexed_; }

    //! @brief The same graph with nodes renumbered in topological_order(): new id i is old id
    //! topological_order()[i]. Complexity: O(V + E log E).
    [[nodiscard]] static_graph topologically_indexed() const {
        std::vector<node_id> new_id(size());
        for (std::size_t i = 0; i < order_.size(); ++i) new_id[order_[i]] = i;
        std::vector<node> nodes;
        nodes.reserve(size());
        for (const node_id v : order_) nodes.push_back(nodes_[v]);
        std::vector<edge> edges;
        edges.reserve(edges_.size());
        for (const auto& e : edges_) edges.push_back({new_id[e.source], new_id[e.target]});
        return {std::move(nodes), std::move(edges)};
    }

    //! @brief Memory needed to run `v` alone: its output plus all of its inputs.
    [[nodiscard]] std::uint64_t footprint(node_id v) const noexcept {
        std::uint64_t bytes = nodes_[v].output_bytes;
        for (const node_id u : preds_[v]) bytes += nodes_[u].output_bytes;
        return bytes;
    }
    //! @brief The largest footprint() of any node: no schedule can run under less memory.
    [[nodiscard]] std::uint64_t max_footprint() const noexcept {
        std::uint64_t best = 0;
        for (node_id v = 0; v < size(); ++v) best = std::max(best, footprint(v));
        return best;
    }
    //! @brief Sum of all compute costs: the cost of running every operator exactly once.
    [[nodiscard]] double total_compute_cost() const noexcept {
        double sum = 0.0;
        for (const auto& x : nodes_) sum += x.compute_cost;
        return sum;
    }

    //! @brief "name (#id)", the way messages name a node.
    [[nodiscard]] std::string describe(node_id v) const {
        // Appending (rather than "#" + std::to_string(v)) sidesteps GCC 12's false
        // -Wrestrict on operator+(const char*, std::string&&) at -O3.
        std::string id = "#";
        id += std::to_string(v);
        if (v >= nodes_.size() || nodes_[v].name.empty()) return id;
        return nodes_[v].name + " (" + id + ")";
    }

private:
    std::vector<node_id> kahn_order() const {
        const std::size_t n = nodes_.size();
        std::vector<std::size_t> indegree(n);
        for (std::size_t v = 0; v < n; ++v) indegree[v] = preds_[v].size();
        std::priority_queue<node_id, std::vector<node_id>, std::greater<>> ready;
        for (std::size_t v = 0; v < n; ++v)
            if (indegree[v] == 0) ready.push(v);
        std::vector<node_id> order;
        order.reserve(n);
        while (!ready.empty()) {
            const node_id v = ready.top();
            ready.pop();
            order.push_back(v);
            for (const node_id w : succs_[v])
                if (--indegree[w] == 0) ready.push(w);
        }
        return order;
    }

    // Called only when Kahn's algorithm stalled, so a cycle exists. Iterative DFS (graphs
    // from files can be deep enough to overflow the stack with recursion).
    std::vector<node_id> find_cycle() const {
        const std::size_t n = nodes_.size();
        enum : unsigned char { white, grey, black };
        std::vector<unsigned char> colour(n, white);
        std::vector<std::pair<node_id, std::size_t>> stack; // node, next successor index
        for (node_id root = 0; root < n; ++root) {
            if (colour[root] != white) continue;
            stack.push_back({root, 0});
            colour[root] = grey;
            while (!stack.empty()) {
                auto& [v, next] = stack.back();
                if (next == succs_[v].size()) {
                    colour[v] = black;
                    stack.pop_back();
                    continue;
                }
                const node_id w = succs_[v][next++];
                if (colour[w] == grey) {
                    std::vector<node_id> cycle;
                    auto it = std::find_if(stack.begin(), stack.end(),
                                           [w](const auto& f) { return f.first == w; });
                    for (; it != stack.end(); ++it) cycle.push_back(it->first);
                    return cycle;
                }
                if (colour[w] == white) {
                    colour[w] = grey;
                    stack.push_back({w, 0});
                }
            }
        }
        return {}; // unreachable when called after a stalled Kahn pass
    }

    std::vector<node> nodes_;
    std::vector<edge> edges_;
    std::vector<std::vector<node_id>> preds_;
    std::vector<std::vector<node_id>> succs_;
    std::vector<node_id> order_;
    bool topologically_indexed_ = true;
};

} // namespace dtr::graph
