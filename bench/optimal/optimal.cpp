// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr-optimal: budget sweep of rematerialization planners on static training graphs.
//!
//!     dtr-optimal GRAPH.json... [--budgets N] [--time-limit S] [--lp-time-limit S]
//!                 [--json FILE] [--strategies a,b,...] [--milp-max-nodes N]
//!                 [--lp-max-nodes N] [--samples K] [--preprocess] [--cpu-time] [--log]
//!                 [--budget-index i,j,...]   (only those budgets of the N-point sweep, 0-based)
//!                 [--restore-pins hold|yield|planned] (the DTR strategies' restore
//!                                              discipline; default the runtime's, yield)
//!                 [--iterations N] (the DTR strategies run the program N times in a row,
//!                                   as a training loop's steps, and report the last one)
//!
//! For each graph: budgets from LB (the largest single-operator footprint, below which no
//! schedule exists) up to checkpoint-all's peak, evenly spaced; at each budget every strategy
//! plans, the independent checker verifies the schedule, and the table reports compute
//! overhead relative to checkpoint-all's cost (1.000 = no recomputation). Figures come only
//! from the checker: a strategy whose schedule fails the check is reported as such, without
//! numbers.
#include "baselines.hpp"
#include "staged_plan.hpp"
#include "strategy.hpp"
#if DTR_OPTIMAL_HAVE_CBC
#include "checkmate_milp.hpp"
#include "gap_bound.hpp"
#endif

#include <dtr/heuristic/by_name.hpp>
#include <dtr_tools/cli.hpp>
#include <dtr_tools/graph/checkmate_reader.hpp>
#include <dtr_tools/graph/dtr_simulation.hpp>
#include <dtr_tools/graph/schedule_checker.hpp>
#include <dtr_tools/graph/static_graph.hpp>
#include <dtr_tools/json_escape.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace dtr;
using namespace dtr::optimal;
using graph::static_graph;

struct options {
    std::vector<std::string> graphs;
    std::size_t budgets = 8;
    double time_limit = 60.0;
    double lp_time_limit = 600.0;
    std::string json;
    std::vector<std::string> strategies;   // empty: all
    std::vector<std::size_t> budget_index; // empty: every budget of the sweep
    std::size_t milp_max_nodes = 200;
    std::size_t lp_max_nodes = 400;
    std::size_t samples = 100;
    bool log = false;
    bool preprocess = false;
    bool cpu_time = false;
    //! The DTR strategies' restore discipline (runtime_options::restore); default the runtime's.
    restore_pins restore = runtime_options{}.restore;
    //! The DTR strategies' release (runtime_options::dealloc): eager eviction, keeping
    //! released tensors resident with kept ones evicted first (kept_priority::first), or
    //! keeping them once the budget has bound (the runtime's default).
    dealloc_policy dealloc = dealloc_policy::eager_evict;
    //! The DTR strategies run the graph's program this many times on one runtime (steps of a
    //! training loop, runtime::begin_step() before each); their schedule is the last one's.
    std::size_t iterations = 1;
};

//! The heuristics the DTR strategies run ("dtr:" + name); "default" is the runtime's own
//! default (dtr::default_heuristic), its search strategy included.
constexpr const char* dtr_heuristic_names[] = {"dtr",
                                               "dtr_eqclass",
                                               "dtr_local",
                                               "msps",
                                               "lru",
                                               "largest",
                                               "dtr_held",
                                               "dtr_ancestors_soft",
                                               "dtr_held_bounded",
                                               "dtr_next_use",
                                               "dtr_held_next_use",
                                               "dtr_eqclass_held",
                                               "dtr_eqclass_held_next_use",
                                               "default"};

//! Every strategy make_strategies() can offer, in its order; a graph gets those that apply
//! to it (Chen et al.'s need a backward pass, the LP and MILP strategies a small graph).
std::vector<std::string> strategy_names() {
    std::vector<std::string> names{"checkpoint_all", "chen_sqrtn_ap", "chen_sqrtn_lin",
                                   "chen_greedy_ap", "chen_greedy_lin"};
    for (const char* h : dtr_heuristic_names) names.push_back(std::string("dtr:") + h);
#if DTR_OPTIMAL_HAVE_CBC
    for (const char* n :
         {"gap_bound", "lp_bound", "lp_round_det", "lp_round_rand", "checkmate_milp"})
        names.emplace_back(n);
#endif
    return names;
}

std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

//! Parses the command line into `o` (the tools' convention: dtr_tools/cli.hpp).
//! @returns nullopt to go on, else the exit status (0 after --help, 2 after a bad argument).
std::optional<int> parse_args(int argc, char** argv, options& o) {
    CLI::App app{
        "dtr-optimal: Checkmate's MILP (CBC), Chen et al.'s heuristics and DTR on static "
        "training graphs"};
    app.add_option("graphs", o.graphs, "Checkmate graphs (JSON)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--budgets", o.budgets, "budgets of the sweep")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--time-limit", o.time_limit, "seconds per MILP solve")
        ->check(dtr::tools::non_negative_real)
        ->capture_default_str();
    app.add_option("--lp-time-limit", o.lp_time_limit, "seconds per LP relaxation")
        ->check(dtr::tools::non_negative_real)
        ->capture_default_str();
    app.add_option("--json", o.json, "write the results as JSON to FILE");
    const std::vector<std::string> known = strategy_names();
    app.add_option("--strategies", o.strategies,
                   "strategies to run (comma list or repeated; default all): " + joined(known))
        ->delimiter(',')
        ->check(CLI::Validator(
            [known](std::string& name) -> std::string {
                if (std::find(known.begin(), known.end(), name) != known.end()) return {};
                return (name.empty() ? std::string("an empty strategy name")
                                     : "no strategy named '" + name + "'") +
                       "; the strategies are: " + joined(known);
            },
            "STRATEGY"));
    app.add_option("--budget-index", o.budget_index,
                   "run only these budgets of the sweep, 0-based, each below --budgets (comma "
                   "list or repeated)")
        ->delimiter(',')
        ->check(dtr::tools::non_negative);
    app.add_option("--milp-max-nodes", o.milp_max_nodes, "largest graph for the MILP")
        ->capture_default_str();
    app.add_option("--lp-max-nodes", o.lp_max_nodes, "largest graph for the LP rounding")
        ->capture_default_str();
    app.add_option("--samples", o.samples, "samples of the randomized rounding")
        ->capture_default_str();
    app.add_flag("--preprocess", o.preprocess, "use CBC's integer preprocessing (CglPreProcess)");
    app.add_flag("--cpu-time", o.cpu_time, "measure the time limits in CPU time, not elapsed time");
    app.add_flag("--log", o.log, "show the solver's log");
    std::string restore_name = o.restore == restore_pins::hold      ? "hold"
                               : o.restore == restore_pins::planned ? "planned"
                                                                    : "yield";
    app.add_option("--restore-pins", restore_name,
                   "the DTR strategies' pins while restoring inputs")
        ->check(CLI::IsMember({"hold", "yield", "planned"}))
        ->capture_default_str();
    std::string dealloc_name = "eager";
    app.add_option("--dealloc", dealloc_name,
                   "the DTR strategies' release: eager eviction, keep (kept tensors go first), "
                   "or keep-once-bound (eager until the budget binds, then keep: the runtime's "
                   "default)")
        ->check(CLI::IsMember({"eager", "keep", "keep-once-bound"}))
        ->capture_default_str();
    app.add_option("--iterations", o.iterations,
                   "the DTR strategies run the program N times in a row (a training loop's "
                   "steps) and are judged on the last")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    auto status = dtr::tools::parse_command_line(app, argc, argv);
    if (status) return status;
    for (const std::size_t b : o.budget_index) {
        if (b < o.budgets) continue;
        std::fprintf(stderr,
                     "--budget-index: %zu is not a budget of the sweep: --budgets %zu makes "
                     "budgets 0 to %zu\nRun with --help for more information.\n",
                     b, o.budgets, o.budgets - 1);
        return 2;
    }
    o.restore = restore_name == "hold"      ? restore_pins::hold
                : restore_name == "planned" ? restore_pins::planned
                                            : restore_pins::yield_when_full;
    o.dealloc = dealloc_name == "keep"              ? dealloc_policy::keep_resident
                : dealloc_name == "keep-once-bound" ? dealloc_policy::keep_once_bound
                                                    : dealloc_policy::eager_evict;
    return status;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ---------------------------------------------------------------------------------------
// Strategies

outcome from_plan(const plan_point* p, double seconds, const std::string& what) {
    outcome o;
    o.seconds = seconds;
    if (!p) {
        o.status = "over_budget";
        o.detail = what;
        return o;
    }
    o.events = p->events;
    o.detail = what;
    if (!p->checkpoints.empty())
        o.detail += ", " + std::to_string(p->checkpoints.size()) + " checkpoints";
    return o;
}

#if DTR_OPTIMAL_HAVE_CBC
//! The MIP start: the cheapest checked schedule found so far for this graph (by any strategy,
//! at this budget or a smaller one) that has the frontier-advancing shape and fits the MILP's
//! memory accounting at this budget.
std::optional<staged_plan> best_start(const strategy_context& c, std::string* from) {
    const checked_outcome* best = nullptr;
    std::optional<staged_plan> plan;
    std::vector<const checked_outcome*> candidates;
    for (const auto& e : c.earlier) candidates.push_back(&e);
    for (const auto& e : c.smaller) candidates.push_back(&e);
    for (const checked_outcome* ep : candidates) {
        const auto& e = *ep;
        if (!e.checked_ok || !e.raw.events || e.peak > c.budget || (best && e.cost >= best->cost))
            continue;
        auto p = from_schedule(c.graph, *e.raw.events);
        if (!p) continue;
        auto q = prune_checkpoints(c.graph, std::move(*p));
        // The MILP accounts memory stage by stage; only a start that fits that accounting
        // (and the checker) helps CBC.
        const auto chk = graph::check_schedule(c.graph, to_schedule(c.graph, q), c.budget);
        if (!chk || milp_peak_memory(c.graph, q) > static_cast<double>(c.budget)) continue;
        best = &e;
        plan = std::move(q);
    }
    if (best && from) {
        *from = best->strategy;
        if (std::find_if(c.earlier.begin(), c.earlier.end(),
                         [&](const checked_outcome& e) { return &e == best; }) == c.earlier.end())
            *from += " at a smaller budget";
    }
    return plan;
}
#endif

//! Where a DTR run's memory went when it stopped: the nodes resident at the failure (all
//! pinned after an out_of_memory), split into the inputs of the operator whose output did not
//! fit (the top of the restore stack), those of the program's node being called (pinned by the
//! call), and the rest (inputs pinned by the restore frames in between).
std::string failure_detail(const static_graph& g, const graph::dtr_run& run) {
    const graph::node_id f = run.failing_node, p = run.program_node;
    if (f >= g.size() || p >= g.size()) return {};
    const auto is_input_of = [&](graph::node_id u, graph::node_id v) {
        const auto& pr = g.predecessors(v);
        return std::find(pr.begin(), pr.end(), u) != pr.end();
    };
    std::uint64_t bytes[3] = {0, 0, 0}, total = 0;
    std::size_t count[3] = {0, 0, 0};
    std::string nodes;
    for (const graph::node_id u : run.resident_at_failure) {
        const int k = is_input_of(u, f) ? 0 : is_input_of(u, p) ? 1 : 2;
        bytes[k] += g[u].output_bytes;
        ++count[k];
        total += g[u].output_bytes;
        nodes += (nodes.empty() ? "" : " ") + std::to_string(u) + "(" +
                 std::to_string(g[u].output_bytes) + ")";
    }
    std::uint64_t f_inputs = 0;
    for (const graph::node_id u : g.predecessors(f)) f_inputs += g[u].output_bytes;
    std::ostringstream out;
    out << "program node " << p << ", failing node " << f
        << (f == p ? " (the call itself)" : " (rematerialised)") << " output " << g[f].output_bytes
        << " + inputs " << f_inputs << "; resident at failure " << total << " in "
        << run.resident_at_failure.size() << ": failing node's inputs " << bytes[0] << " ("
        << count[0] << "), program node's inputs " << bytes[1] << " (" << count[1]
        << "), other restore frames " << bytes[2] << " (" << count[2] << "); nodes " << nodes;
    return out.str();
}

std::vector<strategy> make_strategies(const static_graph& g, const options& opt,
                                      std::ostream& note) {
    std::vector<strategy> out;
    const bool has_backward = std::any_of(g.nodes().begin(), g.nodes().end(),
                                          [](const graph::node& x) { return x.backward; });

    {
        // Budget-independent like Chen's plans: evaluated once, offered where it fits.
        const double t0 = now_s();
        auto all = std::make_shared<std::vector<plan_point>>(1, evaluate_plan(g, {}));
        const double seconds = now_s() - t0;
        out.push_back({"checkpoint_all", [all, seconds](const strategy_context& c) {
                           return from_plan(best_under(*all, c.budget), seconds,
                                            "topological order, free after last use");
                       }});
    }

    if (has_backward) {
        // Chen et al.'s plans do not depend on the budget: compute them once per graph and
        // pick the best that fits at each budget.
        const auto ap = articulation_points(g);
        const auto lin = forward_nodes(g);
        struct chen_plans {
            std::vector<plan_point> sqrtn_ap, sqrtn_lin, greedy_ap, greedy_lin;
            double t_sqrtn_ap = 0, t_sqrtn_lin = 0, t_greedy_ap = 0, t_greedy_lin = 0;
        };
        auto plans = std::make_shared<chen_plans>();
        double t0 = now_s();
        plans->sqrtn_ap.push_back(evaluate_plan(g, chen_sqrtn_checkpoints(ap)));
        plans->t_sqrtn_ap = now_s() - t0;
        t0 = now_s();
        plans->sqrtn_lin.push_back(evaluate_plan(g, chen_sqrtn_checkpoints(lin)));
        plans->t_sqrtn_lin = now_s() - t0;
        t0 = now_s();
        plans->greedy_ap = chen_greedy_sweep(g, ap);
        plans->t_greedy_ap = now_s() - t0;
        t0 = now_s();
        plans->greedy_lin = chen_greedy_sweep(g, lin);
        plans->t_greedy_lin = now_s() - t0;
        note << "  articulation points: " << ap.size() << " of " << lin.size()
             << " forward nodes; greedy sweep: " << plans->greedy_ap.size() << " (AP) and "
             << plans->greedy_lin.size() << " (linearized) distinct plans\n";
        out.push_back({"chen_sqrtn_ap", [plans](const strategy_context& c) {
                           return from_plan(best_under(plans->sqrtn_ap, c.budget),
                                            plans->t_sqrtn_ap, "sqrt(n) over articulation points");
                       }});
        out.push_back({"chen_sqrtn_lin", [plans](const strategy_context& c) {
                           return from_plan(best_under(plans->sqrtn_lin, c.budget),
                                            plans->t_sqrtn_lin, "sqrt(n) linearized");
                       }});
        out.push_back({"chen_greedy_ap", [plans](const strategy_context& c) {
                           return from_plan(best_under(plans->greedy_ap, c.budget),
                                            plans->t_greedy_ap,
                                            "greedy sweep over articulation points");
                       }});
        out.push_back({"chen_greedy_lin", [plans](const strategy_context& c) {
                           return from_plan(best_under(plans->greedy_lin, c.budget),
                                            plans->t_greedy_lin, "greedy sweep linearized");
                       }});
    }

    // DTR as a planner: the program 0..n-1 through dtr::runtime<sim_backend, H> under the
    // budget, each tensor released after its last use; the recorded schedule (operator runs,
    // rematerialisations, evictions, frees) is checked like every other. Before the MILP, so
    // that a DTR schedule can be its MIP start.
    for (const char* name : dtr_heuristic_names) {
        const std::string heuristic = name;
        runtime_options ro;
        ro.restore = opt.restore;
        ro.dealloc = opt.dealloc;
        const std::size_t iterations = opt.iterations;
        out.push_back(
            {"dtr:" + heuristic, [heuristic, ro, iterations](const strategy_context& c) {
                 outcome o;
                 const double t0 = now_s();
                 graph::dtr_run run;
                 const auto simulate = [&]<class H>(std::type_identity<H>) {
                     run = graph::simulate_dtr<H>(c.graph, c.budget, ro, H{}, iterations);
                 };
                 bool known = true;
                 if (heuristic == "default") // not a name in the policies' registry
                     simulate(std::type_identity<dtr::default_heuristic>{});
                 else
                     known = heuristics::with_heuristic(heuristic, simulate);
                 o.seconds = now_s() - t0;
                 if (!known) {
                     o.status = "error";
                     o.detail = "no heuristic named " + heuristic;
                     return o;
                 }
                 // The runtime's own total, to compare with the checker's cost.
                 o.objective = run.compute_cost;
                 char buf[200];
                 std::snprintf(buf, sizeof buf,
                               "%llu remats, %llu evictions, %llu eager evictions, %llu pin yields",
                               static_cast<unsigned long long>(run.stats.rematerializations),
                               static_cast<unsigned long long>(run.stats.evictions),
                               static_cast<unsigned long long>(run.stats.eager_evictions),
                               static_cast<unsigned long long>(run.stats.pin_yields));
                 o.detail = buf;
                 if (iterations > 1) {
                     // The costs of every iteration: the first is the online run's.
                     o.detail += "; iteration costs";
                     for (const cost_t it : run.iteration_costs)
                         o.detail += " " + std::to_string(static_cast<long long>(it));
                     std::snprintf(buf, sizeof buf,
                                   "; %llu calls with a forecast, %llu steps without (guard)",
                                   static_cast<unsigned long long>(run.stats.forecast_calls),
                                   static_cast<unsigned long long>(run.stats.forecast_withheld));
                     o.detail += buf;
                 }
                 if (run.status != "ok") {
                     o.status = run.status; // "oom", "thrashing", "inconsistent": no schedule
                     o.detail +=
                         "; " + run.detail.substr(0, 600) + "; " + failure_detail(c.graph, run);
                     return o;
                 }
                 o.events = std::move(run.events);
                 return o;
             }});
    }

#if DTR_OPTIMAL_HAVE_CBC
    // The gap bound (gap_bound.hpp): for graphs of any size, two small LPs.
    out.push_back(
        {"gap_bound", [tl = std::make_shared<const dtr::replay::storage_timeline>(timeline_of(g)),
                       &opt](const strategy_context& c) {
             const dtr::replay::lower_bound_result r =
                 dtr::replay::lower_bound(*tl, c.budget, opt.lp_time_limit);
             outcome o;
             o.seconds = r.seconds;
             o.status = !r.feasible ? "infeasible" : r.solved ? "bound" : "no_solution";
             if (r.feasible && r.solved) o.bound = r.compute + r.recompute;
             o.detail = std::to_string(r.gaps) + " gaps";
             if (!r.feasible)
                 o.detail += "; node " +
                             c.graph.describe(c.graph.topological_order()[r.first_over]) +
                             " does not fit with its inputs";
             return o;
         }});
    const bool milp = g.size() <= opt.milp_max_nodes;
    const bool lp = g.size() <= opt.lp_max_nodes;
    if (!milp)
        note << "  checkmate_milp skipped: " << g.size() << " nodes > --milp-max-nodes "
             << opt.milp_max_nodes << "\n";
    if (!lp)
        note << "  LP strategies skipped: " << g.size() << " nodes > --lp-max-nodes "
             << opt.lp_max_nodes << "\n";
    if (lp) {
        // One LP per budget serves the bound and both roundings; Checkmate rounds an LP
        // solved at 0.9 x budget when the full-budget LP rounds to nothing that fits.
        struct lp_cache {
            std::uint64_t budget = 0;
            bool valid = false;
            lp_result at_budget;
            bool tight_valid = false;
            lp_result tight;
        };
        auto cache = std::make_shared<lp_cache>();
        const auto get = [&g, &opt, cache](std::uint64_t budget) -> lp_cache& {
            if (!cache->valid || cache->budget != budget) {
                cache->budget = budget;
                cache->at_budget = solve_lp(g, budget, opt.lp_time_limit, opt.log);
                cache->valid = true;
                cache->tight_valid = false;
            }
            return *cache;
        };
        const auto tight = [&g, &opt](lp_cache& c) -> const lp_result& {
            if (!c.tight_valid) {
                c.tight =
                    solve_lp(g, static_cast<std::uint64_t>(0.9 * static_cast<double>(c.budget)),
                             opt.lp_time_limit, opt.log);
                c.tight_valid = true;
            }
            return c.tight;
        };
        out.push_back({"lp_bound", [get](const strategy_context& c) {
                           auto& lpc = get(c.budget);
                           outcome o;
                           o.seconds = lpc.at_budget.seconds;
                           o.status = lpc.at_budget.solved       ? "bound"
                                      : lpc.at_budget.infeasible ? "infeasible"
                                                                 : "no_solution";
                           o.bound = lpc.at_budget.bound;
                           o.detail = std::to_string(lpc.at_budget.size.columns) + " columns, " +
                                      std::to_string(lpc.at_budget.size.rows) + " rows";
                           return o;
                       }});
        const auto rounding = [get, tight, &g, &opt](bool randomized) {
            return [get, tight, &g, &opt, randomized](const strategy_context& c) {
                auto& lpc = get(c.budget);
                outcome o;
                o.seconds = lpc.at_budget.seconds;
                o.bound = lpc.at_budget.bound;
                const auto attempt = [&](const lp_result& lpr, const std::string& tag) {
                    const double t0 = now_s();
                    auto r = randomized ? round_randomized(g, lpr.s, c.budget, opt.samples)
                                        : round_deterministic(g, lpr.s, c.budget);
                    o.seconds += now_s() - t0;
                    if (r.events) {
                        o.events = std::move(r.events);
                        o.detail = tag + ", " + r.how + " (" + std::to_string(r.feasible) + "/" +
                                   std::to_string(r.tried) + " roundings fit)";
                        return true;
                    }
                    o.detail += tag + ": 0/" + std::to_string(r.tried) + " roundings fit; ";
                    return false;
                };
                if (lpc.at_budget.solved && attempt(lpc.at_budget, "LP at budget")) return o;
                if (lpc.at_budget.infeasible) {
                    o.status = "infeasible";
                    return o;
                }
                const auto& t = tight(lpc);
                o.seconds += t.seconds;
                if (t.solved && attempt(t, "LP at 0.9 x budget")) return o;
                o.status = "no_solution";
                return o;
            };
        };
        out.push_back({"lp_round_det", rounding(false)});
        out.push_back({"lp_round_rand", rounding(true)});
    }
    // Last, so that every other strategy's schedule at this budget can be its MIP start.
    if (milp)
        out.push_back({"checkmate_milp", [&g, &opt](const strategy_context& c) {
                           outcome o;
                           std::string from;
                           const auto start = best_start(c, &from);
                           milp_options mo;
                           mo.time_limit_s = opt.time_limit;
                           mo.log = opt.log;
                           mo.preprocess = opt.preprocess;
                           mo.cpu_time = opt.cpu_time;
                           mo.start = start ? &*start : nullptr;
                           const auto r = solve_milp(g, c.budget, mo);
                           o.status = to_string(r.status);
                           o.seconds = r.seconds;
                           o.bound = r.bound;
                           o.objective = r.objective;
                           if (r.plan) o.events = to_schedule(g, *r.plan);
                           o.detail = std::to_string(r.size.binaries) + " binaries, " +
                                      std::to_string(r.size.rows) + " rows; start: " +
                                      (r.start_given ? from : std::string("none"));
                           return o;
                       }});
#else
    (void)opt;
    note << "  MILP and LP strategies unavailable: built without COIN-OR CBC\n";
#endif
    return out;
}

// ---------------------------------------------------------------------------------------
// Output

std::string json_string(const std::string& s) {
    std::string quoted = "\"";
    quoted += dtr::json::escape(s);
    quoted += '"';
    return quoted;
}
std::string json_number(double d) {
    if (!std::isfinite(d)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
}

//! The nodes a checked schedule computes more than once: "name#id" or "name#idxk", ascending
//! by id (for the analysis of where two planners' recomputation differs).
std::string recomputed_nodes(const static_graph& g, const graph::schedule& s) {
    std::vector<std::size_t> times(g.size(), 0);
    for (const auto& e : s)
        if (e.kind == graph::event_kind::compute) ++times[e.node];
    std::string out;
    for (graph::node_id v = 0; v < g.size(); ++v) {
        if (times[v] < 2) continue;
        if (!out.empty()) out += ' ';
        out += g[v].name + "#" + std::to_string(v);
        if (times[v] > 2) out += "x" + std::to_string(times[v] - 1);
    }
    return out;
}

struct record {
    std::string file, name;
    std::size_t nodes = 0, edges = 0;
    std::uint64_t budget = 0, lb = 0, peak_all = 0;
    double fraction = 0, cost_all = 0;
    checked_outcome r;
    std::string recomputed; //!< recomputed_nodes() of a checked schedule
};

std::string to_json(const record& x) {
    const bool ok = x.r.checked_ok;
    std::string s = "{";
    s += "\"graph\":" + json_string(x.file) + ",\"name\":" + json_string(x.name);
    s += ",\"nodes\":" + std::to_string(x.nodes) + ",\"edges\":" + std::to_string(x.edges);
    s += ",\"lb_bytes\":" + std::to_string(x.lb) +
         ",\"checkpoint_all_peak_bytes\":" + std::to_string(x.peak_all);
    s += ",\"checkpoint_all_cost\":" + json_number(x.cost_all);
    s += ",\"budget_bytes\":" + std::to_string(x.budget) +
         ",\"budget_fraction\":" + json_number(x.fraction);
    s +=
        ",\"strategy\":" + json_string(x.r.strategy) + ",\"status\":" + json_string(x.r.raw.status);
    s += ",\"checked\":" + std::string(ok ? "true" : "false");
    s += ",\"check_failure\":" +
         (x.r.raw.events && !ok ? json_string(x.r.check_reason) : std::string("null"));
    s += ",\"cost\":" + (ok ? json_number(x.r.cost) : "null");
    s += ",\"overhead\":" + (ok ? json_number(x.r.cost / x.cost_all) : "null");
    s += ",\"peak_bytes\":" + (ok ? std::to_string(x.r.peak) : "null");
    s += ",\"seconds\":" + json_number(x.r.raw.seconds);
    s += ",\"cpu_seconds\":" + json_number(x.r.raw.cpu_seconds);
    s += ",\"bound\":" + json_number(x.r.raw.bound);
    s += ",\"bound_overhead\":" + json_number(x.r.raw.bound / x.cost_all);
    s += ",\"objective\":" + json_number(x.r.raw.objective);
    s += ",\"gap\":" + (ok && std::isfinite(x.r.raw.bound) && x.r.cost > 0
                            ? json_number(std::max(0.0, (x.r.cost - x.r.raw.bound) / x.r.cost))
                            : "null");
    s += ",\"recomputed\":" + (ok ? json_string(x.recomputed) : std::string("null"));
    s += ",\"detail\":" + json_string(x.r.raw.detail) + "}";
    return s;
}

// Memory for the table: GB for the model graphs; the random layered graphs use small
// abstract units, printed as they are.
bool use_gb = true;
const char* unit() { return use_gb ? "GB" : "units"; }
std::string gb(std::uint64_t bytes) {
    char buf[32];
    if (use_gb)
        std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(bytes) / 1e9);
    else
        std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(bytes));
    return buf;
}

// A table cell: overhead for a checked schedule, else the status.
std::string cell(const record& x) {
    char buf[64];
    if (x.r.checked_ok) {
        std::snprintf(buf, sizeof buf, "%.4f", x.r.cost / x.cost_all);
        return buf;
    }
    if (x.r.raw.status == "bound") {
        std::snprintf(buf, sizeof buf, ">=%.4f", x.r.raw.bound / x.cost_all);
        return buf;
    }
    if (x.r.raw.events) return "CHECK_FAILED";
    if (x.r.raw.status == "over_budget") return "-";
    return x.r.raw.status;
}

} // namespace

int main(int argc, char** argv) {
    options opt;
    if (auto status = parse_args(argc, argv, opt)) return *status;
    std::vector<record> all;
    int failures = 0;
    for (const auto& file : opt.graphs) {
        graph::checkmate_file f;
        try {
            f = graph::read_checkmate_graph(file);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "dtr-optimal: %s\n", e.what());
            ++failures;
            continue;
        }
        const static_graph g =
            f.graph.is_topologically_indexed() ? f.graph : f.graph.topologically_indexed();
        const auto base = graph::check_schedule(g, checkpoint_all(g));
        if (!base) {
            std::fprintf(stderr, "dtr-optimal: %s: checkpoint-all fails the check: %s\n",
                         file.c_str(), base.reason().c_str());
            ++failures;
            continue;
        }
        const double cost_all = base.cost();
        const std::uint64_t peak_all = base.peak_memory();
        const std::uint64_t lb = g.max_footprint();
        use_gb = peak_all >= 100'000'000;
        std::ostringstream note;
        auto strategies = make_strategies(g, opt, note);
        if (!opt.strategies.empty())
            std::erase_if(strategies, [&](const strategy& s) {
                return std::find(opt.strategies.begin(), opt.strategies.end(), s.name) ==
                       opt.strategies.end();
            });
        if (strategies.empty()) {
            // Chen et al.'s need a backward pass, the LP and MILP ones a small graph (the
            // note says which were left out, and why).
            std::fprintf(stderr,
                         "dtr-optimal: %s: none of the strategies asked for (--strategies %s) "
                         "applies to this graph\n%s",
                         file.c_str(), joined(opt.strategies).c_str(), note.str().c_str());
            ++failures;
            continue;
        }

        const std::string base_name = std::filesystem::path(file).filename().string();
        std::printf("\n== %s (%s): %zu nodes, %zu edges\n", base_name.c_str(), f.name.c_str(),
                    g.size(), g.edge_count());
        std::printf(
            "  checkpoint-all: cost %.6g, peak %s %s; LB (largest operator footprint) %s %s\n",
            cost_all, gb(peak_all).c_str(), unit(), gb(lb).c_str(), unit());
        std::printf("%s", note.str().c_str());
        std::fflush(stdout);

        std::vector<record> rows;
        std::vector<checked_outcome> smaller; // checked schedules of the budgets done so far
        std::vector<std::size_t> swept;
        for (std::size_t b = 0; b < opt.budgets; ++b)
            if (opt.budget_index.empty() ||
                std::find(opt.budget_index.begin(), opt.budget_index.end(), b) !=
                    opt.budget_index.end())
                swept.push_back(b);
        for (const std::size_t b : swept) {
            const double frac = opt.budgets == 1
                                    ? 1.0
                                    : static_cast<double>(b) / static_cast<double>(opt.budgets - 1);
            const std::uint64_t budget =
                b + 1 == opt.budgets
                    ? peak_all
                    : lb + static_cast<std::uint64_t>(frac * static_cast<double>(peak_all - lb));
            std::vector<checked_outcome> done;
            for (const auto& s : strategies) {
                checked_outcome c;
                c.strategy = s.name;
                const std::clock_t cpu0 = std::clock();
                try {
                    c.raw = s.run({g, budget, done, smaller});
                } catch (const std::exception& e) {
                    c.raw = outcome{};
                    c.raw.status = "error";
                    c.raw.detail = e.what();
                }
                c.raw.cpu_seconds = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
                if (c.raw.events) {
                    const auto chk = graph::check_schedule(g, *c.raw.events, budget);
                    c.checked_ok = chk.ok();
                    if (chk) {
                        c.cost = chk.cost();
                        c.peak = chk.peak_memory();
                    } else {
                        c.check_reason = chk.reason();
                        if (c.raw.status == "ok") c.raw.status = "check_failed";
                        ++failures;
                        std::fprintf(
                            stderr,
                            "dtr-optimal: %s at budget %s %s: %s schedule FAILED the check: %s\n",
                            base_name.c_str(), gb(budget).c_str(), unit(), s.name.c_str(),
                            chk.reason().c_str());
                    }
                }
                std::string recomputed;
                if (c.checked_ok) recomputed = recomputed_nodes(g, *c.raw.events);
                record x{file, f.name,   g.size(),     g.edge_count(),       budget, lb, peak_all,
                         frac, cost_all, std::move(c), std::move(recomputed)};
                const auto& r = x.r;
                std::printf("  budget %s %s (%.3f): %-16s %-12s %-12s %8.2fs wall %8.2fs cpu  %s\n",
                            gb(budget).c_str(), unit(), frac, r.strategy.c_str(),
                            r.raw.status.c_str(), cell(x).c_str(), r.raw.seconds, r.raw.cpu_seconds,
                            r.raw.detail.c_str());
                if (!x.recomputed.empty())
                    std::printf("      recomputed: %s\n", x.recomputed.c_str());
                std::fflush(stdout);
                done.push_back(x.r);
                rows.push_back(std::move(x));
            }
            for (auto& c : done)
                if (c.checked_ok) smaller.push_back(std::move(c));
        }

        // Summary: one row per budget, one column per strategy (overhead vs checkpoint-all).
        std::printf(
            "\n  %s: compute overhead vs checkpoint-all (cost %.6g); '-' = no plan fits, >= = LP "
            "bound\n",
            base_name.c_str(), cost_all);
        std::printf("  %-10s %-6s", use_gb ? "budget GB" : "budget", "frac");
        for (const auto& s : strategies) std::printf(" %-15s", s.name.c_str());
        std::printf("\n");
        for (std::size_t i = 0; i < swept.size(); ++i) {
            const auto& first = rows[i * strategies.size()];
            std::printf("  %-10s %-6.3f", gb(first.budget).c_str(), first.fraction);
            for (std::size_t k = 0; k < strategies.size(); ++k)
                std::printf(" %-15s", cell(rows[i * strategies.size() + k]).c_str());
            std::printf("\n");
        }
        std::fflush(stdout);
        for (auto& x : rows) all.push_back(std::move(x));
    }

    if (!opt.json.empty()) {
        std::ofstream out(opt.json);
        out << "[\n";
        for (std::size_t i = 0; i < all.size(); ++i)
            out << "  " << to_json(all[i]) << (i + 1 < all.size() ? ",\n" : "\n");
        out << "]\n";
        if (!out) {
            std::fprintf(stderr, "dtr-optimal: cannot write %s\n", opt.json.c_str());
            return 1;
        }
    }
    return failures == 0 ? 0 : 1;
}
