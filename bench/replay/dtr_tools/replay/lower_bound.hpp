// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A lower bound on the recomputation any schedule needs to run one step of a log
//! under a budget: no policy, online or planned offline, can do better.
//!
//! **Gaps.** Take a computed storage s and two consecutive times it must be resident: where
//! it is computed or read, and the next read (or the end of the step, for an output).
//! Between them lies a gap. Any schedule either keeps s resident through the whole gap,
//! occupying its bytes at every operator inside, or does not; then s must be recomputed
//! inside the gap, after it was last absent, which runs s's operator p again. At each
//! operator the constants, what the operator reads and computes, and the kept gaps around it
//! must fit the budget.
//!
//! **Charging a run.** One run of p restores each of its outputs once, and the gaps of one
//! storage are disjoint, so one run serves at most one gap of each output. Each such gap is
//! charged p's time in proportion to its storage's bytes (plus one) over all the gaps that
//! one run can serve, so no run is charged more than its time.
//!
//! **Dead inputs** (the second relaxation). Let p read a computed storage i that nothing
//! else reads: after p, i is dead. To recompute s inside a later gap, i must be resident
//! then, so either i is recomputed inside the gap (a run of i's operator q), or at every
//! operator of the gap s or i is resident: i from its last read until s is recomputed, s
//! after. A dropped gap of s thus also pays q's time (its share: a run of q can serve the
//! gaps of the storages that p computes through i, besides the gaps of q's own outputs, and
//! all of them share q's time by bytes), or keeps min(s, i's share by bytes among p's
//! outputs) resident through the gap. Of p's inputs, the one whose run costs most is charged.
//!
//! What both leave out (the memory of the recomputations themselves; inputs that other
//! operators read too; recomputations deeper than one input) can only make a real schedule
//! dearer, as does letting a gap be kept fractionally. The first relaxation is the LP
//!
//!     minimise   sum_g cost_g (1 - y_g)
//!     subject to sum over gaps g around k of bytes_g y_g <= budget - constants_k - needs_k
//!                for every operator k and the end, 0 <= y_g <= 1;
//!
//! the second adds, for each gap whose operator has a dead input, a column m_g (dropped, with
//! i or s resident through the gap) beside y_g, with y_g + m_g <= 1, and the dead input's
//! share charged unless y_g or m_g. Both are lower bounds; lower_bound() reports the higher.
//! The second is the tighter on most logs, but its shares of a run are smaller where a run
//! also serves dead inputs, so on some logs the first is. Each gap covers a run of
//! consecutive operators, so differencing the rows of neighbouring operators leaves two
//! entries per column in those rows: CLP's dual simplex solves either in under a second for
//! the paper's logs. Where an operator alone, with the constants, needs more than the
//! budget, no schedule exists at all.
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
    bool solved = false;             //!< both LPs were solved to optimality (or not needed)
    cost_t recompute = 0;            //!< the bound on recomputation time (ns)
    cost_t compute = 0;              //!< the step's own compute (ns)
    std::size_t gaps = 0;            //!< the LPs' gaps
    std::size_t dead_input_gaps = 0; //!< of which those whose operator reads a dead input
    bool by_dead_inputs = false;     //!< the bound is the second relaxation's
    double seconds = 0;              //!< to build and solve both
    //! The solution of the relaxation that gave the bound, gap by gap: the storage, the
    //! operators between its two residencies, and the fraction of it kept resident through
    //! them (1: kept, 0: dropped). Empty when everything can be kept.
    struct kept_gap {
        std::uint32_t storage, first, last;
        double kept;
    };
    std::vector<kept_gap> plan;

    //! @brief The bound on the slowdown, (compute + recompute) / compute.
    [[nodiscard]] double slowdown() const {
        return compute > 0 ? (compute + recompute) / compute : 1.0;
    }
};

//! @brief The smallest budget at which every operator fits: the constants, what it reads and
//! computes (and at the end, the outputs). No schedule runs below it.
[[nodiscard]] inline std::uint64_t floor_bytes(const storage_timeline& tl) {
    const std::vector<std::uint64_t> required = tl.required_bytes();
    return *std::max_element(required.begin(), required.end());
}

namespace detail {

//! One stretch between two residencies of a storage: rows [first, last] of the LP.
struct gap {
    std::uint32_t storage, first, last;
    double mb;      //!< kept through it
    double cost_ns; //!< its share of a run of its operator
    //! The dead input's share of a run of its operator, and the MB that keep it or the
    //! storage resident through the gap (the file comment); 0 without one.
    double input_cost_ns, input_mb;
};

//! What one relaxation found.
struct relaxation_result {
    bool solved = false;
    cost_t recompute = 0;
    std::size_t gaps = 0, dead_input_gaps = 0;
    std::vector<lower_bound_result::kept_gap> plan;
};

//! The gaps of `tl`, each charged its share of a run (the file comment); with
//! `dead_inputs`, also their dead inputs'.
inline std::vector<gap> gaps_of(const storage_timeline& tl, bool dead_inputs) {
    const auto end = static_cast<std::uint32_t>(tl.ops.size());
    auto weight = [&](std::uint32_t st) { return static_cast<double>(tl.storages[st].bytes) + 1; };
    auto dead_after_read = [&](const storage_timeline::storage& i) {
        return dead_inputs && !i.constant && i.made_at != storage_timeline::no_op &&
               i.reads.size() == 1 && i.reads[0] < end;
    };
    // made[q]: the weight of q's outputs; pool[q]: of every gap one run of q can serve.
    std::vector<double> made(end, 0.0), pool(end, 0.0);
    for (std::uint32_t q = 0; q < end; ++q)
        for (std::uint32_t i : tl.ops[q].computes) made[q] += weight(i);
    for (std::uint32_t q = 0; q < end; ++q) {
        pool[q] = made[q];
        for (std::uint32_t i : tl.ops[q].computes)
            if (dead_after_read(tl.storages[i])) pool[q] += made[tl.storages[i].reads[0]];
    }
    std::vector<gap> gaps;
    for (std::uint32_t id = 0; id < tl.storages.size(); ++id) {
        const storage_timeline::storage& s = tl.storages[id];
        if (s.constant || s.made_at == storage_timeline::no_op) continue;
        const storage_timeline::op& maker = tl.ops[s.made_at];
        double input_cost = 0, input_mb = 0;
        for (std::uint32_t in : maker.reads) {
            const storage_timeline::storage& i = tl.storages[in];
            if (!dead_after_read(i)) continue;
            const double cost = tl.ops[i.made_at].time * weight(id) / pool[i.made_at];
            if (cost > input_cost) {
                input_cost = cost;
                input_mb = std::min(static_cast<double>(s.bytes),
                                    static_cast<double>(i.bytes) * weight(id) / made[s.made_at]) /
                           1e6;
            }
        }
        std::uint32_t from = s.made_at;
        for (std::uint32_t to : s.reads) {
            if (to > from + 1)
                gaps.push_back({.storage = id,
                                .first = from + 1,
                                .last = to - 1,
                                .mb = static_cast<double>(s.bytes) / 1e6,
                                .cost_ns = maker.time * weight(id) / pool[s.made_at],
                                .input_cost_ns = input_cost,
                                .input_mb = input_mb});
            from = to;
        }
    }
    return gaps;
}

//! One relaxation's LP under the free MB of each row (operators and the end).
inline relaxation_result relax(const storage_timeline& tl, const std::vector<double>& free_mb,
                               bool dead_inputs, double time_limit_s) {
    relaxation_result res;
    const std::size_t rows = free_mb.size();
    const std::vector<gap> gaps = gaps_of(tl, dead_inputs);
    res.gaps = gaps.size();
    std::vector<double> demand(rows + 1, 0.0); // every gap kept: a difference array
    for (const gap& g : gaps) {
        demand[g.first] += g.mb;
        demand[g.last + 1] -= g.mb;
        res.dead_input_gaps += g.input_cost_ns > 0;
    }
    bool fits_all = true;
    double running = 0;
    for (std::size_t k = 0; k < rows && fits_all; ++k) {
        running += demand[k];
        fits_all = running <= free_mb[k] + 1e-9;
    }
    if (fits_all) { // every gap kept: nothing is recomputed
        res.solved = true;
        return res;
    }

    // Columns: each gap's y (kept), a dead-input gap's m too, then one slack per time row
    // (>= 0). Time rows are differenced, row k minus row k - 1, so a gap enters at its first
    // row and leaves at the row after its last; below them, one row y + m <= 1 per
    // dead-input gap. Objective: minus what is saved, in ms (CLP's scales).
    std::vector<int> starts, index;
    std::vector<double> value, lower, upper, cost;
    std::vector<bool> has_m(gaps.size(), false);
    auto column = [&](double hi, double objective) {
        starts.push_back(static_cast<int>(index.size()));
        lower.push_back(0.0);
        upper.push_back(hi);
        cost.push_back(objective);
    };
    auto entry = [&](std::size_t row, double v) {
        index.push_back(static_cast<int>(row));
        value.push_back(v);
    };
    std::size_t choice_row = rows;
    for (std::size_t g = 0; g < gaps.size(); ++g) {
        const gap& x = gaps[g];
        has_m[g] = x.input_cost_ns > 0;
        column(1.0, -(x.cost_ns + x.input_cost_ns) / 1e6);
        entry(x.first, x.mb);
        entry(x.last + 1, -x.mb);
        if (!has_m[g]) continue;
        entry(choice_row, 1.0);
        column(1.0, -x.input_cost_ns / 1e6);
        entry(x.first, x.input_mb);
        entry(x.last + 1, -x.input_mb);
        entry(choice_row, 1.0);
        ++choice_row;
    }
    for (std::size_t k = 0; k < rows; ++k) {
        column(COIN_DBL_MAX, 0.0);
        entry(k, 1.0);
        if (k + 1 < rows) entry(k + 1, -1.0);
    }
    starts.push_back(static_cast<int>(index.size()));
    std::vector<double> row_lower(choice_row, -COIN_DBL_MAX), row_upper(choice_row, 1.0);
    for (std::size_t k = 0; k < rows; ++k)
        row_lower[k] = row_upper[k] = free_mb[k] - (k > 0 ? free_mb[k - 1] : 0.0);
    const CoinPackedMatrix matrix(true, static_cast<int>(choice_row),
                                  static_cast<int>(lower.size()),
                                  static_cast<CoinBigIndex>(index.size()), value.data(),
                                  index.data(), starts.data(), nullptr);
    ClpSimplex clp;
    clp.messageHandler()->setLogLevel(0);
    clp.loadProblem(matrix, lower.data(), upper.data(), cost.data(), row_lower.data(),
                    row_upper.data());
    clp.setMaximumSeconds(time_limit_s);
    clp.dual();
    if (!clp.isProvenOptimal()) return res;
    res.solved = true;
    // What the solution recomputes, in ns, from the solution itself.
    const double* sol = clp.primalColumnSolution();
    std::size_t col = 0;
    for (std::size_t g = 0; g < gaps.size(); ++g) {
        const gap& x = gaps[g];
        const double kept = std::clamp(sol[col++], 0.0, 1.0);
        const double held = has_m[g] ? std::clamp(sol[col++], 0.0, 1.0 - kept) : 0.0;
        res.recompute += x.cost_ns * (1.0 - kept) + x.input_cost_ns * (1.0 - kept - held);
        res.plan.push_back({x.storage, x.first, x.last, kept});
    }
    return res;
}

} // namespace detail

//! @brief The higher of the two relaxations' optima under `budget` (bytes); see the file
//! comment. `time_limit_s` bounds each CLP solve; one that stops there reports solved =
//! false.
[[nodiscard]] inline lower_bound_result lower_bound(const storage_timeline& tl,
                                                    std::uint64_t budget,
                                                    double time_limit_s = 600.0) {
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    lower_bound_result res;
    res.budget = budget;
    res.compute = tl.compute;
    const std::vector<std::uint64_t> required = tl.required_bytes();
    // Free bytes at each row (operators, then the end) for the kept gaps, in MB.
    std::vector<double> free_mb(required.size());
    for (std::size_t k = 0; k < required.size(); ++k) {
        const std::uint64_t need = required[k];
        if (need > budget) {
            res.feasible = false;
            res.first_over = k;
            res.first_over_line = k < tl.ops.size() ? tl.ops[k].line : 0;
            res.seconds = elapsed();
            return res;
        }
        free_mb[k] = static_cast<double>(budget - need) / 1e6;
    }
    detail::relaxation_result plain = detail::relax(tl, free_mb, false, time_limit_s);
    detail::relaxation_result dead = detail::relax(tl, free_mb, true, time_limit_s);
    res.solved = plain.solved && dead.solved;
    res.by_dead_inputs = dead.recompute > plain.recompute;
    detail::relaxation_result& best = res.by_dead_inputs ? dead : plain;
    res.recompute = best.recompute;
    res.gaps = best.gaps;
    res.dead_input_gaps = dead.dead_input_gaps;
    res.plan = std::move(best.plan);
    res.seconds = elapsed();
    return res;
}

} // namespace dtr::replay
