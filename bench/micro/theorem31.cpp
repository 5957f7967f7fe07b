// SPDX-License-Identifier: Apache-2.0
// Theorem 3.1 of the DTR paper, measured: an N-layer linear feed-forward network (unit sizes
// and costs), forward then backward, under a budget of c * sqrt(N) + 4, with the reduced
// heuristic (e* without staleness). Prints operator executions / N against N for each c:
// the theorem says it stays bounded.
//
// usage: theorem31 [--max N] [--c 1,2,3,4] [--heuristics ablation-estar-size-nostale,dtr,dtr_eqclass]
//                  [--dealloc banish|eager] [--json FILE]
//
// The program: x_i = f_i(x_{i-1}) for i = 1..N (x_0 a constant input), g_N = l(x_N), then
// g_{i-1} = b_i(x_{i-1}, g_i) for i = N..1; each activation is released after its backward
// step, each gradient after the next one is computed. With eager eviction the whole
// backward history stays as evicted metadata, which exact e* maintenance walks on every
// event (quadratic time, same decisions): banish (the default here) keeps runs fast.
#include <dtr/heuristic/dtr.hpp>
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/cli.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using dtr::tensor;

void unit(dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 1); }

struct outcome {
    double ops_per_layer = 0;
    bool out_of_memory = false;
};

template <class H>
outcome run(std::size_t n, std::size_t budget, dtr::dealloc_policy dealloc) {
    dtr::runtime<dtr::sim_backend, H> rt({.budget = budget, .dealloc = dealloc});
    outcome o;
    try {
        std::vector<tensor> x(n + 1);
        x[0] = rt.constant(1);
        for (std::size_t i = 1; i <= n; ++i) x[i] = rt.call(unit, {x[i - 1]}, {.cost = 1});
        tensor g = rt.call(unit, {x[n]}, {.cost = 1});
        x[n].reset();
        for (std::size_t i = n; i >= 1; --i) {
            g = rt.call(unit, {x[i - 1], g}, {.cost = 1});
            if (i > 1) x[i - 1].reset();
        }
    } catch (const dtr::out_of_memory&) {
        o.out_of_memory = true;
    }
    const auto& st = rt.stats();
    o.ops_per_layer =
        static_cast<double>(st.operators_run + st.rematerializations) / static_cast<double>(n);
    return o;
}

template <class F>
bool with_policy(std::string_view name, F&& f) {
    namespace h = dtr::heuristics;
    if (name == h::dtr_reduced::name) return f(std::type_identity<h::dtr_reduced>{}), true;
    if (name == h::dtr::name) return f(std::type_identity<h::dtr>{}), true;
    if (name == h::dtr_eqclass::name) return f(std::type_identity<h::dtr_eqclass>{}), true;
    if (name == h::dtr_local::name) return f(std::type_identity<h::dtr_local>{}), true;
    return false;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t max_n = 30000;
    std::vector<double> cs{1, 2, 3, 4};
    std::vector<std::string> policies{dtr::heuristics::dtr_reduced::name, "dtr", "dtr_eqclass"};
    dtr::dealloc_policy dealloc = dtr::dealloc_policy::banish;
    std::string dealloc_name = "banish", json;
    CLI::App app{
        "theorem31: operations / N for an N-layer linear network under budgets c sqrt(N) + 4"};
    app.add_option("--max", max_n, "largest N")->check(dtr::tools::positive)->capture_default_str();
    app.add_option("--c", cs, "budget factors c (comma list or repeated)")
        ->delimiter(',')
        ->check(dtr::tools::positive_real);
    app.add_option("--heuristics", policies, "policies (comma list or repeated)")
        ->delimiter(',')
        ->check(CLI::IsMember(std::vector<std::string>{dtr::heuristics::dtr_reduced::name, "dtr",
                                                       "dtr_eqclass", "dtr_local"}));
    app.add_option("--dealloc", dealloc_name, "release policy")
        ->check(CLI::IsMember({"banish", "eager"}))
        ->capture_default_str();
    app.add_option("--json", json, "write the results as JSON to FILE");
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;
    if (dealloc_name == "eager") dealloc = dtr::dealloc_policy::eager_evict;
    std::string rows; // JSON objects, one per (policy, N, c)
    for (const std::string& name : policies) {
        const bool known = with_policy(name, [&](auto tag) {
            using H = typename decltype(tag)::type;
            std::printf("%s, budget = c * sqrt(N) + 4, %s: operator executions / N\n", H::name,
                        dealloc == dtr::dealloc_policy::banish ? "banish" : "eager eviction");
            std::printf("%8s", "N");
            for (double c : cs) std::printf("   c=%-5g", c);
            std::printf("\n");
            std::vector<std::size_t> sizes;
            for (std::size_t decade = 100; decade <= max_n; decade *= 10)
                for (std::size_t m : {1, 2, 5})
                    if (decade * m <= max_n) sizes.push_back(decade * m);
            for (std::size_t n : sizes) {
                std::printf("%8zu", n);
                for (double c : cs) {
                    const auto budget =
                        static_cast<std::size_t>(c * std::sqrt(static_cast<double>(n))) + 4;
                    const outcome o = run<H>(n, budget, dealloc);
                    if (o.out_of_memory)
                        std::printf("   %-7s", "OOM");
                    else
                        std::printf("   %-7.3f", o.ops_per_layer);
                    char line[256];
                    std::snprintf(
                        line, sizeof line,
                        "%s  {\"heuristic\": \"%s\", \"dealloc\": \"%s\", \"n\": %zu, \"c\": %g, "
                        "\"budget\": %zu, \"status\": \"%s\", \"ops_per_layer\": %.6f}",
                        rows.empty() ? "" : ",\n", H::name, dealloc_name.c_str(), n, c, budget,
                        o.out_of_memory ? "oom" : "ok", o.ops_per_layer);
                    rows += line;
                }
                std::printf("\n");
                std::fflush(stdout);
            }
            std::printf("\n");
        });
        if (!known) {
            std::fprintf(stderr, "theorem31: --heuristics: unknown heuristic %s\n", name.c_str());
            return 2;
        }
    }
    if (!json.empty()) {
        std::ofstream out(json);
        out << "[\n" << rows << "\n]\n";
        if (!out) {
            std::fprintf(stderr, "theorem31: --json: cannot write %s\n", json.c_str());
            return 1;
        }
    }
    return 0;
}
