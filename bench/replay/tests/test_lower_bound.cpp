// SPDX-License-Identifier: Apache-2.0
// The lower bound on a log's slowdown (dtr_tools/replay/lower_bound.hpp): exact on two logs
// solved by hand (one for each relaxation), and never above what the runtime achieves, under
// several policies, on the recorded traces (bench/trace/traces) and, with $DTR_SHARED, on two
// of the paper's logs. Where the bound says no schedule exists, the runtime must fail too.
#include "trace_text.hpp"

#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/replay/baseline.hpp>
#include <dtr_tools/replay/lower_bound.hpp>
#include <dtr_tools/replay/storage_timeline.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace rp = dtr::replay;

using dtr::replay::testing::trace_of;

// w (constant, 100 B); a = f(w) (100 B, 10 ns); b = g(a) (200 B, 20 ns); c = h(b) (100 B,
// 30 ns); b released; d = k(a, c) (100 B, 40 ns); only d is left named. The operators need,
// besides w: f 100, g 300, h 300, k 300, and the end 100, so the floor is 400 B. `a` is read
// by g and again by k: h runs in between, and keeping `a` through h costs 100 B there.
const char* gap_log = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a"],"RESULT":["b"],"TIME":"20"}
{"INSTRUCTION":"MEMORY","NAME":"b","MEMORY":"200"}
{"INSTRUCTION":"ALIAS","NAME":"b","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"h","ARGS":["b"],"RESULT":["c"],"TIME":"30"}
{"INSTRUCTION":"MEMORY","NAME":"c","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"c","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"b"}
{"INSTRUCTION":"CALL","NAME":"k","ARGS":["a","c"],"RESULT":["d"],"TIME":"40"}
{"INSTRUCTION":"MEMORY","NAME":"d","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"d","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"a"}
{"INSTRUCTION":"RELEASE","NAME":"c"}
)";

// w (constant, 100 B); x = conv(w) (100 B, 100 ns); y = bn(x) (100 B, 1 ns), and x is dead
// after it; v = big(w) (300 B, 10 ns), released; z = out(y) (100 B, 10 ns). Under 400 B, y
// cannot stay through big, and recomputing it needs x, which is gone too.
const char* dead_input_log = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"CALL","NAME":"conv","ARGS":["w"],"RESULT":["x"],"TIME":"100"}
{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"x","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"bn","ARGS":["x"],"RESULT":["y"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","NAME":"y","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"y","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"x"}
{"INSTRUCTION":"CALL","NAME":"big","ARGS":["w"],"RESULT":["v"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"v","MEMORY":"300"}
{"INSTRUCTION":"ALIAS","NAME":"v","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"v"}
{"INSTRUCTION":"CALL","NAME":"out","ARGS":["y"],"RESULT":["z"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"z","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"z","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"y"}
)";

template <class Heuristic>
rp::replay_result replay(const rp::trace& t, std::uint64_t budget, dtr::cost_t baseline,
                         std::size_t steps) {
    rp::replay_options options{.budget = budget,
                               .dealloc = dtr::dealloc_policy::keep_once_bound,
                               .thrash_limit = 3.0,
                               .baseline_compute = baseline,
                               .restore = dtr::restore_pins::yield_when_full,
                               .steps = steps};
    rp::constants_as_logged(t, options);
    return rp::run_replay<Heuristic>(t, options);
}

// Replays `t` at each ratio under three policies (one step, and the default over three
// steps) and holds every finished step to the bound; where the bound has no schedule,
// every run must fail. Returns the comparisons made.
std::size_t check_against_runtime(const std::filesystem::path& log,
                                  const std::vector<double>& ratios) {
    const rp::trace t = rp::load_trace(log);
    const rp::storage_timeline tl = rp::timeline_of(t);
    const rp::baseline b = rp::unlimited_baseline(t);
    REQUIRE(b.error.empty());
    CHECK(tl.compute == doctest::Approx(b.compute));
    std::size_t compared = 0;
    for (double ratio : ratios) {
        const auto budget = static_cast<std::uint64_t>(ratio * static_cast<double>(b.peak));
        const rp::lower_bound_result bound = rp::lower_bound(tl, budget);
        REQUIRE(bound.solved == bound.feasible);
        const std::vector<rp::replay_result> runs = {
            replay<dtr::heuristics::dtr_eqclass>(t, budget, b.compute, 1),
            replay<dtr::heuristics::lru>(t, budget, b.compute, 1),
            replay<dtr::heuristics::dtr_held_next_use>(t, budget, b.compute, 1),
            replay<dtr::default_heuristic>(t, budget, b.compute, 3)};
        for (const rp::replay_result& r : runs) {
            INFO(log.filename().string() << " at " << ratio << ": bound " << bound.slowdown()
                                         << ", status " << rp::to_string(r.status));
            if (!bound.feasible) {
                CHECK(r.steps_done == 0);
                ++compared;
                continue;
            }
            for (std::size_t k = 0; k < r.steps_done; ++k) {
                CHECK(r.step_slowdown(k, b.compute) >= bound.slowdown() - 1e-9);
                ++compared;
            }
        }
    }
    return compared;
}

} // namespace

TEST_CASE("the storage timeline: reads, computes, outputs and the floor") {
    const rp::storage_timeline tl = rp::timeline_of(trace_of(gap_log));
    REQUIRE(tl.ops.size() == 4);
    REQUIRE(tl.storages.size() == 5); // w, a, b, c, d
    CHECK(tl.compute == 100);
    CHECK(tl.storages[0].constant);
    CHECK(tl.storages[1].reads == std::vector<std::uint32_t>{1, 3}); // a: g and k
    CHECK(tl.storages[4].reads == std::vector<std::uint32_t>{4});    // d: the end
    CHECK(tl.outputs == std::vector<std::uint32_t>{4});
    CHECK(tl.operator_bytes() == std::vector<std::uint64_t>{100, 300, 300, 300, 100});
    CHECK(tl.constant_bytes() == std::vector<std::uint64_t>{100, 100, 100, 100, 100});
    CHECK(tl.required_bytes() == std::vector<std::uint64_t>{200, 400, 400, 400, 200});
    CHECK(rp::floor_bytes(tl) == 400);
}

TEST_CASE("the bound is the relaxation's optimum on a log solved by hand") {
    const rp::trace t = trace_of(gap_log);
    const rp::storage_timeline tl = rp::timeline_of(t);
    // 500 B: a stays through h, nothing is recomputed.
    const rp::lower_bound_result roomy = rp::lower_bound(tl, 500);
    CHECK(roomy.feasible);
    CHECK(roomy.solved);
    CHECK(roomy.slowdown() == doctest::Approx(1.0));
    // 450 B: half of a fits through h (the relaxation is fractional): 5 ns of f's 10.
    const rp::lower_bound_result half = rp::lower_bound(tl, 450);
    REQUIRE(half.solved);
    CHECK(half.gaps == 1);
    CHECK(half.recompute == doctest::Approx(5.0));
    // 400 B, the floor: a must go, and f runs again.
    const rp::lower_bound_result tight = rp::lower_bound(tl, 400);
    REQUIRE(tight.solved);
    CHECK(tight.slowdown() == doctest::Approx(1.1));
    // Below the floor no schedule exists; the bound names the operator that does not fit.
    const rp::lower_bound_result none = rp::lower_bound(tl, 399);
    CHECK_FALSE(none.feasible);
    CHECK(none.first_over == 1);
    CHECK(none.first_over_line == 7); // g's CALL line

    // The runtime meets the bound at the floor and fails below it.
    const rp::replay_result at_floor = replay<dtr::heuristics::dtr_eqclass>(t, 400, 100, 1);
    CHECK(at_floor.status == rp::status::ok);
    CHECK(at_floor.slowdown(100) == doctest::Approx(1.1));
    CHECK(replay<dtr::heuristics::dtr_eqclass>(t, 399, 100, 1).status == rp::status::oom);
}

TEST_CASE("a dead input is charged: recomputing y needs x, which nothing else read") {
    const rp::trace t = trace_of(dead_input_log);
    const rp::storage_timeline tl = rp::timeline_of(t);
    REQUIRE(rp::floor_bytes(tl) == 400);
    CHECK(rp::lower_bound(tl, 500).recompute == doctest::Approx(0.0));
    // At 400 B y is dropped. The plain relaxation charges bn's 1 ns. The second charges y's
    // share of bn (bn's run also serves out's gaps through y: by bytes, half) and x's share
    // of conv (conv's run serves x's gaps and y's, half each): 0.5 + 50; keeping x instead
    // would take y's bytes through big, which do not fit.
    const rp::lower_bound_result r = rp::lower_bound(tl, 400);
    REQUIRE(r.solved);
    CHECK(r.by_dead_inputs);
    CHECK(r.dead_input_gaps == 1);
    CHECK(r.recompute == doctest::Approx(50.5));
    REQUIRE(r.plan.size() == 1);
    CHECK(r.plan[0].kept == doctest::Approx(0.0));
    // The runtime recomputes both: 101 ns.
    const rp::replay_result run = replay<dtr::heuristics::dtr_eqclass>(t, 400, 121, 1);
    REQUIRE(run.status == rp::status::ok);
    CHECK(run.slowdown(121) == doctest::Approx(222.0 / 121));
    CHECK(run.slowdown(121) >= r.slowdown());
}

TEST_CASE("a log that records several steps is refused by name") {
    const char* two_steps = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"STEP"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a","ALIAS":"-1"}
)";
    CHECK_THROWS_WITH_AS(static_cast<void>(rp::timeline_of(trace_of(two_steps))),
                         doctest::Contains("records 2 training steps"), dtr::logic_error);
}

TEST_CASE("no run of the runtime beats the bound: recorded traces") {
    const char* dir = std::getenv("DTR_TRACES");
    REQUIRE_MESSAGE(dir != nullptr, "DTR_TRACES names bench/trace/traces (set by meson)");
    std::size_t compared = 0;
    for (const char* name :
         {"resnet18-b32-224px.log", "squeezenet1_0-b32-224px.log", "vgg11-b16-224px.log",
          "mobilenet_v2-b32-224px.log", "densenet121-b16-224px.log"})
        compared += check_against_runtime(std::filesystem::path(dir) / name,
                                          {0.9, 0.7, 0.55, 0.45, 0.35, 0.25});
    MESSAGE(compared << " runs and steps compared");
    CHECK(compared >= 100);
}

TEST_CASE("no run of the runtime beats the bound: the paper's logs") {
    const char* shared = std::getenv("DTR_SHARED");
    const std::filesystem::path dir =
        shared != nullptr ? std::filesystem::path(shared) / "dtr-logs" : std::filesystem::path();
    if (dir.empty() || !std::filesystem::exists(dir)) {
        MESSAGE("skipped: $DTR_SHARED/dtr-logs not found");
        return;
    }
    std::size_t compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("resnet32-", 0) == 0 || name.rfind("unet-", 0) == 0)
            compared += check_against_runtime(entry.path(), {0.5, 0.3, 0.25, 0.2});
    }
    MESSAGE(compared << " runs and steps compared");
    CHECK(compared >= 30);
}
