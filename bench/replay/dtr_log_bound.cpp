// SPDX-License-Identifier: Apache-2.0
// dtr-log-bound: how fast any schedule can run a DTR operator log's step under a budget.
//
//   dtr-log-bound [--ratio R]... [--time-limit S] [--json FILE] LOG...
//
// For each log and budget ratio (of the unlimited run's peak, as dtr-replay's budgets), it
// prints the lower bound on the slowdown of dtr_tools/replay/lower_bound.hpp: no policy,
// online or planned with the whole step known, recomputes less. It also prints the log's
// floor, the lowest ratio at which every operator fits beside the constants (below it, no
// schedule exists: the cell reads "below floor"). dtr-replay's slowdowns at the same ratios
// are comparable cell by cell; a replay of several steps (--steps N) repeats the same step,
// so the bound holds for each step of the steady state too.
//
// Logs that record several training steps (ANNOTATE STEP) are refused: their constants
// replay as a training loop's, which the bound does not model.
#include <dtr_tools/cli.hpp>
#include <dtr_tools/json_escape.hpp>
#include <dtr_tools/replay/baseline.hpp>
#include <dtr_tools/replay/lower_bound.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct cell {
    std::size_t log;
    double ratio;
    dtr::replay::lower_bound_result bound;
};

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> logs;
    std::vector<double> ratios;
    std::string json;
    double time_limit = 600;
    CLI::App app{
        "dtr-log-bound: a lower bound on any schedule's slowdown for a DTR operator "
        "log under budgets"};
    app.add_option("logs", logs, "DTR operator logs (one step each)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--ratio", ratios,
                   "a budget ratio of the unlimited peak (repeat; default 0.5 0.3 0.25 0.2 "
                   "0.15)")
        ->check(dtr::tools::positive_real)
        ->allow_extra_args(false);
    app.add_option("--time-limit", time_limit, "seconds CLP may spend on one budget's LP")
        ->check(dtr::tools::positive_real)
        ->capture_default_str();
    app.add_option("--json", json, "write every cell as JSON to FILE");
    if (const auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;
    if (ratios.empty()) ratios = {0.5, 0.3, 0.25, 0.2, 0.15};

    std::vector<cell> cells;
    std::vector<dtr::replay::baseline> baselines;
    std::vector<std::uint64_t> floors;
    for (std::size_t l = 0; l < logs.size(); ++l) {
        try {
            const dtr::replay::trace t = dtr::replay::load_trace(logs[l]);
            const dtr::replay::storage_timeline tl = dtr::replay::timeline_of(t);
            baselines.push_back(dtr::replay::unlimited_baseline(t));
            const dtr::replay::baseline& b = baselines.back();
            if (!b.error.empty()) {
                std::fprintf(stderr, "dtr-log-bound: %s: the unlimited run failed: %s\n",
                             logs[l].c_str(), b.error.c_str());
                return 1;
            }
            floors.push_back(dtr::replay::floor_bytes(tl));
            const std::string name = std::filesystem::path(logs[l]).filename().string();
            std::printf(
                "%s: baseline peak %.1f MB, compute %.2f ms, %zu operators, floor "
                "%.3f of the peak\n",
                name.c_str(), static_cast<double>(b.peak) / 1e6, b.compute / 1e6, tl.ops.size(),
                static_cast<double>(floors.back()) / static_cast<double>(b.peak));
            for (double ratio : ratios) {
                const auto budget = static_cast<std::uint64_t>(ratio * static_cast<double>(b.peak));
                cells.push_back({l, ratio, dtr::replay::lower_bound(tl, budget, time_limit)});
                const dtr::replay::lower_bound_result& r = cells.back().bound;
                if (!r.feasible)
                    std::printf("  %5.3f  below floor (operator #%zu, line %zu, does not fit)\n",
                                ratio, r.first_over, r.first_over_line);
                else if (!r.solved)
                    std::printf("  %5.3f  LP not solved in %.0f s\n", ratio, time_limit);
                else
                    std::printf(
                        "  %5.3f  slowdown >= %.4f  (%zu gaps, %zu with a dead input; "
                        "%s relaxation; %.2f s)\n",
                        ratio, r.slowdown(), r.gaps, r.dead_input_gaps,
                        r.by_dead_inputs ? "dead-input" : "plain", r.seconds);
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "dtr-log-bound: %s\n", e.what());
            return 1;
        }
    }

    if (!json.empty()) {
        std::ofstream out(json);
        if (!out) {
            std::fprintf(stderr, "dtr-log-bound: cannot write %s\n", json.c_str());
            return 1;
        }
        out << "[\n";
        for (std::size_t i = 0; i < cells.size(); ++i) {
            const cell& c = cells[i];
            const dtr::replay::lower_bound_result& r = c.bound;
            out << "  {\"log\": \""
                << dtr::json::escape(std::filesystem::path(logs[c.log]).filename().string())
                << "\", \"ratio\": " << c.ratio << ", \"budget_bytes\": " << r.budget
                << ", \"baseline_peak_bytes\": " << baselines[c.log].peak
                << ", \"baseline_compute_ns\": " << static_cast<std::uint64_t>(r.compute)
                << ", \"floor_bytes\": " << floors[c.log]
                << ", \"feasible\": " << (r.feasible ? "true" : "false")
                << ", \"solved\": " << (r.solved ? "true" : "false");
            if (r.feasible && r.solved)
                out << ", \"slowdown_bound\": " << r.slowdown()
                    << ", \"recompute_bound_ns\": " << static_cast<std::uint64_t>(r.recompute);
            if (!r.feasible) out << ", \"first_over_line\": " << r.first_over_line;
            out << ", \"gaps\": " << r.gaps << ", \"dead_input_gaps\": " << r.dead_input_gaps
                << ", \"by_dead_inputs\": " << (r.by_dead_inputs ? "true" : "false")
                << ", \"seconds\": " << r.seconds << "}" << (i + 1 < cells.size() ? "," : "")
                << "\n";
        }
        out << "]\n";
    }
    return 0;
}
