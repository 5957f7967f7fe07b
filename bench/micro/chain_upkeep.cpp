// SPDX-License-Identifier: Apache-2.0
// The upkeep of a policy on a long evicted chain: the scenario of the runtime test "a chain of
// a million evicted storages rematerializes without recursion" (tests/test_runtime.cpp), timed
// for each policy and chain length. x_i = f(x_{i-1}) for i = 1..N under a budget of eight
// storages, every x_i released at once (eager eviction keeps it as evicted metadata), then
// x_N evicted and restored, which recomputes the whole chain. Prints the wall time of the
// build and of the restore, and the metadata accesses per rematerialization: a policy with
// bounded upkeep stays flat in N, one that walks the evicted neighbourhood grows linearly.
//
// usage: chain_upkeep [--lengths 1000,10000,100000,1000000]
//                     [--heuristics dtr_eqclass,indexed:dtr_next_use (the default),
//                                   dtr_held_bounded,dtr_held,dtr_next_use,
//                                   indexed:dtr_eqclass_held_next_use]
//                     [--max-held N]
//                     [--walk-limits 256] (K of dtr_held_bounded; 0 in the JSON for the others)
//                     [--json FILE]
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_eqclass_held.hpp>
#include <dtr/heuristic/dtr_held.hpp>
#include <dtr/heuristic/dtr_held_bounded.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/cli.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct outcome {
    double build_s = 0, restore_s = 0;
    std::uint64_t remats = 0, accesses = 0;
};

template <class H>
outcome run(std::size_t n, H policy) {
    using clock = std::chrono::steady_clock;
    dtr::runtime<dtr::sim_backend, H> rt({.budget = 64}, dtr::sim_backend{}, std::move(policy));
    auto op = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 8); };
    outcome o;
    const auto t0 = clock::now();
    dtr::tensor last = rt.constant(8);
    for (std::size_t i = 0; i < n; ++i) last = rt.call(op, {last}, {.cost = 1});
    const auto t1 = clock::now();
    rt.evict(last);
    const auto remats = rt.stats().rematerializations;
    const auto accesses = rt.stats().metadata_accesses;
    { auto guard = rt.pin(last); }
    const auto t2 = clock::now();
    o.build_s = std::chrono::duration<double>(t1 - t0).count();
    o.restore_s = std::chrono::duration<double>(t2 - t1).count();
    o.remats = rt.stats().rematerializations - remats;
    o.accesses = rt.stats().metadata_accesses - accesses;
    return o;
}

// The policies the comparison is about, not every named one: each instantiates a runtime,
// and this program should build in seconds. The runtime's default is one of them.
template <class F>
bool with_policy(std::string_view name, F&& f) {
    namespace h = dtr::heuristics;
    if (name == h::dtr_eqclass::name) return f(std::type_identity<h::dtr_eqclass>{}), true;
    if (name == h::dtr_held_bounded::name)
        return f(std::type_identity<h::dtr_held_bounded>{}), true;
    if (name == h::dtr_held::name) return f(std::type_identity<h::dtr_held>{}), true;
    if (name == h::dtr_next_use::name) return f(std::type_identity<h::dtr_next_use>{}), true;
    using default_policy = dtr::default_heuristic;
    if (name == default_policy::name) return f(std::type_identity<default_policy>{}), true;
    using held_default = dtr::search::indexed<h::dtr_eqclass_held_next_use>;
    if (name == held_default::name) return f(std::type_identity<held_default>{}), true;
    return false;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> lengths{1000, 10000, 100000, 1000000};
    std::vector<std::string> policies{"dtr_eqclass", "indexed:dtr_next_use", "dtr_held_bounded",
                                      "dtr_held"};
    std::size_t max_held = 10000;
    std::vector<std::size_t> walk_limits{dtr::heuristics::dtr_held_bounded::default_walk_limit};
    std::string json;
    CLI::App app{"chain_upkeep: restoring an evicted chain of N storages, per policy"};
    app.add_option("--lengths", lengths, "chain lengths N (comma list or repeated)")
        ->delimiter(',')
        ->check(dtr::tools::positive);
    app.add_option("--heuristics", policies, "policies by name (comma list or repeated)")
        ->delimiter(',');
    app.add_option("--max-held", max_held,
                   "longest chain to give dtr_held (quadratic here: 10^5 takes minutes)")
        ->capture_default_str();
    app.add_option("--walk-limits", walk_limits, "K of dtr_held_bounded (comma list or repeated)")
        ->delimiter(',')
        ->check(dtr::tools::positive);
    app.add_option("--json", json, "write the results as JSON to FILE");
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;
    std::string rows;
    std::printf("%-22s %6s %9s %10s %10s %14s\n", "policy", "K", "N", "build s", "restore s",
                "accesses/remat");
    for (const std::string& name : policies) {
        const bool known = with_policy(name, [&]<class H>(std::type_identity<H>) {
            constexpr bool bounded = std::is_same_v<H, dtr::heuristics::dtr_held_bounded>;
            const std::vector<std::size_t> ks = bounded ? walk_limits : std::vector<std::size_t>{0};
            for (std::size_t k : ks) {
                for (std::size_t n : lengths) {
                    if (name == "dtr_held" && n > max_held) continue;
                    H policy{};
                    if constexpr (bounded) policy = H(k);
                    const outcome o = run<H>(n, std::move(policy));
                    const double per =
                        o.remats ? static_cast<double>(o.accesses) / static_cast<double>(o.remats)
                                 : 0.0;
                    std::printf("%-22s %6s %9zu %10.3f %10.3f %14.1f\n", H::name,
                                bounded ? std::to_string(k).c_str() : "-", n, o.build_s,
                                o.restore_s, per);
                    std::fflush(stdout);
                    char line[320];
                    std::snprintf(line, sizeof line,
                                  "%s  {\"heuristic\": \"%s\", \"walk_limit\": %zu, \"n\": %zu, "
                                  "\"build_s\": %.4f, \"restore_s\": %.4f, \"remats\": %llu, "
                                  "\"accesses\": %llu}",
                                  rows.empty() ? "" : ",\n", H::name, k, n, o.build_s, o.restore_s,
                                  static_cast<unsigned long long>(o.remats),
                                  static_cast<unsigned long long>(o.accesses));
                    rows += line;
                }
            }
        });
        if (!known) {
            std::fprintf(stderr, "chain_upkeep: --heuristics: unknown heuristic %s\n",
                         name.c_str());
            return 2;
        }
    }
    if (!json.empty()) {
        std::ofstream out(json);
        out << "[\n" << rows << "\n]\n";
        if (!out) {
            std::fprintf(stderr, "chain_upkeep: --json: cannot write %s\n", json.c_str());
            return 1;
        }
    }
    return 0;
}
