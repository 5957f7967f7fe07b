// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The bound of dtr-log-bound (bench/replay/dtr_tools/replay/lower_bound.hpp, the higher
//! of its two relaxations) on a static graph: a lower bound on the cost of every schedule that
//! runs the graph's operators in topological order with recomputations in between
//! (Checkmate's frontier-advancing schedules, and what DTR runs), under the checker's memory
//! model.
//!
//! The graph becomes a storage timeline: the k-th node of the topological order is the k-th
//! operator, computing one storage of its output bytes at its compute cost and reading its
//! predecessors' storages; there are no constants, and nothing must stay resident at the end
//! (the checker's model: resident outputs plus the output being computed, every node
//! computed at least once). Its floor is the graph's max_footprint(), Checkmate's LB.
#pragma once

#include <dtr_tools/graph/static_graph.hpp>
#include <dtr_tools/replay/lower_bound.hpp>
#include <dtr_tools/replay/storage_timeline.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dtr::optimal {

//! @brief The storage timeline of a static graph's topological schedule (see the file).
[[nodiscard]] inline replay::storage_timeline timeline_of(const graph::static_graph& g) {
    replay::storage_timeline tl;
    const auto order = g.topological_order();
    std::vector<std::uint32_t> position(g.size());
    for (std::size_t k = 0; k < order.size(); ++k)
        position[order[k]] = static_cast<std::uint32_t>(k);
    tl.storages.resize(g.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
        const graph::node_id v = order[k];
        const auto preds = g.predecessors(v);
        replay::storage_timeline::op op{
            .time = g[v].compute_cost, .reads = {}, .computes = {position[v]}, .line = 0};
        for (graph::node_id u : preds) op.reads.push_back(position[u]);
        std::sort(op.reads.begin(), op.reads.end());
        tl.storages[k] = {.bytes = g[v].output_bytes,
                          .constant = false,
                          .made_at = static_cast<std::uint32_t>(k),
                          .reads = {}};
        tl.compute += op.time;
        tl.ops.push_back(std::move(op));
    }
    for (std::uint32_t k = 0; k < tl.ops.size(); ++k)
        for (std::uint32_t s : tl.ops[k].reads) tl.storages[s].reads.push_back(k);
    return tl;
}

} // namespace dtr::optimal
