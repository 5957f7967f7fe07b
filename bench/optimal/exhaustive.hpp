// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive search over checkpoint matrices: the reference optimum for tiny graphs.
//!
//! For a fixed S the cheapest R is its closure (minimal_recomputation), so enumerating every
//! strictly lower-triangular S and keeping the cheapest whose memory fits gives the optimum
//! of Checkmate's frontier-advancing MILP, without any solver. Only for tests: there are
//! 2^(n(n-1)/2) matrices, about 33 thousand for n = 6.
#pragma once

#include "staged_plan.hpp"

#include <dtr/error.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace dtr::optimal {

//! @brief The cheapest plan whose MILP memory accounting (every U[t,k]) fits `budget`, or
//! nullopt when none does. @throws dtr::logic_error for graphs of more than 7 nodes.
[[nodiscard]] inline std::optional<staged_plan> exhaustive_optimum(const static_graph& g,
                                                                   std::uint64_t budget) {
    const std::size_t n = g.size();
    DTR_EXPECTS(n <= 7, "exhaustive_optimum: only for graphs of at most 7 nodes");
    std::vector<std::pair<std::size_t, node_id>> cells; // (t, i), i < t
    for (std::size_t t = 1; t < n; ++t)
        for (node_id i = 0; i < t; ++i) cells.emplace_back(t, i);
    std::optional<staged_plan> best;
    double best_cost = std::numeric_limits<double>::infinity();
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << cells.size()); ++mask) {
        staged_plan p(n);
        for (std::size_t b = 0; b < cells.size(); ++b)
            if (mask >> b & 1U) p.set_s(cells[b].first, cells[b].second, true);
        p = minimal_recomputation(g, std::move(p));
        const double c = p.cost(g);
        if (c >= best_cost || milp_peak_memory(g, p) > static_cast<double>(budget)) continue;
        best_cost = c;
        best = std::move(p);
    }
    return best;
}

} // namespace dtr::optimal
