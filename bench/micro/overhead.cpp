// SPDX-License-Identifier: Apache-2.0
// Per-operator overhead of dtr::runtime::call on the host backend, for a trivial operator
// (a 64-byte copy), excluding the operator body:
//
//   independent   y = call(op, x); drop y              (allocate, record, free: no eviction)
//   training      chains of 1000 calls whose outputs stay alive, then released together
//   train@25%     the same under a budget of 25% of what the outputs need (evicts every call)
//
// The step tracker (runtime_options::steps) is on, as by default, unless the heuristic column
// says "steps off": the rows of dtr_eqclass with and without it price the recording and the
// forecast per call (a chain's calls repeat, so the runtime follows them as a step).
//
// Each scenario runs `--reps` times over `--calls` calls; the table shows the median ns per
// call, the median ns of the bare operator body, and their difference (the runtime's share).
//
//   overhead [--calls N] [--reps R] [--csv FILE] [--json FILE]
#include <dtr/heuristic/dtr_held.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/cli.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t bytes = 64;

struct copy64 {
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto in = ctx.input(0);
        auto out = ctx.output(0, bytes);
        std::memcpy(out.data(), in.data(), bytes);
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

template <class F>
double time_per_call(std::size_t calls, F&& body) {
    const auto start = clock_type::now();
    body();
    return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() /
           static_cast<double>(calls);
}

// The bare operator body, through the same op_context machinery a call uses would be
// unfair to measure; a plain memcpy of the same bytes is what the operator does.
double body_ns(std::size_t calls) {
    std::vector<std::byte> in(bytes, std::byte{1}), out(bytes);
    return time_per_call(calls, [&] {
        for (std::size_t i = 0; i < calls; ++i) {
            std::memcpy(out.data(), in.data(), bytes);
            in[i % bytes] = out[(i * 7) % bytes]; // keep the copy observable
        }
    });
}

template <class Heuristic>
double independent(std::size_t calls, dtr::call_options opts,
                   dtr::step_learning learning = dtr::step_learning::automatic) {
    dtr::runtime<dtr::host_backend, Heuristic> rt({.steps = learning});
    dtr::tensor x = rt.constant(bytes, [](auto b) { std::memset(b.data(), 1, bytes); });
    return time_per_call(calls, [&] {
        for (std::size_t i = 0; i < calls; ++i) dtr::tensor y = rt.call(copy64{}, {x}, opts);
    });
}

// Training-like: iterations of `length` chained calls whose outputs all stay alive (the
// activations a backward pass would read), then released together. The release cascade is
// part of the timed work. budget_fraction 1: no eviction; 0.25: a quarter of what they need.
template <class Heuristic>
double training(std::size_t calls, std::size_t length, double budget_fraction,
                dtr::call_options opts, std::uint64_t* evictions = nullptr,
                dtr::step_learning learning = dtr::step_learning::automatic) {
    const auto need = static_cast<double>((length + 1) * bytes);
    const std::size_t budget =
        budget_fraction >= 1 ? dtr::unlimited : static_cast<std::size_t>(need * budget_fraction);
    dtr::runtime<dtr::host_backend, Heuristic> rt({.budget = budget, .steps = learning});
    dtr::tensor x = rt.constant(bytes, [](auto b) { std::memset(b.data(), 1, bytes); });
    std::vector<dtr::tensor> live;
    live.reserve(length);
    const double ns = time_per_call(calls, [&] {
        for (std::size_t done = 0; done < calls;) {
            live.push_back(rt.call(copy64{}, {x}, opts));
            for (std::size_t i = 1; i < length && done + i < calls; ++i)
                live.push_back(rt.call(copy64{}, {live.back()}, opts));
            done += live.size();
            live.clear();
        }
    });
    if (evictions != nullptr) *evictions = rt.stats().evictions;
    return ns;
}

struct row {
    std::string scenario, heuristic, cost;
    double call_ns, body_ns;
};

} // namespace

int main(int argc, char** argv) {
    std::size_t calls = 200000, reps = 9;
    std::string csv, json;
    CLI::App app{"overhead: per-call overhead of dtr::runtime::call on the host backend"};
    app.add_option("--calls", calls, "calls per run")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--reps", reps, "runs per scenario; the median is reported")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--csv", csv, "write the results as CSV to FILE");
    app.add_option("--json", json, "write the results as JSON to FILE");
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;
    const dtr::call_options supplied{.cost = 1.0};
    const dtr::call_options measured{};
    std::vector<row> rows;
    auto measure = [&](const char* scenario, const char* heuristic, const char* cost, auto&& run) {
        std::vector<double> call_samples, body_samples;
        for (std::size_t r = 0; r < reps; ++r) {
            call_samples.push_back(run());
            body_samples.push_back(body_ns(calls));
        }
        rows.push_back({scenario, heuristic, cost, median(call_samples), median(body_samples)});
        const row& x = rows.back();
        std::printf("%-12s %-18s %-9s %10.1f %10.1f %10.1f\n", scenario, heuristic, cost, x.call_ns,
                    x.body_ns, x.call_ns - x.body_ns);
        std::fflush(stdout);
    };
    std::printf(
        "dtr::runtime::call overhead, 64-byte operator, %zu calls x %zu runs (median ns per "
        "call)\n",
        calls, reps);
    std::printf("%-12s %-18s %-9s %10s %10s %10s\n", "scenario", "heuristic", "cost", "call",
                "body", "overhead");
    using dtr::heuristics::dtr_held;
    using dtr::heuristics::dtr_local;
    using dtr::heuristics::lru;
    measure("independent", "dtr_local", "supplied",
            [&] { return independent<dtr_local>(calls, supplied); });
    measure("independent", "dtr_local", "measured",
            [&] { return independent<dtr_local>(calls, measured); });
    measure("training", "dtr_local", "supplied",
            [&] { return training<dtr_local>(calls, 1000, 1.0, supplied); });
    measure("training", "dtr_local", "measured",
            [&] { return training<dtr_local>(calls, 1000, 1.0, measured); });
    std::uint64_t evictions = 0;
    measure("train@25%", "dtr_local", "supplied",
            [&] { return training<dtr_local>(calls, 1000, 0.25, supplied, &evictions); });
    measure("train@25%", "lru", "supplied",
            [&] { return training<lru>(calls, 1000, 0.25, supplied); });
    measure("training", "dtr_held", "supplied",
            [&] { return training<dtr_held>(calls, 1000, 1.0, supplied); });
    measure("train@25%", "dtr_held", "supplied",
            [&] { return training<dtr_held>(calls, 1000, 0.25, supplied); });
    measure("train@25%", "dtr_local", "measured",
            [&] { return training<dtr_local>(calls, 1000, 0.25, measured); });
    using dtr::heuristics::dtr_eqclass;
    using dtr::heuristics::dtr_next_use;
    constexpr auto off = dtr::step_learning::off;
    measure("independent", "dtr_eqclass", "supplied",
            [&] { return independent<dtr_eqclass>(calls, supplied); });
    measure("independent", "eqclass, steps off", "supplied",
            [&] { return independent<dtr_eqclass>(calls, supplied, off); });
    measure("independent", "dtr_next_use", "supplied",
            [&] { return independent<dtr_next_use>(calls, supplied); });
    measure("training", "dtr_eqclass", "supplied",
            [&] { return training<dtr_eqclass>(calls, 1000, 1.0, supplied); });
    measure("training", "eqclass, steps off", "supplied",
            [&] { return training<dtr_eqclass>(calls, 1000, 1.0, supplied, nullptr, off); });
    measure("training", "dtr_next_use", "supplied",
            [&] { return training<dtr_next_use>(calls, 1000, 1.0, supplied); });
    measure("train@25%", "dtr_eqclass", "supplied",
            [&] { return training<dtr_eqclass>(calls, 1000, 0.25, supplied); });
    measure("train@25%", "dtr_next_use", "supplied",
            [&] { return training<dtr_next_use>(calls, 1000, 0.25, supplied); });
    // The runtime's default policy, whatever it is (indexed:dtr_next_use since issue 33).
    using default_policy = dtr::default_heuristic;
    measure("independent", "default", "supplied",
            [&] { return independent<default_policy>(calls, supplied); });
    measure("training", "default", "supplied",
            [&] { return training<default_policy>(calls, 1000, 1.0, supplied); });
    measure("train@25%", "default", "supplied",
            [&] { return training<default_policy>(calls, 1000, 0.25, supplied); });
    std::printf(
        "(train@25%%: %llu evictions per %zu calls; each scans the evictable storages, ~250)\n",
        static_cast<unsigned long long>(evictions), calls);

    if (!csv.empty()) {
        std::ofstream out(csv);
        out << "scenario,heuristic,cost,call_ns,body_ns,overhead_ns\n";
        for (const row& r : rows)
            out << r.scenario << ',' << r.heuristic << ',' << r.cost << ',' << r.call_ns << ','
                << r.body_ns << ',' << r.call_ns - r.body_ns << '\n';
    }
    if (!json.empty()) {
        std::ofstream out(json);
        out << "[\n";
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const row& r = rows[i];
            out << "  {\"scenario\": \"" << r.scenario << "\", \"heuristic\": \"" << r.heuristic
                << "\", \"cost\": \"" << r.cost << "\", \"call_ns\": " << r.call_ns
                << ", \"body_ns\": " << r.body_ns << ", \"overhead_ns\": " << r.call_ns - r.body_ns
                << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
        }
        out << "]\n";
    }
    return 0;
}
