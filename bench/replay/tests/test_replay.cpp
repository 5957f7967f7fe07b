// SPDX-License-Identifier: Apache-2.0
// The replay driver: log semantics on small hand-written logs, and the published
// simulator's figures on the real logs (when $DTR_SHARED names the shared data).
#include "trace_text.hpp"

#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr_tools/replay/replay.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

// The DTR paper's logs, $DTR_SHARED/dtr-logs; empty when absent (the tests that need them skip).
std::filesystem::path published_logs() {
    const char* shared = std::getenv("DTR_SHARED");
    if (shared == nullptr) return {};
    std::filesystem::path dir = std::filesystem::path(shared) / "dtr-logs";
    return std::filesystem::exists(dir) ? dir : std::filesystem::path();
}

using dtr::replay::testing::trace_of;

// A chain a -> b -> c of 100-byte tensors, b released after use, c the output.
const char* chain_log = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a"],"RESULT":["b"],"TIME":"20"}
{"INSTRUCTION":"MEMORY","NAME":"b","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"b","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"v","ARGS":["b"],"RESULT":["bv"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","NAME":"bv","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"bv","ALIAS":"0"}
{"INSTRUCTION":"CALL","NAME":"h","ARGS":["bv","a"],"RESULT":["c"],"TIME":"30"}
{"INSTRUCTION":"MEMORY","NAME":"c","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"c","ALIAS":"-1"}
{"INSTRUCTION":"RELEASE","NAME":"b"}
{"INSTRUCTION":"RELEASE","NAME":"bv"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"COPY","DST":"a2","SRC":"a"}
{"INSTRUCTION":"RELEASE","NAME":"a"}
{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["a2","c"],"MUTATE":[0],"TIME":"5"}
)";

// Three training steps recorded in one log (bench/trace/dtr_trace.py --steps 3): the first
// makes the momentum buffer `m`, the later ones update it; `w` is updated in place in each.
// Logged compute: 38, 39, 39.
const char* three_steps_log = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a1"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a1","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a1","ALIAS":"-1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a1"],"RESULT":["g1"],"TIME":"20"}
{"INSTRUCTION":"MEMORY","NAME":"g1","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"g1","ALIAS":"-1"}
{"INSTRUCTION":"CALL","NAME":"clone","ARGS":["g1"],"RESULT":["m"],"TIME":"3"}
{"INSTRUCTION":"MEMORY","NAME":"m","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"m","ALIAS":"-1"}
{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["w","m"],"MUTATE":[0],"TIME":"5"}
{"INSTRUCTION":"RELEASE","NAME":"a1"}
{"INSTRUCTION":"RELEASE","NAME":"g1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"STEP"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a2"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a2","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a2","ALIAS":"-1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a2"],"RESULT":["g2"],"TIME":"20"}
{"INSTRUCTION":"MEMORY","NAME":"g2","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"g2","ALIAS":"-1"}
{"INSTRUCTION":"MUTATE","NAME":"mul_","ARGS":["m","g2"],"MUTATE":[0],"TIME":"4"}
{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["w","m"],"MUTATE":[0],"TIME":"5"}
{"INSTRUCTION":"RELEASE","NAME":"a2"}
{"INSTRUCTION":"RELEASE","NAME":"g2"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"STEP"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a3"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a3","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a3","ALIAS":"-1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["a3"],"RESULT":["g3"],"TIME":"20"}
{"INSTRUCTION":"MEMORY","NAME":"g3","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"g3","ALIAS":"-1"}
{"INSTRUCTION":"MUTATE","NAME":"mul_","ARGS":["m","g3"],"MUTATE":[0],"TIME":"4"}
{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["w","m"],"MUTATE":[0],"TIME":"5"}
{"INSTRUCTION":"RELEASE","NAME":"a3"}
{"INSTRUCTION":"RELEASE","NAME":"g3"}
)";

// Two logged steps; the state carried from the first (m) has a second name (COPY) that the
// second step reads.
const char* aliased_state_log = R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","NAME":"w","MEMORY":"100"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a1"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a1","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a1","ALIAS":"-1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"CALL","NAME":"clone","ARGS":["a1"],"RESULT":["m"],"TIME":"3"}
{"INSTRUCTION":"MEMORY","NAME":"m","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"m","ALIAS":"-1"}
{"DST":"m_alias","INSTRUCTION":"COPY","SRC":"m"}
{"INSTRUCTION":"RELEASE","NAME":"a1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"STEP"}
{"INSTRUCTION":"CALL","NAME":"f","ARGS":["w"],"RESULT":["a2"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","NAME":"a2","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"a2","ALIAS":"-1"}
{"INSTRUCTION":"ANNOTATE","ANNOTATION":"BACKWARD"}
{"INSTRUCTION":"CALL","NAME":"g","ARGS":["m_alias","a2"],"RESULT":["b"],"TIME":"5"}
{"INSTRUCTION":"MEMORY","NAME":"b","MEMORY":"100"}
{"INSTRUCTION":"ALIAS","NAME":"b","ALIAS":"-1"}
{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["w","m"],"MUTATE":[0],"TIME":"5"}
{"INSTRUCTION":"RELEASE","NAME":"a2"}
{"INSTRUCTION":"RELEASE","NAME":"b"}
)";
} // namespace

TEST_CASE("an unlimited replay computes every operator once") {
    const auto t = trace_of(chain_log);
    const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_local>(t, {.thrash_limit = 0});
    CHECK(r.status == dtr::replay::status::ok);
    CHECK(r.compute == 66);
    CHECK(r.forward_compute == 61);
    CHECK(r.remat == 0);
    // w, a, b (bv is a view), c, then a2's new version: b is evicted on release first.
    CHECK(r.peak_resident == 400);
    // Every record ran; the outputs were already resident, so nothing was spent after.
    CHECK(r.records_done == r.records_total);
    CHECK(r.records_total == 12);
    CHECK(r.spent_at_log_end == 66);
}

TEST_CASE("a budgeted replay recomputes and reports the slowdown") {
    // w -> a -> b -> c; d = k(c, a) evicts b; e = m(b) must recompute it.
    std::string log =
        "{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\n"
        "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"w\"}\n"
        "{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"w\",\"MEMORY\":\"100\"}\n";
    auto call = [&](const char* out, const char* args, int time) {
        log += std::string("{\"INSTRUCTION\":\"CALL\",\"NAME\":\"op\",\"ARGS\":[") + args +
               "],\"RESULT\":[\"" + out + "\"],\"TIME\":\"" + std::to_string(time) + "\"}\n" +
               "{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"" + out + "\",\"MEMORY\":\"100\"}\n" +
               "{\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"" + out + "\",\"ALIAS\":\"-1\"}\n";
    };
    call("a", "\"w\"", 10);
    call("b", "\"a\"", 20);
    call("c", "\"b\"", 30);
    call("d", "\"c\",\"a\"", 40);
    call("e", "\"b\"", 50);
    for (const char* n : {"a", "b", "c", "d"})
        log += std::string("{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"") + n + "\"}\n";
    const auto t = trace_of(log);
    const auto base = dtr::replay::run_replay<dtr::heuristics::dtr_local>(t, {.thrash_limit = 0});
    CHECK(base.peak_resident == 600);
    const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_local>(
        t, {.budget = 400, .baseline_compute = base.compute});
    CHECK(r.status == dtr::replay::status::ok);
    CHECK(r.peak_resident <= 400);
    CHECK(r.stats.rematerializations == 1);
    CHECK(r.slowdown(base.compute) == doctest::Approx((150.0 + 20.0) / 150.0));
}

TEST_CASE("an impossible budget is oom, a tight one may thrash") {
    const auto t = trace_of(chain_log);
    const auto oom = dtr::replay::run_replay<dtr::heuristics::dtr_local>(
        t, {.budget = 150, .baseline_compute = 66});
    CHECK(oom.status == dtr::replay::status::oom);
    CHECK(oom.error.find("out of memory") != std::string::npos);
    // w fits, a does not: the run stops at f, the third record (START, w, f).
    CHECK(oom.records_done == 2);
    CHECK(oom.spent_at_log_end == 0);
    // A thrash limit below 1 stops at the first operator.
    const auto thrash = dtr::replay::run_replay<dtr::heuristics::dtr_local>(
        t, {.budget = 300, .thrash_limit = 0.1, .baseline_compute = 66});
    CHECK(thrash.status == dtr::replay::status::thrash);
    CHECK(thrash.records_done == 2);
    CHECK(thrash.records_done < thrash.records_total);
}

TEST_CASE("malformed logs are parse errors naming file and line") {
    CHECK_THROWS_AS(trace_of("{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\n{"
                             "\"INSTRUCTION\":\"RELEASE\"}\n"),
                    dtr::parse_error);
    try {
        trace_of("{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\nnot json\n");
        FAIL("no parse_error");
    } catch (const dtr::parse_error& e) {
        CHECK(e.line() == 2);
    }
}

TEST_CASE("the published logs replay as the published simulator reports") {
    const std::filesystem::path dir = published_logs();
    if (dir.empty()) {
        MESSAGE("skipped: DTR_SHARED/dtr-logs not present");
        return;
    }
    // ResNet-32 with h_DTR^local and LRU: the reference's figures (reference/simrd-paper-logs.json).
    const auto t =
        dtr::replay::load_trace(dir / "resnet32-56-9000000000.0-2020-10-1-13-3-30-default.log");
    const auto base = dtr::replay::run_replay<dtr::heuristics::dtr_local>(
        t, {.dealloc = dtr::dealloc_policy::banish, .thrash_limit = 0, .keep_constants = false});
    CHECK(base.peak_resident / 1e6 == doctest::Approx(10061.2).epsilon(1e-5));
    CHECK(base.compute / 1e6 == doctest::Approx(291.91).epsilon(1e-4));
    auto at = [&](auto heuristic, double ratio) {
        return dtr::replay::run_replay<decltype(heuristic)>(
            t, {.budget = static_cast<std::size_t>(ratio * static_cast<double>(base.peak_resident)),
                .baseline_compute = base.compute});
    };
    CHECK(at(dtr::heuristics::dtr_local{}, 0.9).slowdown(base.compute) ==
          doctest::Approx(1.0131).epsilon(1e-3));
    CHECK(at(dtr::heuristics::dtr_local{}, 0.5).slowdown(base.compute) ==
          doctest::Approx(1.1965).epsilon(1e-3));
    CHECK(at(dtr::heuristics::dtr_local{}, 0.4).status == dtr::replay::status::thrash);
    CHECK(at(dtr::heuristics::dtr_local{}, 0.1).status == dtr::replay::status::oom);
    CHECK(at(dtr::heuristics::lru{}, 0.7).slowdown(base.compute) ==
          doctest::Approx(1.0952).epsilon(1e-3));
}

TEST_CASE("arena replays: the region is the budget, and windows evict less than one by one") {
    const std::filesystem::path dir = published_logs();
    if (dir.empty()) {
        MESSAGE("skipped: DTR_SHARED/dtr-logs not present");
        return;
    }
    // LSTM at 0.5 under dtr_eqclass (docs/results.md, "Fragmentation-aware eviction").
    const auto t =
        dtr::replay::load_trace(dir / "lstm-128-11000000000.0-2020-10-1-16-38-52-default.log");
    const auto base = dtr::replay::run_replay<dtr::heuristics::dtr_eqclass>(
        t, {.dealloc = dtr::dealloc_policy::banish, .thrash_limit = 0, .keep_constants = false});
    const auto budget = static_cast<std::size_t>(0.5 * static_cast<double>(base.peak_resident));
    auto on_arena = [&](dtr::fragmentation_policy policy) {
        return dtr::replay::run_replay<dtr::heuristics::dtr_eqclass>(
            t, {.budget = budget,
                .baseline_compute = base.compute,
                .arena_alignment = 256,
                .fragmentation = policy});
    };
    const auto logical = dtr::replay::run_replay<dtr::heuristics::dtr_eqclass>(
        t, {.budget = budget, .baseline_compute = base.compute});
    const auto one = on_arena(dtr::fragmentation_policy::one_by_one);
    const auto win = on_arena(dtr::fragmentation_policy::window);
    REQUIRE(logical.status == dtr::replay::status::ok);
    CHECK(logical.backend_refusals == 0);
    CHECK(logical.region_peak == 0); // no region
    for (const auto* r : {&one, &win}) {
        CHECK(r->status == dtr::replay::status::ok);
        CHECK(r->region_peak <= budget);
        CHECK(r->peak_resident <= budget);
        CHECK(r->stats.fragmented_allocations > 0);
    }
    CHECK(one.stats.window_evictions == 0);
    CHECK(one.backend_refusals > one.stats.fragmented_allocations); // several evictions per block
    CHECK(win.stats.window_evictions > 0);
    CHECK(win.backend_refusals == win.stats.fragmented_allocations); // one window each
    CHECK(win.stats.evictions < one.stats.evictions);
    CHECK(win.slowdown(base.compute) < one.slowdown(base.compute));
    CHECK(logical.slowdown(base.compute) <= win.slowdown(base.compute));
}

TEST_CASE("a log replayed for several steps repeats its first step, and the runtime follows it") {
    const auto t = trace_of(chain_log);
    for (const bool marks : {true, false}) {
        CAPTURE(marks);
        const auto one =
            dtr::replay::run_replay<dtr::heuristics::dtr_local>(t, {.thrash_limit = 0});
        const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(
            t, {.thrash_limit = 0, .steps = 4, .mark_steps = marks});
        CHECK(r.status == dtr::replay::status::ok);
        CHECK(r.steps_done == 4);
        REQUIRE(r.step_spent.size() == 4);
        for (const dtr::cost_t spent : r.step_spent) CHECK(spent == 66); // nothing evicted
        CHECK(r.compute == 4 * one.compute);
        CHECK(r.peak_resident == one.peak_resident); // the step's names are dropped between
        CHECK(r.steady_slowdown(66, 4) == 1);
        CHECK(r.stats.steps_marked == (marks ? 4U : 0U));
        // A step is 5 calls and the 3 pins that make its outputs resident.
        if (marks) {
            // Steps 2-4 follow the first.
            CHECK(r.stats.steps_learned == 1);
            CHECK(r.stats.step_divergences == 0);
            CHECK(r.stats.forecast_calls == 3 * 8);
        } else {
            // The three pins of a step are alike: the runtime adopts that short period first
            // and drops it at the next call, until the whole step has repeated.
            CHECK(r.stats.steps_learned >= 1);
            CHECK(r.stats.forecast_calls >= 8);
        }
    }
}

TEST_CASE("state carried into a logged step is promoted once, under every name it has") {
    const auto t = trace_of(aliased_state_log);
    REQUIRE(t.logged_steps() == 2);
    const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(
        t, {.thrash_limit = 0,
            .constant_updates = dtr::constant_update::constant,
            .keep_constants = false});
    INFO(r.error);
    CHECK(r.status == dtr::replay::status::ok);
    CHECK(r.steps_done == 2);
    CHECK(r.promotions == 1); // m and m_alias are one tensor: one promotion
    // At the second step's update: w, its updated version, m (a constant now, under both
    // names), a2 and b. The alias holds no second copy of m.
    CHECK(r.peak_resident == 500);
}

TEST_CASE("a replay of several steps that runs out of budget says in which step") {
    const auto t = trace_of(chain_log);
    // The constant and three 100-byte tensors fit only just: too little for any step.
    const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(
        t, {.budget = 250, .thrash_limit = 0, .steps = 3});
    CHECK(r.status == dtr::replay::status::oom);
    CHECK(r.steps_done == 0);
    CHECK(r.step_spent.size() == 1);
}

TEST_CASE("a log that records its steps replays them as steps, each against its own compute") {
    const auto t = trace_of(three_steps_log);
    REQUIRE(t.logged_steps() == 3);
    CHECK(t.step_compute == std::vector<dtr::cost_t>{38, 39, 39});
    for (const bool marks : {true, false}) {
        CAPTURE(marks);
        // As dtr-replay replays a training loop: parameters updated into new constants, each
        // step's batch freed once released.
        const auto r = dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(
            t, {.thrash_limit = 0,
                .constant_updates = dtr::constant_update::constant,
                .keep_constants = false,
                .mark_steps = marks});
        CHECK(r.status == dtr::replay::status::ok);
        CHECK(r.logged_steps);
        CHECK(r.steps_done == 3);
        CHECK(r.step_spent == std::vector<dtr::cost_t>{38, 39, 39}); // nothing evicted
        CHECK(r.step_baseline == t.step_compute);
        CHECK(r.steady_slowdown(116, 3) == 1);
        CHECK(r.slowdown(116) == 1); // the whole log against its whole compute
        // The momentum buffer, computed in the first step and held where the second begins,
        // becomes a constant there (the parameter is one already); in the third it is one.
        CHECK(r.promotions == 1);
        CHECK(r.stats.steps_marked == (marks ? 3U : 0U));
        if (marks) {
            // The first step makes the momentum buffer: the second diverges from it at its
            // third call and is learned at the third mark; the third step follows it.
            CHECK(r.stats.steps_learned == 2);
            CHECK(r.stats.forecast_calls >= 4);
        }
    }
    // Under a budget that evicts, each step is held to its own thrash limit.
    const auto tight = dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(
        t, {.budget = 450,
            .thrash_limit = 10,
            .baseline_compute = 116,
            .constant_updates = dtr::constant_update::constant,
            .keep_constants = false,
            .restore = dtr::restore_pins::yield_when_full});
    INFO(tight.error);
    CHECK(tight.status == dtr::replay::status::ok);
    CHECK(tight.steps_done == 3);
    CHECK(tight.stats.evictions > 0);
    CHECK(tight.peak_resident <= 450);
    // Repeating a log that has its own steps is refused, naming the log.
    CHECK_THROWS_WITH_AS(
        dtr::replay::run_replay<dtr::heuristics::dtr_next_use>(t, {.thrash_limit = 0, .steps = 2}),
        doctest::Contains("records 3 steps itself"), dtr::logic_error);
}
