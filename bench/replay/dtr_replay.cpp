// SPDX-License-Identifier: Apache-2.0
// dtr-replay: replays DTR operator logs through dtr::runtime<sim_backend, H> under budgets,
// for several heuristics and budget ratios, and reports slowdowns as the DTR paper's
// simulator does (budget = ratio x peak memory of an unlimited run).
//
//   dtr-replay [--heuristic NAME]... [--ratio R]... [--dealloc eager|banish|keep|keep-once-bound]
//              [--kept first|scored] [--search S] [--thrash-limit X] [--seed N] [--jobs N]
//              [--json FILE] [--why] [--restore-pins hold|yield|planned] LOG...
//
// Heuristics and search strategies are the library's (dtr::heuristics::with_heuristic,
// dtr::search::with_strategy). Without --heuristic, the paper's policies run (dtr, dtr_eqclass,
// dtr_local, msps, lru, largest, random). Randomized policies (random, --search sampled) use
// their fixed default seeds unless --seed is given: every replay of a cell starts from the
// same seed, so results do not depend on --jobs. --why prints, after the table, where every
// oom or thrash cell stopped (the record of the log, or after the log while its outputs were
// made resident, with the slowdown when its last record had run) and the out_of_memory
// message of every oom cell (what was asked, resident, pinned); --json always carries the
// message as "error", the place as "records_done" of "records_total", and
// "slowdown_at_log_end" once the log has run to its end.
//
// --arena replays on a simulated region of exactly the budget, laid out by dtr::arena with
// 256-byte alignment (sim_backend::with_arena), as device memory would be, instead of the
// endless address space: allocations can then be refused for want of a contiguous block.
// --fragmentation window|one_by_one (default window) chooses what the runtime evicts then:
// the cheapest window of adjacent blocks, or victims in heuristic order until a block
// appears (the behaviour before fragmentation-aware eviction); --placement
// best_fit|constants_high where the region puts constants. The JSON then also carries the
// refusals, the allocations refused at first, the window evictions and the region's peak.
// --arena-capacity F makes the region F times the budget (the runtime's budget unchanged): the
// smallest F at which a run finishes is the memory its budget needs reserved.
//
// --offload auto|always gives the simulated device a host tier (runtime_options::offload):
// victims may be copied out instead of dropped, and constants may leave when nothing else can.
// Transfers cost --offload-latency ns + bytes / --offload-bandwidth (bytes per second; the
// logs' costs are nanoseconds) on one copy stream that overlaps compute (--no-overlap: the
// clock waits for every transfer); --offload-capacity caps the tier's bytes; --prefetch N hints
// the offloaded inputs of the next N records after each operator (the program's hints read off
// the log); --prefetch-ahead N has the runtime prefetch what the next N calls of the step it has
// recorded read (runtime_options::prefetch_ahead: no hints, from the second of --steps N);
// --offload-ahead N copies storages that outlived N newer ones out while the copy stream is
// idle; --copy-back-charge X charges a storage with a host copy X times its copy-back against
// recomputing it (runtime_options::copy_back_charge; 0.5 suits --prefetch). The slowdown then
// counts the clock's waits for transfers, and the JSON carries the offload counters.
//
// --steps N replays each log's step N times in a row, as a training loop would (constants
// kept, each step's outputs made resident and then dropped; replay_options::steps), calling
// runtime::begin_step() before each step unless --no-step-marks (the runtime then finds the
// repetition itself); --no-step-learning turns the runtime's step learning off
// (step_learning::off). --thrash-limit then holds each step to X times the baseline alone,
// except the first, which learns the step, held to --first-step-thrash-limit (default the
// same). A cell is the steady-state slowdown, steps 2 to N over as many baseline steps; the
// JSON adds every step's slowdown ("step_slowdowns"), the steady one and the step counters
// (forecast calls, divergences, steps learned). A log that records several training steps
// itself (ANNOTATE STEP between them: bench/trace/dtr_trace.py --steps N) is read the same
// way without --steps: its steps are marked where the log has them, each is held to its own
// logged compute, and its cells are the steady state of its steps 2 and later.
#include "heuristic_registry.hpp"

#include <dtr_tools/cli.hpp>
#include <dtr_tools/json_escape.hpp>
#include <dtr_tools/replay/baseline.hpp>
#include <dtr_tools/replay/replay.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct task {
    std::size_t log;
    std::string heuristic;
    double ratio;
    dtr::replay::replay_result result;
};

//! A bad combination of arguments found after parsing: named as CLI11 names parse errors.
[[noreturn]] void bad_argument(const std::string& problem) {
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", problem.c_str());
    std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> heuristics, logs;
    std::vector<double> ratios;
    std::string json, search = "exhaustive";
    dtr::dealloc_policy dealloc = dtr::dealloc_policy::eager_evict;
    // The simulator's pinning by default, so that results compare with its own.
    dtr::restore_pins restore = dtr::restore_pins::hold;
    double thrash_limit = 2.0;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
    std::optional<std::uint64_t> seed;
    bool why = false;
    // Arena replays (--arena): the region's alignment, and what to evict on a refusal.
    std::size_t arena_alignment = 0;
    dtr::fragmentation_policy fragmentation = dtr::fragmentation_policy::window;
    dtr::placement_policy placement = dtr::placement_policy::best_fit;
    std::string dealloc_name = "eager", kept_name = "first", restore_name = "hold",
                fragmentation_name = "window", placement_name = "best_fit";
    bool arena = false;
    double arena_capacity = 0; // the region as a multiple of the budget; 0: the budget
    // Offload (--offload): the simulated host tier.
    std::string offload_name = "off";
    dtr::host_tier_options tier{.transfer = {.bandwidth = 25e9, .latency = 5000}};
    bool no_overlap = false;
    double tier_capacity = 0; // bytes; 0: unlimited
    std::size_t prefetch = 0;
    std::size_t steps = 1;
    double first_step_thrash_limit = 0;
    bool no_step_marks = false, no_step_learning = false;
    CLI::App app{
        "dtr-replay: DTR operator logs replayed on dtr::runtime<sim_backend, H> under budgets"};
    app.add_option("logs", logs, "DTR operator logs")->required()->check(CLI::ExistingFile);
    app.add_option("--heuristic", heuristics,
                   "a policy (repeat the flag; default: the paper's seven)\n" +
                       ("heuristics: " + dtr_bench::heuristic_names()))
        ->allow_extra_args(false); // one value per flag: the logs that follow stay logs
    app.add_option("--ratio", ratios,
                   "a budget ratio of the unlimited peak (repeat; default the paper's nine)")
        ->check(dtr::tools::positive_real)
        ->allow_extra_args(false);
    app.add_option("--json", json, "write every cell as JSON to FILE");
    app.add_option("--search", search, "search strategy: " + dtr_bench::search_names())
        ->capture_default_str();
    app.add_option("--thrash-limit", thrash_limit,
                   "stop a replay whose compute exceeds X times the baseline")
        ->check(dtr::tools::non_negative_real)
        ->capture_default_str();
    app.add_option("--seed", seed, "seed of the randomized policies and searches");
    app.add_option("--jobs", jobs, "replays in parallel")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_flag("--why", why,
                 "print where every oom or thrash cell stopped, and every out_of_memory message");
    app.add_option("--dealloc", dealloc_name, "release policy")
        ->check(CLI::IsMember({"eager", "banish", "keep", "keep-once-bound"}))
        ->capture_default_str();
    app.add_option("--kept", kept_name,
                   "under --dealloc keep and keep-once-bound: kept storages go first, or compete "
                   "on their scores")
        ->check(CLI::IsMember({"first", "scored"}))
        ->capture_default_str();
    app.add_option("--restore-pins", restore_name, "pins while restoring inputs")
        ->check(CLI::IsMember({"hold", "yield", "planned"}))
        ->capture_default_str();
    app.add_flag("--arena", arena, "replay on a simulated region of exactly the budget");
    app.add_option("--arena-capacity", arena_capacity,
                   "the region as a multiple of the budget, which stays the runtime's (with "
                   "--arena; default 1)")
        ->check(CLI::Range(1.0, 1e6));
    app.add_option("--fragmentation", fragmentation_name,
                   "what to evict when the arena refuses (with --arena)")
        ->check(CLI::IsMember({"window", "one_by_one"}))
        ->capture_default_str();
    app.add_option("--placement", placement_name, "where the arena puts constants (with --arena)")
        ->check(CLI::IsMember({"best_fit", "constants_high"}))
        ->capture_default_str();
    app.add_option("--offload", offload_name,
                   "copy victims to a simulated host tier instead of dropping them")
        ->check(CLI::IsMember({"off", "auto", "always"}))
        ->capture_default_str();
    app.add_option("--offload-bandwidth", tier.transfer.bandwidth,
                   "host tier transfers: bytes per second")
        ->check(dtr::tools::positive_real)
        ->capture_default_str();
    app.add_option("--offload-latency", tier.transfer.latency,
                   "host tier transfers: ns added to each")
        ->check(dtr::tools::non_negative_real)
        ->capture_default_str();
    app.add_option("--offload-capacity", tier_capacity, "host tier bytes (default: unlimited)")
        ->check(dtr::tools::non_negative_real);
    app.add_flag("--no-overlap", no_overlap, "the clock waits for every transfer (no copy stream)");
    app.add_option("--prefetch", prefetch,
                   "after each operator, prefetch the offloaded inputs of the next N records")
        ->capture_default_str();
    std::uint32_t prefetch_ahead = 0;
    app.add_option("--prefetch-ahead", prefetch_ahead,
                   "with --offload: the runtime prefetches, after each call, the offloaded "
                   "storages the next N calls of its recorded step read (from the second of "
                   "--steps; 0: never)")
        ->capture_default_str();
    std::uint32_t offload_ahead = 0;
    app.add_option("--offload-ahead", offload_ahead,
                   "with --offload: copy storages that outlived N newer ones out ahead of "
                   "eviction while the copy stream is idle (0: never)")
        ->capture_default_str();
    double copy_back_charge = 1.0;
    app.add_option("--copy-back-charge", copy_back_charge,
                   "with --offload auto: the share of a copy-back charged against recomputing "
                   "a storage that has a host copy (1: in full; 0.5 suits --prefetch)")
        ->check(dtr::tools::positive_real)
        ->capture_default_str();
    app.add_option("--steps", steps,
                   "replay each log's step N times in a row (constants kept); cells are then the "
                   "slowdown of steps 2 to N")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--first-step-thrash-limit", first_step_thrash_limit,
                   "with --steps: the first step's limit (it learns the step); the others are "
                   "held to --thrash-limit each (default: --thrash-limit)")
        ->check(dtr::tools::non_negative_real);
    app.add_flag("--no-step-marks", no_step_marks,
                 "with --steps: do not call runtime::begin_step(); the runtime finds the "
                 "repetition itself");
    app.add_flag("--no-step-learning", no_step_learning,
                 "the runtime learns no step (runtime_options::steps = off)");
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;
    const dtr::offload_policy offload = offload_name == "auto"     ? dtr::offload_policy::automatic
                                        : offload_name == "always" ? dtr::offload_policy::always
                                                                   : dtr::offload_policy::off;
    tier.overlap = !no_overlap;
    if (tier_capacity > 0) tier.capacity = static_cast<std::size_t>(tier_capacity);
    if (arena) arena_alignment = dtr::arena::default_alignment;
    if (dealloc_name == "banish") dealloc = dtr::dealloc_policy::banish;
    if (dealloc_name == "keep") dealloc = dtr::dealloc_policy::keep_resident;
    if (dealloc_name == "keep-once-bound") dealloc = dtr::dealloc_policy::keep_once_bound;
    const dtr::kept_priority kept =
        kept_name == "scored" ? dtr::kept_priority::scored : dtr::kept_priority::first;
    if (restore_name == "yield") restore = dtr::restore_pins::yield_when_full;
    if (restore_name == "planned") restore = dtr::restore_pins::planned;
    if (fragmentation_name == "one_by_one") fragmentation = dtr::fragmentation_policy::one_by_one;
    if (placement_name == "constants_high") placement = dtr::placement_policy::constants_high;
    if (heuristics.empty()) heuristics = dtr_bench::all_heuristics();
    if (ratios.empty()) ratios = {0.9, 0.7, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1};
    if (!dtr_bench::known_search(search))
        bad_argument("--search: unknown search strategy '" + search + "' (" +
                     dtr_bench::search_names() + ")");
    for (const auto& h : heuristics) {
        if (!dtr_bench::known_heuristic(h))
            bad_argument("--heuristic: unknown heuristic '" + h + "'");
        if (!dtr_bench::supported(h, search))
            bad_argument(
                "--heuristic: '" + h + "' cannot run under --search " + search +
                (search == "indexed"
                     ? " (indexed needs a score-skeleton policy: dtr, dtr_eqclass, dtr_local, "
                       "msps, ablation-*; or dtr_next_use)"
                     : " (it chooses its own victims)"));
    }
    if (jobs == 0) jobs = 1;

    const auto start = std::chrono::steady_clock::now();
    // Read every log once; a malformed one stops everything with file, line and problem.
    std::vector<dtr::replay::trace> traces;
    try {
        for (const auto& path : logs) traces.push_back(dtr::replay::load_trace(path));
    } catch (const dtr::parse_error& e) {
        std::fprintf(stderr, "dtr-replay: %s\n", e.what());
        return 1;
    }
    for (const auto& t : traces)
        if (steps > 1 && t.logged_steps() > 1)
            bad_argument("--steps " + std::to_string(steps) + ": " + t.source + " records " +
                         std::to_string(t.logged_steps()) +
                         " training steps itself (ANNOTATE STEP) and replays once; leave "
                         "--steps out for it");
    // The steps of a log's runs: its step repeated (--steps), or the steps it records.
    auto steps_of = [&](std::size_t log) { return steps > 1 ? steps : traces[log].logged_steps(); };
    // Baselines: an unlimited run of each log (dtr_tools/replay/baseline.hpp).
    std::vector<dtr::replay::baseline> baselines(traces.size());
    for (std::size_t l = 0; l < traces.size(); ++l) {
        baselines[l] = dtr::replay::unlimited_baseline(traces[l]);
        if (!baselines[l].error.empty()) {
            std::fprintf(stderr, "dtr-replay: %s: the unlimited run failed: %s\n", logs[l].c_str(),
                         baselines[l].error.c_str());
            return 1;
        }
    }

    std::vector<task> tasks;
    for (std::size_t l = 0; l < traces.size(); ++l)
        for (const auto& h : heuristics)
            for (double ratio : ratios) tasks.push_back({l, h, ratio, {}});
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < tasks.size();) {
            task& t = tasks[i];
            const dtr::replay::baseline& b = baselines[t.log];
            dtr::replay::replay_options options;
            options.budget = static_cast<std::size_t>(t.ratio * static_cast<double>(b.peak));
            options.dealloc = dealloc;
            options.kept = kept;
            options.restore = restore;
            options.thrash_limit = thrash_limit;
            options.baseline_compute = b.compute;
            options.arena_alignment = arena_alignment;
            if (arena_capacity > 0)
                options.arena_capacity =
                    static_cast<std::size_t>(arena_capacity * static_cast<double>(options.budget));
            options.fragmentation = fragmentation;
            options.placement = placement;
            options.offload = offload;
            options.tier = tier;
            options.prefetch_lookahead = prefetch;
            options.offload_ahead = offload != dtr::offload_policy::off ? offload_ahead : 0;
            options.prefetch_ahead = offload != dtr::offload_policy::off ? prefetch_ahead : 0;
            options.copy_back_charge = copy_back_charge;
            options.steps = steps;
            dtr::replay::constants_as_logged(traces[t.log], options);
            options.first_step_thrash_limit = first_step_thrash_limit;
            options.mark_steps = !no_step_marks;
            options.learning =
                no_step_learning ? dtr::step_learning::off : dtr::step_learning::automatic;
            t.result = dtr_bench::replay_with(t.heuristic, search, traces[t.log], options, seed);
        }
    };
    std::vector<std::thread> pool;
    for (unsigned j = 1; j < std::min<std::size_t>(jobs, tasks.size()); ++j)
        pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Table: one row per log and heuristic, one column per ratio.
    for (std::size_t l = 0; l < traces.size(); ++l) {
        const std::string name = std::filesystem::path(logs[l]).filename().string();
        std::printf("\n%s: baseline peak %.1f MB, baseline compute %.2f ms\n", name.c_str(),
                    static_cast<double>(baselines[l].peak) / 1e6, baselines[l].compute / 1e6);
        std::printf("%-14s", "heuristic");
        for (double r : ratios) std::printf(" %7.2f", r);
        std::printf("\n");
        for (const auto& h : heuristics) {
            std::printf("%-14s", h.c_str());
            for (double r : ratios)
                for (const task& t : tasks)
                    if (t.log == l && t.heuristic == h && t.ratio == r) {
                        if (t.result.status == dtr::replay::status::ok)
                            std::printf(" %7.4f", t.result.steady_slowdown(baselines[l].compute,
                                                                           steps_of(l)));
                        else
                            std::printf(" %7s", dtr::replay::to_string(t.result.status));
                    }
            std::printf("\n");
        }
    }
    if (why)
        for (const task& t : tasks) {
            const auto& r = t.result;
            if (r.status == dtr::replay::status::ok) continue;
            std::printf(
                "\n%s %s %.2f: ", std::filesystem::path(logs[t.log]).filename().string().c_str(),
                t.heuristic.c_str(), t.ratio);
            // Where it stopped: inside the log, or making the outputs resident after its end.
            if (r.records_done < r.records_total)
                std::printf("%s at record %zu of %zu", dtr::replay::to_string(r.status),
                            r.records_done, r.records_total);
            else
                std::printf(
                    "%s making the outputs resident after the log's %zu records (%.4fx "
                    "when they had run)",
                    dtr::replay::to_string(r.status), r.records_total,
                    r.spent_at_log_end / baselines[t.log].compute);
            std::printf("%s%s\n", r.error.empty() ? "" : ": ", r.error.c_str());
        }
    std::printf("\n%zu replays of %zu logs in %.2f s wall (%u jobs, search %s)\n", tasks.size(),
                traces.size(), wall_s, jobs, search.c_str());

    if (!json.empty()) {
        std::ofstream out(json);
        if (!out) {
            std::fprintf(stderr, "dtr-replay: cannot write %s\n", json.c_str());
            return 1;
        }
        out << "[\n";
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            const task& t = tasks[i];
            const dtr::replay::baseline& b = baselines[t.log];
            const auto& r = t.result;
            char slowdown[64];
            std::snprintf(slowdown, sizeof slowdown, "%.6f", r.slowdown(b.compute));
            out << "  {\"log\": \""
                << dtr::json::escape(std::filesystem::path(logs[t.log]).filename().string())
                << "\", \"heuristic\": \"" << t.heuristic << "\", \"search\": \"" << search
                << "\", \"ratio\": " << t.ratio << ", \"budget_bytes\": " << r.budget
                << ", \"status\": \"" << dtr::replay::to_string(r.status)
                << "\", \"slowdown\": " << slowdown
                << ", \"baseline_compute_ns\": " << static_cast<std::uint64_t>(b.compute)
                << ", \"baseline_peak_bytes\": " << b.peak
                << ", \"peak_bytes\": " << r.peak_resident
                << ", \"evictions\": " << r.stats.evictions
                << ", \"eager_evictions\": " << r.stats.eager_evictions
                << ", \"remats\": " << r.stats.rematerializations
                << ", \"remat_cost_ns\": " << static_cast<std::uint64_t>(r.remat)
                << ", \"heuristic_evals\": " << r.stats.heuristic_evaluations
                << ", \"metadata_accesses\": " << r.stats.metadata_accesses
                << ", \"search_ns\": " << r.stats.victim_search_ns << ", \"wall_ms\": " << r.wall_ms
                << ", \"records_done\": " << r.records_done
                << ", \"records_total\": " << r.records_total;
            if (r.spent_at_log_end > 0)
                out << ", \"slowdown_at_log_end\": " << r.spent_at_log_end / b.compute;
            if (steps_of(t.log) > 1) {
                char steady[64];
                std::snprintf(steady, sizeof steady, "%.6f",
                              r.steady_slowdown(b.compute, steps_of(t.log)));
                out << ", \"steps\": " << steps_of(t.log)
                    << ", \"logged_steps\": " << (r.logged_steps ? "true" : "false")
                    << ", \"promotions\": " << r.promotions << ", \"steps_done\": " << r.steps_done
                    << ", \"step_marks\": " << (no_step_marks ? "false" : "true")
                    << ", \"first_step_thrash_limit\": "
                    << (first_step_thrash_limit > 0 ? first_step_thrash_limit : thrash_limit)
                    << ", \"steady_slowdown\": " << steady << ", \"step_slowdowns\": [";
                for (std::size_t k = 0; k < r.step_spent.size(); ++k) {
                    char v[64];
                    std::snprintf(v, sizeof v, "%.6f", r.step_slowdown(k, b.compute));
                    out << (k ? ", " : "") << v;
                }
                out << "]";
            }
            out << ", \"forecast_calls\": " << r.stats.forecast_calls
                << ", \"forecast_withheld\": " << r.stats.forecast_withheld
                << ", \"step_divergences\": " << r.stats.step_divergences
                << ", \"steps_learned\": " << r.stats.steps_learned;
            if (arena_alignment != 0)
                out << ", \"arena_alignment\": " << arena_alignment << ", \"fragmentation\": \""
                    << (fragmentation == dtr::fragmentation_policy::window ? "window"
                                                                           : "one_by_one")
                    << "\", \"placement\": \""
                    << (placement == dtr::placement_policy::best_fit ? "best_fit"
                                                                     : "constants_high")
                    << "\", \"backend_refusals\": " << r.backend_refusals
                    << ", \"fragmented_allocations\": " << r.stats.fragmented_allocations
                    << ", \"window_evictions\": " << r.stats.window_evictions
                    << ", \"allocation_retries\": " << r.stats.allocation_retries
                    << ", \"region_peak_bytes\": " << r.region_peak
                    << ", \"region_over_budget\": " << (arena_capacity > 0 ? arena_capacity : 1.0);
            if (restore != dtr::restore_pins::hold)
                out << ", \"restore_pins\": \"" << restore_name << "\"";
            if (dealloc == dtr::dealloc_policy::keep_resident ||
                dealloc == dtr::dealloc_policy::keep_once_bound)
                out << ", \"dealloc\": \"" << dealloc_name << "\", \"kept\": \"" << kept_name
                    << "\"";
            if (offload != dtr::offload_policy::off)
                out << ", \"offload\": \"" << offload_name
                    << "\", \"offload_bandwidth\": " << tier.transfer.bandwidth
                    << ", \"offload_latency_ns\": " << tier.transfer.latency
                    << ", \"overlap\": " << (tier.overlap ? "true" : "false")
                    << ", \"prefetch_lookahead\": " << prefetch
                    << ", \"offload_ahead\": " << offload_ahead
                    << ", \"prefetch_ahead\": " << prefetch_ahead
                    << ", \"copy_back_charge\": " << copy_back_charge
                    << ", \"copies_ahead\": " << r.stats.copies_ahead
                    << ", \"offloads\": " << r.stats.offloads
                    << ", \"offloads_clean\": " << r.stats.offloads_clean
                    << ", \"constant_offloads\": " << r.stats.constant_offloads
                    << ", \"copy_backs\": " << r.stats.copy_backs
                    << ", \"prefetches\": " << r.stats.prefetches
                    << ", \"forecast_prefetches\": " << r.stats.forecast_prefetches
                    << ", \"forecast_recompute_prefetches\": "
                    << r.stats.forecast_recompute_prefetches
                    << ", \"bytes_offloaded\": " << r.stats.bytes_offloaded
                    << ", \"bytes_copied_back\": " << r.stats.bytes_copied_back
                    << ", \"peak_host_bytes\": " << r.stats.peak_host_bytes
                    << ", \"transfer_cost_ns\": "
                    << static_cast<std::uint64_t>(r.stats.transfer_cost)
                    << ", \"transfer_stall_ns\": "
                    << static_cast<std::uint64_t>(r.stats.transfer_stall)
                    << ", \"copy_back_stall_ns\": "
                    << static_cast<std::uint64_t>(r.stats.copy_back_stall)
                    << ", \"block_reuse_stall_ns\": "
                    << static_cast<std::uint64_t>(r.stats.block_reuse_stall);
            if (!r.error.empty()) out << ", \"error\": \"" << dtr::json::escape(r.error) << "\"";
            out << "}" << (i + 1 < tasks.size() ? "," : "") << "\n";
        }
        out << "]\n";
    }
    return 0;
}
