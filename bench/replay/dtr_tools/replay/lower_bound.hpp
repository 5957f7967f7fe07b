// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A lower bound on the recomputation any schedule needs to run one step of a log
//! under a budget: no policy, online or planned offline, can do better.
//!
//! The relaxation. Take a computed storage s and two consecutive times it must be resident:
//! where it is computed or read, and the next read (or the end of the step, for an output).
//! Between them lies a gap. Any schedule either keeps s resident through the whole gap,
//! occupying its bytes at every operator inside, or does not; then s must be recomputed
//! inside the gap, after it was last absent, which runs s's operator again. One run of an
//! operator restores each of its outputs once, and the gaps of one storage are disjoint, so
//! a schedule's recomputation time is at least, summed over the gaps it does not keep, the
//! operator's time divided by the number of storages it computes. At each operator the
//! constants, what the operator reads and computes, and the kept gaps around it must fit the
//! budget. Dropping the rest (the memory of the recomputations themselves, and that a
//! recomputation needs its own inputs resident, which may have to be recomputed in turn)
//! only lowers the minimum, as does letting a gap be kept fractionally: the linear program
//!
//!     minimise   sum_g cost_g (1 - y_g)
//!     subject to sum over gaps g around k of bytes_g y_g <= budget - constants_k - needs_k
//!                for every operator k and the end, 0 <= y_g <= 1
//!
//! is a lower bound. Each gap covers a run of consecutive operators, so differencing the rows
//! of neighbouring operators leaves two entries per column: a network with gains that CLP's
//! dual simplex solves in about a second for the paper's logs. Where an operator alone,
//! with the constants, needs more than the budget, no schedule exists at all.
#pragma once

#include <dtr_tools/replay/storage_timeline.hpp>

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtr::replay {

//! @brief What lower_bound() found for one budget.
struct lower_bound_result {
    std::uint64_t budget = 0;
    //! Whether every operator fits with the constants, what it reads and computes; otherwise
    //! no schedule exists, and `first_over` is the first that does not.
    bool feasible = true;
    std::size_t first_over = 0;      //!< index into ops (ops.size(): the end's outputs)
    std::size_t first_over_line = 0; //!< its line in the log (0: the end)
    bool solved = false;             //!< the LP was solved to optimality (or not needed)
    cost_t recompute = 0;            //!< the bound on recomputation time (ns)
    cost_t compute = 0;              //!< the step's own compute (ns)
    std::size_t gaps = 0;            //!< the LP's gap variables
    double seconds = 0;              //!< to build and solve

    //! @brief The bound on the slowdown, (compute + recompute) / compute.
    [[nodiscard]] double slowdown() const {
        return compute > 0 ? (compute + recompute) / compute : 1.0;
    }
};

//! @brief The smallest budget at which every operator fits: the constants, what it reads and
//! computes (and at the end, the outputs). No schedule runs below it.
[[nodiscard]] inline std::uint64_t floor_bytes(const storage_timeline& tl) {
    const std::vector<std::uint64_t> constants = tl.constant_bytes();
    const std::vector<std::uint64_t> needs = tl.operator_bytes();
    std::uint64_t floor = 0;
    for (std::size_t k = 0; k < needs.size(); ++k) floor = std::max(floor, constants[k] + needs[k]);
    return floor;
}

//! @brief The relaxation's optimum under `budget` (bytes); see the file comment.
//! `time_limit_s` bounds CLP's solve; a solve that stops there reports solved = false.
[[nodiscard]] inline lower_bound_result lower_bound(const storage_timeline& tl,
                                                    std::uint64_t budget,
                                                    double time_limit_s = 600.0) {
    const auto t0 = std::chrono::steady_clock::now();
    lower_bound_result res{.budget = budget, .compute = tl.compute};
    const std::size_t rows = tl.ops.size() + 1; // every operator, and the end
    const std::vector<std::uint64_t> constants = tl.constant_bytes();
    const std::vector<std::uint64_t> needs = tl.operator_bytes();
    // Free bytes at each row for the kept gaps, in MB (CLP's tolerances suit unit scales).
    std::vector<double> free_mb(rows);
    for (std::size_t k = 0; k < rows; ++k) {
        const std::uint64_t need = constants[k] + needs[k];
        if (need > budget) {
            res.feasible = false;
            res.first_over = k;
            res.first_over_line = k < tl.ops.size() ? tl.ops[k].line : 0;
            res.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return res;
        }
        free_mb[k] = static_cast<double>(budget - need) / 1e6;
    }

    // The gaps: rows [first, last] strictly between two consecutive residencies.
    struct gap {
        std::uint32_t first, last;
        double mb, cost_ns;
    };
    std::vector<gap> gaps;
    std::vector<double> demand(rows + 1, 0.0); // every gap kept: a difference array
    for (const storage_timeline::storage& s : tl.storages) {
        if (s.constant || s.made_at == storage_timeline::no_op) continue;
        const storage_timeline::op& maker = tl.ops[s.made_at];
        const double cost = maker.time / static_cast<double>(maker.computes.size());
        std::uint32_t from = s.made_at;
        for (std::uint32_t to : s.reads) {
            if (to > from + 1) {
                gaps.push_back({from + 1, to - 1, static_cast<double>(s.bytes) / 1e6, cost});
                demand[from + 1] += gaps.back().mb;
                demand[to] -= gaps.back().mb;
            }
            from = to;
        }
    }
    res.gaps = gaps.size();
    bool fits_all = true;
    double running = 0;
    for (std::size_t k = 0; k < rows && fits_all; ++k) {
        running += demand[k];
        fits_all = running <= free_mb[k] + 1e-9;
    }
    if (fits_all) { // every gap kept: nothing is recomputed
        res.solved = true;
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res;
    }

    // Columns: the gaps (y in [0, 1]), then one slack per row (>= 0). Row k minus row k - 1:
    // a gap enters at its first row and leaves at the row after its last.
    const std::size_t cols = gaps.size() + rows;
    std::vector<int> starts, index;
    std::vector<double> value, lower(cols, 0.0), upper(cols, COIN_DBL_MAX), cost(cols, 0.0);
    starts.reserve(cols + 1);
    double all_cost = 0;
    for (std::size_t g = 0; g < gaps.size(); ++g) {
        starts.push_back(static_cast<int>(index.size()));
        index.push_back(static_cast<int>(gaps[g].first));
        value.push_back(gaps[g].mb);
        index.push_back(static_cast<int>(gaps[g].last + 1));
        value.push_back(-gaps[g].mb);
        upper[g] = 1.0;
        cost[g] = -gaps[g].cost_ns / 1e6; // ms: maximise what is kept
        all_cost += gaps[g].cost_ns;
    }
    for (std::size_t k = 0; k < rows; ++k) {
        starts.push_back(static_cast<int>(index.size()));
        index.push_back(static_cast<int>(k));
        value.push_back(1.0);
        if (k + 1 < rows) {
            index.push_back(static_cast<int>(k + 1));
            value.push_back(-1.0);
        }
    }
    starts.push_back(static_cast<int>(index.size()));
    std::vector<double> rhs(rows);
    for (std::size_t k = 0; k < rows; ++k) rhs[k] = free_mb[k] - (k > 0 ? free_mb[k - 1] : 0.0);
    const CoinPackedMatrix matrix(true, static_cast<int>(rows), static_cast<int>(cols),
                                  static_cast<CoinBigIndex>(index.size()), value.data(),
                                  index.data(), starts.data(), nullptr);
    ClpSimplex clp;
    clp.messageHandler()->setLogLevel(0);
    clp.loadProblem(matrix, lower.data(), upper.data(), cost.data(), rhs.data(), rhs.data());
    clp.setMaximumSeconds(time_limit_s);
    clp.dual();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (clp.isProvenOptimal()) {
        res.solved = true;
        // What is not kept, from the solution itself (not from the objective's ms scale).
        const double* y = clp.primalColumnSolution();
        double kept = 0;
        for (std::size_t g = 0; g < gaps.size(); ++g)
            kept += std::clamp(y[g], 0.0, 1.0) * gaps[g].cost_ns;
        res.recompute = std::max(0.0, all_cost - kept);
    }
    return res;
}

} // namespace dtr::replay
