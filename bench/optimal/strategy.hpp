// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The interface every planner implements for dtr-optimal's budget sweep.
//!
//! A strategy gets the graph, the budget and the results of the strategies that ran before it
//! at the same budget (the MILP takes its MIP start from them), and returns a schedule in the
//! common event format. It never reports its own cost or memory: the driver runs every
//! returned schedule through graph::check_schedule() and takes the figures from there, so a
//! planner cannot report a number for a schedule that is invalid or over budget.
//!
//! Adding a planner is one more entry in the list in optimal.cpp: a name and a function
//! returning an `outcome` (the DTR strategies, `dtr:<heuristic>`, are such entries).
#pragma once

#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtr::optimal {

//! @brief What a strategy produced at one budget.
struct outcome {
    //! "ok" for heuristics that produced a schedule; a solver's status ("optimal",
    //! "feasible", "no_solution", "infeasible"); "over_budget" when the strategy's only plans
    //! do not fit; "bound" for a lower bound without a schedule; "skipped" when not run.
    std::string status = "ok";
    std::optional<graph::schedule> events; //!< the schedule to verify, if any
    double seconds = 0.0;                  //!< planning time (solver wall clock)
    double cpu_seconds =
        std::numeric_limits<double>::quiet_NaN(); //!< process CPU time of run(); set by the driver
    double bound = std::numeric_limits<double>::quiet_NaN();     //!< proven lower bound on cost
    double objective = std::numeric_limits<double>::quiet_NaN(); //!< solver's own objective
    std::string detail; //!< free text for the report (start used, rounding, ...)
};

//! @brief A strategy's result after the checker ran (what the driver reports).
struct checked_outcome {
    std::string strategy;
    outcome raw;
    bool checked_ok = false;  //!< raw.events present and passed the checker
    std::string check_reason; //!< the checker's reason when it failed
    double cost = std::numeric_limits<double>::quiet_NaN(); //!< from the checker only
    std::uint64_t peak = 0;                                 //!< from the checker only
};

//! @brief Everything a strategy sees at one budget.
struct strategy_context {
    const graph::static_graph& graph;
    std::uint64_t budget;
    const std::vector<checked_outcome>& earlier; //!< results at this budget so far, in order
    //! Checked results at the smaller budgets already swept for this graph: each fits this
    //! budget too, so they are candidate MIP starts.
    const std::vector<checked_outcome>& smaller;
};

//! @brief A named planner.
struct strategy {
    std::string name;
    std::function<outcome(const strategy_context&)> run;
};

} // namespace dtr::optimal
