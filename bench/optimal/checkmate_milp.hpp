// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Checkmate's rematerialization MILP (Jain et al., MLSys 2020), solved with COIN-OR
//! CBC; its LP relaxation as a lower bound; and the two-phase LP rounding.
//!
//! Formulation (frontier-advancing stages; n stages over the n nodes of a topologically
//! indexed graph; equation numbers as in the paper, §4):
//!
//! - binaries R[t,i] (node i computed in stage t), i <= t, with R[t,t] = 1 fixed (the
//!   frontier-advancing partition); S[t,i] (i resident when stage t starts), i < t, so S is
//!   strictly lower-triangular and S[0,.] = 0 (1d); FREE[t,i,k] for k < t and
//!   i in DEPS[k] ∪ {k} (eq. (4)); continuous U[t,k] in [0, budget] for k <= t;
//! - objective (1a): minimise sum_t sum_i C_i R[t,i];
//! - (1b) R[t,v] <= R[t,u] + S[t,u] for every edge (u,v) and stage t >= v;
//! - (1c) S[t+1,i] <= S[t,i] + R[t,i];
//! - (1e) the last node is computed: implied by R[t,t] = 1;
//! - memory, eqs. (2)-(3): U[t,0] = M_0 R[t,0] + sum_i M_i S[t,i] and
//!   U[t,k+1] = U[t,k] + M_{k+1} R[t,k+1] - sum_{i in DEPS[k] ∪ {k}} M_i FREE[t,i,k];
//! - FREE[t,i,k] = R[t,k] (1 - S[t+1,i]) prod_{j in USERS[i], j > k} (1 - R[t,j]) (eq. (5)),
//!   linearised (eqs. (6)-(9)) with num_hazards = (1 - R[t,k]) + S[t+1,i] + sum_{j in
//!   USERS[i], j > k} R[t,j] as 1 - FREE <= num_hazards and
//!   max_num_hazards (1 - FREE) >= num_hazards.
//!
//! Variables the frontier-advancing partition fixes to zero (R[t,i], i > t; S[t,i], i >= t;
//! FREE[t,.,k] and U[t,k] for k >= t, which cannot affect any constrained U) are not created.
//! Consequently USERS[i] in num_hazards only runs over j <= t, and max_num_hazards counts
//! only those terms: the same integer solutions as the paper's constant (which counts users
//! j > t whose R is fixed at 0) but a tighter, still valid LP relaxation. Unlike Checkmate's
//! reference implementation, which frees only along edges, FREE includes the paper's i = k
//! term, so an output nobody reads in the stage is released right after it is computed.
//!
//! Memory is scaled by the largest output so that coefficients are at most 1 (CBC's
//! tolerances are absolute); every schedule is re-verified in bytes by the checker.
#pragma once

#include "staged_plan.hpp"

#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/schedule_checker.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dtr::optimal {

//! @brief How a solve ended.
enum class solve_status {
    optimal,     //!< proven optimal
    feasible,    //!< stopped at the time limit with an incumbent; see gap
    infeasible,  //!< proven: no schedule fits the budget
    no_solution, //!< stopped at the time limit without any integer solution
};

[[nodiscard]] constexpr const char* to_string(solve_status s) noexcept {
    switch (s) {
        case solve_status::optimal:
            return "optimal";
        case solve_status::feasible:
            return "feasible";
        case solve_status::infeasible:
            return "infeasible";
        case solve_status::no_solution:
            return "no_solution";
    }
    return "unknown";
}

//! @brief Solver settings.
struct milp_options {
    double time_limit_s = 60.0;         //!< wall-clock limit of one solve
    int threads = 1;                    //!< CBC threads (ignored when CBC lacks thread support)
    bool log = false;                   //!< let CBC/CLP print their logs
    const staged_plan* start = nullptr; //!< optional MIP start (integral, frontier-advancing)
    //! CBC's integer preprocessing (CglPreProcess). Off by default: in CBC 2.10 it ignores the
    //! time limit (it ran for over ten minutes on the 100-node random layered graph under a
    //! 20 s limit) and it made vgg_unet slower (no proof in 160 s with it, optimal in 96 s
    //! without, at LB + 0.75 (peak - LB)).
    bool preprocess = false;
    //! Measure the limit in process CPU time instead of wall-clock time: reproducible on a
    //! shared machine, where wall-clock limits shrink with the load.
    bool cpu_time = false;
    std::vector<std::string> cbc_args; //!< extra CBC driver arguments, passed before -solve
};

//! @brief Size of a built model.
struct model_size {
    std::size_t columns = 0, binaries = 0, rows = 0, nonzeros = 0;
};

//! @brief Outcome of solve_milp().
struct milp_result {
    solve_status status = solve_status::no_solution;
    double objective = std::numeric_limits<double>::quiet_NaN(); //!< incumbent's objective
    double bound = std::numeric_limits<double>::quiet_NaN();     //!< proven lower bound
    double gap = std::numeric_limits<double>::quiet_NaN();       //!< (objective-bound)/objective
    double seconds = 0.0;
    bool start_given = false;        //!< a MIP start was passed to CBC
    std::optional<staged_plan> plan; //!< S as solved, R the cheapest for that S
    model_size size;
};

//! @brief Outcome of solve_lp().
struct lp_result {
    bool solved = false;     //!< optimal LP found (false: infeasible or time limit)
    bool infeasible = false; //!< proven infeasible (so is the MILP)
    double bound = std::numeric_limits<double>::quiet_NaN(); //!< LP optimum: lower bound
    double seconds = 0.0;
    std::vector<double> s; //!< fractional S, n*n row-major (zero where not a variable)
    model_size size;
};

namespace detail {

//! Column layout and rows of the MILP for one graph and budget.
class checkmate_model {
public:
    checkmate_model(const static_graph& g, std::uint64_t budget) : g_(g), n_(g.size()) {
        DTR_EXPECTS(g.is_topologically_indexed(),
                    "checkmate MILP: graph must be topologically indexed");
        DTR_EXPECTS(n_ > 0, "checkmate MILP: empty graph");
        for (node_id v = 0; v < n_; ++v)
            scale_ = std::max(scale_, static_cast<double>(g[v].output_bytes));
        if (scale_ <= 0.0) scale_ = 1.0;
        budget_ = static_cast<double>(budget) / scale_;
        build();
    }

    [[nodiscard]] int r(std::size_t t, node_id i) const {
        return static_cast<int>(t * (t + 1) / 2 + i);
    }
    [[nodiscard]] int s(std::size_t t, node_id i) const {
        return static_cast<int>(s0_ + t * (t - 1) / 2 + i);
    }
    [[nodiscard]] int u(std::size_t t, node_id k) const {
        return static_cast<int>(u0_ + t * (t + 1) / 2 + k);
    }
    [[nodiscard]] double mem(node_id v) const {
        return static_cast<double>(g_[v].output_bytes) / scale_;
    }

    //! Loads the model into `solver`; `integral` marks R, S, FREE as integers.
    void load(OsiClpSolverInterface& solver, bool integral, bool names) const {
        // Built in one piece: appending rows one by one reallocates every time (quadratic).
        const std::size_t rows = rowlb_.size();
        std::vector<CoinBigIndex> start(rows + 1);
        std::vector<int> length(rows);
        for (std::size_t k = 0; k < rows; ++k) {
            start[k] = static_cast<CoinBigIndex>(row_start_[k]);
            length[k] = static_cast<int>(row_start_[k + 1] - row_start_[k]);
        }
        start[rows] = static_cast<CoinBigIndex>(row_index_.size());
        const CoinPackedMatrix m(false, static_cast<int>(collb_.size()), static_cast<int>(rows),
                                 static_cast<CoinBigIndex>(row_index_.size()), row_value_.data(),
                                 row_index_.data(), start.data(), length.data());
        solver.loadProblem(m, collb_.data(), colub_.data(), obj_.data(), rowlb_.data(),
                           rowub_.data());
        if (integral)
            for (std::size_t c = 0; c < binaries_; ++c) solver.setInteger(static_cast<int>(c));
        if (names)
            for (std::size_t c = 0; c < names_size(); ++c)
                solver.setColName(static_cast<int>(c), name(c));
    }

    [[nodiscard]] model_size size() const {
        return {collb_.size(), binaries_, rowlb_.size(), row_index_.size()};
    }

    //! Values of every column for an integral plan (a MIP start).
    [[nodiscard]] std::vector<double> values(const staged_plan& p) const {
        std::vector<double> x(collb_.size(), 0.0);
        for (std::size_t t = 0; t < n_; ++t) {
            for (node_id i = 0; i <= t; ++i)
                x[static_cast<std::size_t>(r(t, i))] = p.r(t, i) ? 1.0 : 0.0;
            for (node_id i = 0; i < t; ++i)
                x[static_cast<std::size_t>(s(t, i))] = p.s(t, i) ? 1.0 : 0.0;
            const auto um = stage_memory(g_, p, t);
            for (node_id k = 0; k <= t; ++k) x[static_cast<std::size_t>(u(t, k))] = um[k] / scale_;
        }
        for (const auto& f : frees_)
            x[static_cast<std::size_t>(f.col)] = free_flag(g_, p, f.t, f.i, f.k) ? 1.0 : 0.0;
        return x;
    }

    //! Largest U of a value vector, in the model's units.
    [[nodiscard]] double max_u(const std::vector<double>& x) const {
        double m = 0.0;
        for (std::size_t t = 0; t < n_; ++t)
            for (node_id k = 0; k <= t; ++k) m = std::max(m, x[static_cast<std::size_t>(u(t, k))]);
        return m;
    }
    [[nodiscard]] double budget() const noexcept { return budget_; }

    [[nodiscard]] std::string name(std::size_t c) const {
        if (c < s0_) {
            std::size_t t = 0;
            while ((t + 1) * (t + 2) / 2 <= c) ++t;
            return "R_" + std::to_string(t) + "_" + std::to_string(c - t * (t + 1) / 2);
        }
        if (c < f0_) {
            const std::size_t q = c - s0_;
            std::size_t t = 1;
            while (t * (t + 1) / 2 <= q) ++t;
            return "S_" + std::to_string(t) + "_" + std::to_string(q - t * (t - 1) / 2);
        }
        if (c < u0_) {
            const auto& f = frees_[c - f0_];
            return "F_" + std::to_string(f.t) + "_" + std::to_string(f.i) + "_" +
                   std::to_string(f.k);
        }
        const std::size_t q = c - u0_;
        std::size_t t = 0;
        while ((t + 1) * (t + 2) / 2 <= q) ++t;
        return "U_" + std::to_string(t) + "_" + std::to_string(q - t * (t + 1) / 2);
    }
    [[nodiscard]] std::size_t names_size() const noexcept { return collb_.size(); }

    //! Fractional S as an n*n row-major matrix.
    [[nodiscard]] std::vector<double> s_matrix(const double* x) const {
        std::vector<double> out(n_ * n_, 0.0);
        for (std::size_t t = 1; t < n_; ++t)
            for (node_id i = 0; i < t; ++i) out[t * n_ + i] = x[s(t, i)];
        return out;
    }

private:
    struct free_var {
        int col;
        std::size_t t;
        node_id i, k;
    };

    int add_col(double lb, double ub, double cost) {
        collb_.push_back(lb);
        colub_.push_back(ub);
        obj_.push_back(cost);
        return static_cast<int>(collb_.size() - 1);
    }
    void add_row(double lb, double ub) {
        rowlb_.push_back(lb);
        rowub_.push_back(ub);
        row_start_.push_back(row_index_.size());
    }
    void term(int col, double coef) {
        row_index_.push_back(col);
        row_value_.push_back(coef);
    }

    void build() {
        const std::size_t n = n_;
        const double inf = std::numeric_limits<double>::infinity();
        row_start_.push_back(0);
        // R: objective (1a); R[t,t] = 1 is the frontier-advancing partition.
        for (std::size_t t = 0; t < n; ++t)
            for (node_id i = 0; i <= t; ++i) add_col(i == t ? 1.0 : 0.0, 1.0, g_[i].compute_cost);
        s0_ = collb_.size();
        for (std::size_t t = 1; t < n; ++t)
            for (node_id i = 0; i < t; ++i) add_col(0.0, 1.0, 0.0);
        f0_ = collb_.size();
        for (std::size_t t = 1; t < n; ++t)
            for (node_id k = 0; k < t; ++k) {
                for (const node_id i : g_.predecessors(k))
                    frees_.push_back({add_col(0.0, 1.0, 0.0), t, i, k});
                frees_.push_back({add_col(0.0, 1.0, 0.0), t, k, k});
            }
        u0_ = collb_.size();
        binaries_ = u0_;
        for (std::size_t t = 0; t < n; ++t)
            for (node_id k = 0; k <= t; ++k) add_col(0.0, budget_, 0.0);

        // (1b) R[t,v] - R[t,u] - S[t,u] <= 0 for each edge and t >= v.
        for (const auto& e : g_.edges())
            for (std::size_t t = e.target; t < n; ++t) {
                term(r(t, e.target), 1.0);
                term(r(t, e.source), -1.0);
                term(s(t, e.source), -1.0);
                add_row(-inf, 0.0);
            }
        // (1c) S[t+1,i] - S[t,i] - R[t,i] <= 0 (i = t is implied by R[t,t] = 1).
        for (std::size_t t = 0; t + 1 < n; ++t)
            for (node_id i = 0; i < t; ++i) {
                term(s(t + 1, i), 1.0);
                term(s(t, i), -1.0);
                term(r(t, i), -1.0);
                add_row(-inf, 0.0);
            }
        // (8)-(9): linearised FREE. Hazards: (1 - R[t,k]) + S[t+1,i] + sum R[t,j], j in
        // USERS[i], k < j <= t. Rows: FREE - R[t,k] + S[t+1,i] + sum R[t,j] >= 0 and
        // -kappa FREE + R[t,k] - S[t+1,i] - sum R[t,j] >= 1 - kappa.
        for (const auto& f : frees_) {
            const bool has_next = f.t + 1 < n;
            double kappa = has_next ? 2.0 : 1.0;
            for (const node_id j : g_.successors(f.i))
                if (j > f.k && j <= f.t) kappa += 1.0;
            for (int pass = 0; pass < 2; ++pass) {
                const double sign = pass == 0 ? 1.0 : -1.0;
                term(f.col, pass == 0 ? 1.0 : -kappa);
                term(r(f.t, f.k), -sign);
                if (has_next) term(s(f.t + 1, f.i), sign);
                for (const node_id j : g_.successors(f.i))
                    if (j > f.k && j <= f.t) term(r(f.t, j), sign);
                if (pass == 0)
                    add_row(0.0, inf);
                else
                    add_row(1.0 - kappa, inf);
            }
        }
        // (2)-(3): memory recurrence.
        std::size_t next_free = 0;
        for (std::size_t t = 0; t < n; ++t) {
            term(u(t, 0), 1.0);
            term(r(t, 0), -mem(0));
            for (node_id i = 0; i < t; ++i)
                if (mem(i) != 0.0) term(s(t, i), -mem(i));
            add_row(0.0, 0.0);
            for (node_id k = 0; k < t; ++k) {
                term(u(t, k + 1), 1.0);
                term(u(t, k), -1.0);
                term(r(t, k + 1), -mem(k + 1));
                // FREE columns of (t, ., k) were created consecutively: preds then k.
                for (; next_free < frees_.size() && frees_[next_free].t == t &&
                       frees_[next_free].k == k;
                     ++next_free)
                    if (mem(frees_[next_free].i) != 0.0)
                        term(frees_[next_free].col, mem(frees_[next_free].i));
                add_row(0.0, 0.0);
            }
        }
    }

    const static_graph& g_;
    std::size_t n_;
    double scale_ = 0.0;
    double budget_ = 0.0;
    std::size_t s0_ = 0, f0_ = 0, u0_ = 0, binaries_ = 0;
    std::vector<free_var> frees_;
    std::vector<double> collb_, colub_, obj_, rowlb_, rowub_;
    std::vector<std::size_t> row_start_;
    std::vector<int> row_index_;
    std::vector<double> row_value_;
};

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace detail

//! @brief Solves Checkmate's MILP for `g` under `budget` bytes with CBC.
//!
//! Runs CBC's standard driver (presolve, cuts, heuristics) with a wall-clock limit. A MIP
//! start, when given, is passed as a full assignment (R, S, FREE and U from the plan); CBC
//! checks it itself. The returned plan keeps the solution's S and recomputes the cheapest R
//! for it; callers must still run it through the checker.
//! Throws: dtr::logic_error when `g` is not topologically indexed.
[[nodiscard]] inline milp_result solve_milp(const static_graph& g, std::uint64_t budget,
                                            const milp_options& opt = {}) {
    const auto t0 = std::chrono::steady_clock::now();
    milp_result res;
    detail::checkmate_model model(g, budget);
    res.size = model.size();

    OsiClpSolverInterface solver;
    const bool with_start = opt.start != nullptr;
    model.load(solver, true, with_start);
    solver.setObjSense(1.0);
    solver.messageHandler()->setLogLevel(opt.log ? 1 : 0);
    solver.getModelPtr()->messageHandler()->setLogLevel(opt.log ? 1 : 0);

    CbcModel cbc(solver);
    CbcSolverUsefulData data;
    CbcMain0(cbc, data);
    if (with_start) {
        const auto x = model.values(*opt.start);
        // A start the model itself rejects (over its memory accounting) is not passed: CBC
        // would discard it anyway, after spending time on it.
        if (model.max_u(x) <= model.budget() * (1.0 + 1e-9)) {
            std::vector<std::pair<std::string, double>> start;
            start.reserve(x.size());
            for (std::size_t c = 0; c < x.size(); ++c) start.emplace_back(model.name(c), x[c]);
            cbc.setMIPStart(start);
            res.start_given = true;
        }
    }
    const std::string seconds = std::to_string(std::max(1.0, opt.time_limit_s));
    const std::string threads = std::to_string(std::max(1, opt.threads));
    const std::string log = opt.log ? "1" : "0";
    std::vector<const char*> argv = {"dtr-optimal",
                                     "-log",
                                     log.c_str(),
                                     "-timeMode",
                                     opt.cpu_time ? "cpu" : "elapsed",
                                     "-sec",
                                     seconds.c_str(),
                                     "-threads",
                                     threads.c_str()};
    if (!opt.preprocess) {
        argv.push_back("-preprocess");
        argv.push_back("off");
    }
    for (const auto& a : opt.cbc_args) argv.push_back(a.c_str());
    argv.push_back("-solve");
    argv.push_back("-quit");
    CbcMain1(
        static_cast<int>(argv.size()), argv.data(), cbc, [](CbcModel*, int) { return 0; }, data);
    res.seconds = detail::seconds_since(t0);

    const double* x = cbc.bestSolution();
    res.bound = cbc.getBestPossibleObjValue();
    if (x && cbc.getMinimizationObjValue() < 1e49) {
        res.objective = cbc.getObjValue();
        res.status = cbc.isProvenOptimal() ? solve_status::optimal : solve_status::feasible;
        if (res.status == solve_status::optimal) res.bound = res.objective;
        res.gap =
            res.objective > 0 ? std::max(0.0, (res.objective - res.bound) / res.objective) : 0.0;
        const std::size_t n = g.size();
        staged_plan p(n);
        for (std::size_t t = 1; t < n; ++t)
            for (node_id i = 0; i < t; ++i) p.set_s(t, i, x[model.s(t, i)] > 0.5);
        res.plan = minimal_recomputation(g, std::move(p));
    } else {
        res.status =
            cbc.isProvenInfeasible() ? solve_status::infeasible : solve_status::no_solution;
    }
    return res;
}

//! @brief Solves the LP relaxation (R, S, FREE in [0,1]) with CLP's dual simplex.
//! Its optimum is a lower bound on every frontier-advancing schedule's cost under `budget`.
[[nodiscard]] inline lp_result solve_lp(const static_graph& g, std::uint64_t budget,
                                        double time_limit_s = 600.0, bool log = false) {
    const auto t0 = std::chrono::steady_clock::now();
    lp_result res;
    detail::checkmate_model model(g, budget);
    res.size = model.size();
    OsiClpSolverInterface solver;
    model.load(solver, false, false);
    solver.messageHandler()->setLogLevel(log ? 1 : 0);
    ClpSimplex* clp = solver.getModelPtr();
    clp->messageHandler()->setLogLevel(log ? 1 : 0);
    clp->setMaximumSeconds(time_limit_s);
    solver.initialSolve();
    res.seconds = detail::seconds_since(t0);
    if (solver.isProvenOptimal()) {
        res.solved = true;
        res.bound = solver.getObjValue();
        res.s = model.s_matrix(solver.getColSolution());
    } else {
        res.infeasible = solver.isProvenPrimalInfeasible();
    }
    return res;
}

//! @brief Phase two of Checkmate's LP rounding: a rounded S (n*n row-major 0/1, strictly
//! lower-triangular) completed with the cheapest R and flattened to events.
[[nodiscard]] inline graph::schedule schedule_for_s(const static_graph& g,
                                                    const std::vector<bool>& s) {
    const std::size_t n = g.size();
    staged_plan p(n);
    for (std::size_t t = 1; t < n; ++t)
        for (node_id i = 0; i < t; ++i) p.set_s(t, i, s[t * n + i]);
    return to_schedule(g, minimal_recomputation(g, std::move(p)));
}

//! @brief A rounded schedule and how it was obtained.
struct rounding_result {
    std::optional<graph::schedule> events; //!< best schedule that passed the checker
    double cost = std::numeric_limits<double>::quiet_NaN();
    std::uint64_t peak = 0;
    std::string how; //!< "threshold 0.5", "random #17", ...
    std::size_t tried = 0;
    std::size_t feasible = 0;

    //! Completes the rounded S, checks it under `budget` and keeps it when it is the cheapest
    //! schedule that passed so far.
    void consider(const static_graph& g, const std::vector<bool>& s, std::uint64_t budget,
                  std::string label) {
        auto ev = schedule_for_s(g, s);
        const auto chk = graph::check_schedule(g, ev, budget);
        ++tried;
        if (!chk) return;
        ++feasible;
        if (!events || chk.cost() < cost) {
            cost = chk.cost();
            peak = chk.peak_memory();
            events = std::move(ev);
            how = std::move(label);
        }
    }
};

//! @brief Deterministic rounding: S = [S* >= threshold] for each threshold (Checkmate sweeps
//! 0.1..0.9); keeps the cheapest schedule that passes the checker under `budget`.
[[nodiscard]] inline rounding_result round_deterministic(
    const static_graph& g, const std::vector<double>& s_frac, std::uint64_t budget,
    const std::vector<double>& thresholds = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
    rounding_result best;
    for (const double th : thresholds) {
        std::vector<bool> s(s_frac.size());
        for (std::size_t k = 0; k < s.size(); ++k) s[k] = s_frac[k] >= th;
        best.consider(g, s, budget, "threshold " + std::to_string(th).substr(0, 4));
    }
    return best;
}

//! @brief Randomized rounding: S[t,i] ~ Bernoulli(S*[t,i]), `samples` draws from a fixed seed;
//! keeps the cheapest schedule that passes the checker under `budget`.
[[nodiscard]] inline rounding_result round_randomized(const static_graph& g,
                                                      const std::vector<double>& s_frac,
                                                      std::uint64_t budget,
                                                      std::size_t samples = 100,
                                                      std::uint64_t seed = 20210503) {
    rounding_result best;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (std::size_t k = 0; k < samples; ++k) {
        std::vector<bool> s(s_frac.size());
        for (std::size_t q = 0; q < s.size(); ++q) s[q] = s_frac[q] > 0.0 && unit(rng) < s_frac[q];
        best.consider(g, s, budget, "sample " + std::to_string(k));
    }
    return best;
}

} // namespace dtr::optimal
