// SPDX-License-Identifier: Apache-2.0
// Steps: the runtime records the program's step (runtime::begin_step, or by detecting a
// repeated sequence of calls), forecasts when each storage is read next while the program
// follows it, and drops the forecast at the first call that differs. The forecast must equal
// hindsight, change the policy's choice the way Belady's rule says, vanish within one call of
// a divergence, and never change a value or break the budget.
#include "support/byte_ops.hpp"

#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace {

namespace h = dtr::heuristics;
using dtr_test::host_context;

//! One fresh output of `bytes` bytes: out[i] = i + sum of the inputs' first bytes.
struct make_op {
    std::size_t bytes = 16;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        unsigned sum = 0;
        for (std::size_t k = 0; k < ctx.num_inputs(); ++k)
            if (ctx.input(k).size() != 0) sum += dtr_test::u8(ctx.input(k).data()[0]);
        auto out = ctx.output(0, bytes);
        for (std::size_t i = 0; i < bytes; ++i)
            out.data()[i] = std::byte(static_cast<std::uint8_t>(i + sum));
    }
};

//! As make_op, and notes whether the runtime had a forecast while the operator ran.
template <class Runtime>
struct probe_op {
    std::size_t bytes = 16;
    const Runtime* rt = nullptr;
    std::optional<bool>* saw = nullptr;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        if (!ctx.rematerializing()) *saw = rt->forecast() != nullptr;
        make_op{bytes}(ctx);
    }
};

//! The live storage of `bytes` bytes (every storage of these programs has its own size).
template <class Runtime>
const typename Runtime::storage_type* storage_of_size(const Runtime& rt, std::size_t bytes) {
    const typename Runtime::storage_type* found = nullptr;
    rt.for_each_storage([&](const auto& s) {
        if (s.size() == bytes) found = &s;
    });
    return found;
}

using next_use_runtime = dtr::runtime<dtr::host_backend, h::dtr_next_use>;

//! The six-call step of the forecast tests, costs 1..6:
//!   a = f(x); b = f(a); c = f(b); d = f(a, c); e = f(b, d); out = f(e, a)
//! `after(k)` runs after call k (0-based) with the step's tensors so far.
template <class Runtime, class After>
void six_calls(Runtime& rt, const dtr::tensor& x, After&& after) {
    auto a = rt.call(make_op{16}, {x}, {.cost = 1.0});
    after(0);
    auto b = rt.call(make_op{24}, {a}, {.cost = 2.0});
    after(1);
    auto c = rt.call(make_op{32}, {b}, {.cost = 3.0});
    after(2);
    auto d = rt.call(make_op{40}, {a, c}, {.cost = 4.0});
    after(3);
    auto e = rt.call(make_op{48}, {b, d}, {.cost = 5.0});
    after(4);
    auto out = rt.call(make_op{56}, {e, a}, {.cost = 6.0});
    after(5);
}

} // namespace

TEST_CASE("the forecast is the program time until each storage's next read") {
    for (const bool marks : {true, false}) {
        CAPTURE(marks);
        next_use_runtime rt;
        dtr::tensor x = rt.constant(8, dtr_test::fill_with(3));
        int checked = 0;
        for (int step = 0; step < 4; ++step) {
            if (marks) rt.begin_step();
            six_calls(rt, x, [&](int k) {
                // Marks: the first step is recorded, the second mark adopts it. Automatic:
                // the second step repeats the first, which is adopted at its end.
                if (step < 2) return;
                const dtr::step_forecast* f = rt.forecast();
                REQUIRE(f != nullptr);
                CHECK(f->length() == 6);
                CHECK(f->step_time() == 21);
                auto time = [&](std::size_t bytes) {
                    const auto* s = storage_of_size(rt, bytes);
                    REQUIRE(s != nullptr);
                    return f->time_to_next_use(*s);
                };
                // prefix sums of the costs: 0 1 3 6 10 15 21
                if (k == 1) { // next: c = f(b) at position 2
                    CHECK(f->position() == 2);
                    CHECK(time(16) == 3); // a: read by d (position 3): 6 - 3
                    CHECK(time(24) == 0); // b: read by the next call
                    ++checked;
                }
                if (k == 3) {              // next: e = f(b, d) at position 4
                    CHECK(time(16) == 5);  // a: read by out (position 5): 15 - 10
                    CHECK(time(24) == 0);  // b: read now
                    CHECK(time(32) == 32); // c: not read again: the rest (11) + a step (21)
                    CHECK(time(40) == 0);  // d: read now
                    ++checked;
                }
                if (k == 5) { // the step is over: the output is read in no later call
                    CHECK(time(56) == 21);
                    ++checked;
                }
            });
        }
        CHECK(checked == 6);
        CHECK(rt.stats().steps_learned == 1);
        CHECK(rt.stats().step_divergences == 0);
        CHECK(rt.stats().steps_marked == (marks ? 4U : 0U));
    }
}

namespace {

//! As make_op, and notes what the forecast says while the operator runs (its first run):
//! its position, then the time to the next use of the storage of each size asked; nothing
//! without a forecast.
struct forecast_probe_op {
    std::size_t bytes = 16;
    const next_use_runtime* rt = nullptr;
    std::vector<std::size_t> sizes;
    std::vector<double>* seen = nullptr;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        if (!ctx.rematerializing()) {
            seen->clear();
            if (const dtr::step_forecast* f = rt->forecast()) {
                seen->push_back(f->position());
                for (const std::size_t b : sizes)
                    seen->push_back(f->time_to_next_use(*storage_of_size(*rt, b)));
            }
        }
        make_op{bytes}(ctx);
    }
};

} // namespace

TEST_CASE("an event the recorded step does not have is skipped over; the step goes on") {
    // The six-call step under marks. Step 3 first reads the previous step's output (a pin
    // outside any call: the loss read to log it), and runs an extra call reading `a` after
    // call 1: both are insertions. The extra call runs without the forecast; the calls around
    // it follow the step with it, and its distances are the step's (a's next read is still
    // d's, though the extra call read it since). Step 4 runs more extra calls than
    // insertion_limit() (9 for a step of 6): the tenth leaves the step.
    next_use_runtime rt;
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(3));
    dtr::tensor out;
    std::optional<bool> saw_in_extra;
    std::vector<double> seen_by_c;
    for (int step = 0; step < 5; ++step) {
        CAPTURE(step);
        rt.begin_step();
        if (step == 3) (void)rt.pin(out);
        auto a = rt.call(make_op{16}, {x}, {.cost = 1.0});
        auto b = rt.call(make_op{24}, {a}, {.cost = 2.0});
        if (step == 3)
            (void)rt.call(probe_op<next_use_runtime>{12, &rt, &saw_in_extra}, {a},
                          {.cost = 1.0, .op_key = 99});
        if (step == 4)
            for (int k = 0; k < 10; ++k)
                (void)rt.call(make_op{12}, {a}, {.cost = 1.0, .op_key = 99});
        auto c = rt.call(forecast_probe_op{32, &rt, {16, 24}, &seen_by_c}, {b}, {.cost = 3.0});
        if (step >= 2 && step <= 3) {
            // position 2; a: read by d at position 3, 6 - 3; b: read by c, now
            CHECK(seen_by_c == std::vector<double>{2, 3, 0});
        }
        if (step == 4) {
            CHECK(seen_by_c.empty());
            CHECK(rt.stats().step_divergences == 1);
        }
        auto d = rt.call(make_op{40}, {a, c}, {.cost = 4.0});
        auto e = rt.call(make_op{48}, {b, d}, {.cost = 5.0});
        out = rt.call(make_op{56}, {e, a}, {.cost = 6.0});
        if (step == 3) {
            CHECK(rt.stats().step_divergences == 0);
            CHECK(rt.stats().step_insertions == 2);
        }
    }
    REQUIRE(saw_in_extra.has_value());
    CHECK_FALSE(*saw_in_extra);
    CHECK(rt.stats().step_insertions == 2 + 9);
    CHECK(rt.stats().steps_learned == 1);
}

// dtr_next_use, and the runtime's default (dtr_next_use through the indexed search: the index
// decides the recorded step, the scan the steps that follow it).
TEST_CASE_TEMPLATE("with the forecast, of two storages alike the one read later is evicted",
                   Runtime, next_use_runtime, dtr::runtime<dtr::host_backend>) {
    // b and a have the same size and cost; b is older (staler) but read first. Call 2 needs
    // room for one of them: the online policy evicts the stalest (b, read next), the forecast
    // the one read later (a).
    constexpr std::size_t s = 100;
    Runtime rt({.budget = 8 + 3 * s - 2, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    std::vector<bool> a_kept, b_kept;
    std::vector<std::uint64_t> remats;
    for (int step = 0; step < 4; ++step) {
        rt.begin_step();
        const std::uint64_t before = rt.stats().rematerializations;
        auto b = rt.call(make_op{s}, {x}, {.cost = 1.0});
        auto a = rt.call(make_op{s}, {x}, {.cost = 1.0});
        {
            auto t = rt.call(make_op{s - 1}, {x}, {.cost = 1.0}); // evicts a or b
            a_kept.push_back(rt.is_resident(a));
            b_kept.push_back(rt.is_resident(b));
        }
        auto u = rt.call(make_op{10}, {b}, {.cost = 1.0});
        auto v = rt.call(make_op{11}, {a}, {.cost = 1.0});
        remats.push_back(rt.stats().rematerializations - before);
    }
    // Step 0 is recorded (online choice), steps 1-3 follow it.
    CHECK(a_kept[0]);
    CHECK_FALSE(b_kept[0]);
    for (int step = 1; step < 4; ++step) {
        CAPTURE(step);
        CHECK_FALSE(a_kept[step]);
        CHECK(b_kept[step]);
        CHECK(remats[step] <= remats[0]);
    }
    CHECK(rt.stats().forecast_calls == 15);
}

TEST_CASE("with the forecast, a need below a long evicted chain is seen") {
    // s and t are alike (100 bytes, cost 1), t read after the chain's end c60, which is
    // computed from s through 60 storages of 1 byte, all evicted. To read c60 the runtime
    // recomputes the chain from s: s is needed then, before t's read, so t is the victim
    // when a temporary needs room for one of them. (A need walk of 32 visits did not reach
    // c60: s looked used never and went first, and the chain's restore then recomputed s.)
    constexpr std::size_t s_bytes = 100, links = 60;
    next_use_runtime rt({.budget = 8 + 3 * s_bytes - 1, // x, s, t and tmp: one too many
                         .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    std::vector<bool> s_kept, t_kept;
    std::vector<unsigned> reads;
    for (int step = 0; step < 4; ++step) {
        rt.begin_step();
        auto s = rt.call(make_op{s_bytes}, {x}, {.cost = 1.0});
        std::vector<dtr::tensor> chain{s};
        for (std::size_t i = 0; i < links; ++i)
            chain.push_back(rt.call(make_op{1}, {chain.back()}, {.cost = 1.0}));
        for (std::size_t i = 1; i < chain.size(); ++i) REQUIRE(rt.evict(chain[i]));
        auto t = rt.call(make_op{s_bytes + 1}, {x}, {.cost = 1.0});
        {
            auto tmp = rt.call(make_op{s_bytes - 1}, {x}, {.cost = 1.0}); // s or t goes
            s_kept.push_back(rt.is_resident(s));
            t_kept.push_back(rt.is_resident(t));
        }
        for (const dtr::tensor* read : {&chain.back(), &t}) {
            auto r = rt.call(make_op{2}, {*read}, {.cost = 1.0});
            const auto pinned = rt.pin(r);
            reads.push_back(dtr_test::u8(pinned.data().data()[0]));
        }
    }
    for (int step = 1; step < 4; ++step) {
        CAPTURE(step);
        CHECK(s_kept[static_cast<std::size_t>(step)]);
        CHECK_FALSE(t_kept[static_cast<std::size_t>(step)]);
    }
    for (std::size_t i = 2; i < reads.size(); ++i) CHECK(reads[i] == reads[i % 2]);
    CHECK(rt.stats().forecast_calls > 0);
    rt.check_invariants();
}

TEST_CASE("with the forecast, a small input of a large storage read later is kept") {
    // g (4 bytes, cost 50) is read once, to make y (1,000 bytes, cost 100), which the step
    // holds and reads at its end, as a weight gradient is. o (8 bytes, cost 0.5) is also
    // read at the end. The first temporary needs room for one small storage: g, which the
    // step never reads again, would be the cheapest victim, but the second temporary then
    // evicts y, and recomputing y at the end needs g too (150). The forecast keeps g as
    // y's input and evicts o instead: recomputing o and y costs 100.5.
    next_use_runtime rt({.budget = 1025, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    std::vector<bool> g_kept;
    std::vector<double> remat;
    std::vector<unsigned> reads;
    for (int step = 0; step < 4; ++step) {
        rt.begin_step();
        const double before = rt.stats().remat_cost;
        auto g = rt.call(make_op{4}, {x}, {.cost = 50.0});
        auto y = rt.call(make_op{1000}, {g}, {.cost = 100.0});
        auto o = rt.call(make_op{8}, {x}, {.cost = 0.5});
        {
            auto tmp = rt.call(make_op{6}, {x}, {.cost = 1.0}); // g or o goes
            g_kept.push_back(rt.is_resident(g));
        }
        { auto tmp = rt.call(make_op{1000}, {x}, {.cost = 1.0}); } // y goes
        for (const dtr::tensor* read : {&o, &y}) {
            auto r = rt.call(make_op{2}, {*read}, {.cost = 1.0});
            const auto pinned = rt.pin(r);
            reads.push_back(dtr_test::u8(pinned.data().data()[0]));
        }
        remat.push_back(rt.stats().remat_cost - before);
    }
    for (std::size_t step = 1; step < 4; ++step) {
        CAPTURE(step);
        CHECK(g_kept[step]);
        CHECK(remat[step] == doctest::Approx(100.5));
    }
    for (std::size_t i = 2; i < reads.size(); ++i) CHECK(reads[i] == reads[i % 2]);
    rt.check_invariants();
}

namespace {

//! A policy the forecast misleads: with one it evicts the storage read soonest (Belady's
//! rule reversed); without one it is lru.
struct misled_by_forecast {
    struct storage_data {};
    template <class Storage>
    double score(const Storage& s, const dtr::heuristic_context& ctx) const noexcept {
        if (ctx.forecast != nullptr) {
            const double d = ctx.forecast->time_to_next_use(s);
            if (d >= 0) return d;
        }
        return static_cast<double>(s.last_access());
    }
};
static_assert(dtr::heuristic<misled_by_forecast>);

//! A policy that chooses as well with the forecast as without (the storage read last, which
//! is lru's choice in the program below), but whose every score with a forecast takes 10 ms:
//! its search costs more than anything recomputation saves.
struct slow_with_forecast {
    struct storage_data {};
    template <class Storage>
    double score(const Storage& s, const dtr::heuristic_context& ctx) const noexcept {
        if (ctx.forecast != nullptr) {
            const double d = ctx.forecast->time_to_next_use(s);
            if (d >= 0) {
                const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
                while (std::chrono::steady_clock::now() < until) {}
                return 1 / (1 + d);
            }
        }
        return static_cast<double>(s.last_access());
    }
};
static_assert(dtr::heuristic<slow_with_forecast>);

//! Per step, the recomputation cost of a program where the forecast can mislead: a1..a4
//! made (a4 costs 10 to make, the others 1), a temporary that evicts one of them, then reads
//! of a4, a3, a2, a1. lru (and dtr_next_use, reading the forecast) evict a1 and recompute it
//! for 1; misled by the forecast, misled_by_forecast evicts a4 and recomputes it for 10.
//! Also returns the reads' first bytes and the forecast_withheld counter. A step may begin
//! with a call costing `work` (no eviction): the larger the step's compute, the smaller a
//! loss of 9 is against it, and the forecast guard's waits after a loss then double from 2
//! rather than being sized by the loss.
struct evict_one_run {
    std::vector<double> remat_per_step;
    std::vector<unsigned> values;
    std::uint64_t withheld = 0;
};
//! One step of that program, with tensors of `bytes` bytes (another size: another program).
template <class Runtime>
void evict_one_of_four_step(Runtime& rt, const dtr::tensor& x, std::size_t bytes,
                            evict_one_run& out, double work = 0) {
    rt.begin_step();
    const double before = rt.stats().remat_cost;
    if (work > 0) (void)rt.call(make_op{10}, {x}, {.cost = work});
    auto a1 = rt.call(make_op{bytes}, {x}, {.cost = 1.0});
    auto a2 = rt.call(make_op{bytes}, {a1}, {.cost = 1.0});
    auto a3 = rt.call(make_op{bytes}, {a2}, {.cost = 1.0});
    auto a4 = rt.call(make_op{bytes}, {x}, {.cost = 10.0});
    { auto t = rt.call(make_op{100}, {x}, {.cost = 1.0}); } // evicts one of a1..a4
    for (const dtr::tensor* a : {&a4, &a3, &a2, &a1}) {
        auto r = rt.call(make_op{10}, {*a}, {.cost = 1.0});
        const auto pinned = rt.pin(r);
        out.values.push_back(dtr_test::u8(pinned.data().data()[0]));
    }
    out.remat_per_step.push_back(rt.stats().remat_cost - before);
    out.withheld = rt.stats().forecast_withheld;
}
template <class Heuristic>
evict_one_run evict_one_of_four(bool guard, int steps, std::size_t budget, double work,
                                bool charge_search = false) {
    dtr::runtime<dtr::host_backend, Heuristic> rt({.budget = budget,
                                                   .dealloc = dtr::dealloc_policy::eager_evict,
                                                   .guard_forecast = guard,
                                                   .guard_charges_search = charge_search});
    evict_one_run out;
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    for (int step = 0; step < steps; ++step) evict_one_of_four_step(rt, x, 100, out, work);
    return out;
}
constexpr std::size_t one_of_four = 8 + 4 * 100 + 100 - 1; // one of a1..a4 must go for t
constexpr double small_loss = 1000; //!< `work`: a loss of 9 is under 1% of the step

} // namespace

TEST_CASE("the forecast guard withholds a forecast that costs more than the online scores") {
    constexpr int steps = 12;
    const auto unguarded =
        evict_one_of_four<misled_by_forecast>(false, steps, one_of_four, small_loss);
    const auto guarded =
        evict_one_of_four<misled_by_forecast>(true, steps, one_of_four, small_loss);
    const auto unlimited =
        evict_one_of_four<misled_by_forecast>(true, steps, dtr::unlimited, small_loss);
    // Values never depend on the guard, nor on the budget.
    CHECK(unguarded.values == unlimited.values);
    CHECK(guarded.values == unlimited.values);
    // The first step is recorded under the online scores (a1, 1); unguarded, every later
    // step follows the forecast into the wrong choice (a4, 10).
    REQUIRE(unguarded.remat_per_step.size() == steps);
    CHECK(unguarded.remat_per_step[0] == 1);
    for (int k = 1; k < steps; ++k) CHECK(unguarded.remat_per_step[k] == 10);
    CHECK(unguarded.withheld == 0);
    // Guarded: step 1 tries the forecast and loses to step 0; steps 2-3 run online (each
    // measures 1, no worse than the forecast's 10); step 4 tries again, loses, and the wait
    // doubles: steps 5-8 online, 9 a try, 10-11 online.
    const std::vector<double> expected{1, 10, 1, 1, 10, 1, 1, 1, 1, 10, 1, 1};
    CHECK(guarded.remat_per_step == expected);
    CHECK(guarded.withheld == 8);
}

TEST_CASE("the forecast guard waits longer after a large loss") {
    // Without the extra work a step computes 18 and the forecast's loss (10 against 1) is half
    // a step: the wait is sized so that a try losing as much again costs at most 3% of the
    // online steps before it, (10 - 1) / 18 / (0.03 x (1 + 1 / 18)) = 15.8, so 16 steps;
    // after the second loss the doubled wait (32) is the longer.
    constexpr int steps = 21;
    const auto guarded = evict_one_of_four<misled_by_forecast>(true, steps, one_of_four, 0);
    std::vector<double> expected(steps, 1);
    expected[1] = expected[18] = 10;
    CHECK(guarded.remat_per_step == expected);
    CHECK(guarded.withheld == 18); // steps 2-17, 19 and 20
}

TEST_CASE("the forecast guard charges victim search time where it is told to") {
    // The same recomputation with the forecast as without (1 a step), but a search at least
    // 10 ms dearer a score. Charged recomputation only (the default), the forecast never
    // loses; charged its search time too, it loses as the misled policy's forecast does.
    constexpr int steps = 6;
    const auto recompute_only =
        evict_one_of_four<slow_with_forecast>(true, steps, one_of_four, small_loss);
    CHECK(recompute_only.remat_per_step == std::vector<double>(steps, 1));
    CHECK(recompute_only.withheld == 0);
    const auto charged =
        evict_one_of_four<slow_with_forecast>(true, steps, one_of_four, small_loss, true);
    CHECK(charged.values == recompute_only.values);
    CHECK(charged.remat_per_step == std::vector<double>(steps, 1));
    // Step 1 tries the forecast; its loss (tens of ms against a step of 1,018 ns) sizes the
    // wait at its longest: steps 2-5 run online.
    CHECK(charged.withheld == 4);
}

TEST_CASE("the forecast guard judges steps that leave the recording, and keeps its state") {
    // Every step ends with a call whose output size differs from the step before's (as with
    // data-dependent control flow): each step is followed up to that call, then recorded in
    // place of the last. The forecast's evictions come before the call. Step 1 is judged by
    // the margin only (a program may differ in its first steps only), and 10 against 1 is
    // under 1% of its step; from step 2 on, a recording before it having been replaced
    // without being followed through, such periods are judged as the forecast's (the program
    // never settles, so step 0's measurement stays a strict baseline), and a new recording
    // does not reset the guard: the misled program's pattern, one step later.
    for (const bool guard : {false, true}) {
        dtr::runtime<dtr::host_backend, misled_by_forecast> rt(
            {.budget = one_of_four,
             .dealloc = dtr::dealloc_policy::eager_evict,
             .guard_forecast = guard});
        dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
        evict_one_run out;
        constexpr std::size_t steps = 12;
        for (std::size_t step = 0; step < steps; ++step) {
            evict_one_of_four_step(rt, x, 100, out, small_loss);
            (void)rt.call(make_op{1 + step}, {x}, {.cost = 1.0}); // the differing tail
        }
        CAPTURE(guard);
        CHECK(rt.stats().step_divergences >= steps - 1);
        if (guard) {
            const std::vector<double> expected{1, 10, 10, 1, 1, 10, 1, 1, 1, 1, 10, 1};
            CHECK(out.remat_per_step == expected);
            CHECK(out.withheld == 7);
        } else {
            std::vector<double> expected(steps, 10);
            expected[0] = 1;
            CHECK(out.remat_per_step == expected);
        }
    }
    // Without the extra work, step 1's loss (10 against 1 in a step of 19) is above the
    // margin: step 1 counts as the forecast's loss, the wait is sized by it (at least 15
    // steps), and every later step runs online.
    dtr::runtime<dtr::host_backend, misled_by_forecast> rt(
        {.budget = one_of_four, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    evict_one_run out;
    constexpr std::size_t steps = 12;
    for (std::size_t step = 0; step < steps; ++step) {
        evict_one_of_four_step(rt, x, 100, out);
        (void)rt.call(make_op{1 + step}, {x}, {.cost = 1.0});
    }
    std::vector<double> expected(steps, 1);
    expected[1] = 10;
    CHECK(out.remat_per_step == expected);
    CHECK(out.withheld == steps - 2);
}

namespace {

//! A policy the forecast helps: with one it evicts the storage read last (Belady's rule);
//! without one, the one used last (in the program above: a4, the dear one).
struct helped_by_forecast {
    struct storage_data {};
    template <class Storage>
    double score(const Storage& s, const dtr::heuristic_context& ctx) const noexcept {
        if (ctx.forecast != nullptr) {
            const double d = ctx.forecast->time_to_next_use(s);
            if (d >= 0) return -d;
        }
        return -static_cast<double>(s.last_access());
    }
};
static_assert(dtr::heuristic<helped_by_forecast>);

} // namespace

TEST_CASE("the forecast guard measures a step that leaves the recording at once as online") {
    // A training loop's first step differs from the later ones and has more room (no
    // optimizer state yet). Here: step 0 runs the program on 99-byte tensors, which fit
    // without evicting. Step 1, the 100-byte program, leaves step 0's recording after its
    // first call and runs on the online scores (a4 evicted, 10 recomputed): it is the online
    // measurement. Steps 2 and later follow step 1's recording; with the forecast a1 goes (1),
    // which wins against step 1, so the forecast is never withheld. Judged against step 0
    // (nothing recomputed) instead, step 2 would lose and step 3 run online for 10.
    dtr::runtime<dtr::host_backend, helped_by_forecast> rt(
        {.budget = one_of_four, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    evict_one_run out;
    evict_one_of_four_step(rt, x, 99, out);
    for (int step = 1; step < 6; ++step) evict_one_of_four_step(rt, x, 100, out);
    CHECK(out.remat_per_step == std::vector<double>{0, 10, 1, 1, 1, 1});
    CHECK(out.withheld == 0);
    CHECK(rt.stats().step_divergences == 1);
    // The same program without the first step's difference: step 0 is the online measurement
    // (10), the forecast wins from step 1 on.
    dtr::runtime<dtr::host_backend, helped_by_forecast> same(
        {.budget = one_of_four, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor y = same.constant(8, dtr_test::fill_with(1));
    evict_one_run same_out;
    for (int step = 0; step < 4; ++step) evict_one_of_four_step(same, y, 100, same_out);
    CHECK(same_out.remat_per_step == std::vector<double>{10, 1, 1, 1});
    CHECK(same_out.values == std::vector<unsigned>(out.values.begin() + 8, out.values.end()));
}

TEST_CASE("the forecast guard judges a forecast against a first step with more room by a margin") {
    // A training loop's first step has more room (no optimizer state yet), and the later
    // steps add to it (here: one call at the end, as the optimizer's momentum updates). Step 0
    // runs under a larger budget and recomputes nothing; step 1 follows its recording with
    // the forecast (a1 evicted, 1 recomputed) and leaves it late, at the extra call; steps 2
    // and later follow step 1's recording, with the forecast: 1 each. Step 0's 0 is a weak
    // baseline, and a loss of 1 in a step of 1,019 is within the margin: the forecast is
    // never withheld. Judged against step 0 as a same-program measurement, step 2 would lose
    // and step 3 run online (a4 evicted, 10 recomputed).
    dtr::runtime<dtr::host_backend, helped_by_forecast> rt(
        {.budget = 2 * one_of_four, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    evict_one_run out;
    evict_one_of_four_step(rt, x, 100, out, small_loss);
    rt.set_budget(one_of_four);
    for (int step = 1; step < 6; ++step) {
        evict_one_of_four_step(rt, x, 100, out, small_loss);
        (void)rt.call(make_op{7}, {x}, {.cost = 1.0}); // the later steps' extra call
    }
    CHECK(out.remat_per_step == std::vector<double>{0, 1, 1, 1, 1, 1});
    CHECK(out.withheld == 0);
    CHECK(rt.stats().step_divergences == 1);
}

TEST_CASE("the forecast guard tries the forecast of a new program at once") {
    // Six steps of the misleading program (the forecast lost twice: steps 1 and 4), then the
    // program changes (101-byte tensors): its first step is recorded, and the next one gets
    // the new forecast, though the old one's wait (4 steps) has not run out.
    dtr::runtime<dtr::host_backend, misled_by_forecast> rt(
        {.budget = one_of_four, .dealloc = dtr::dealloc_policy::eager_evict});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    evict_one_run out;
    for (int step = 0; step < 6; ++step) evict_one_of_four_step(rt, x, 100, out, small_loss);
    CHECK(out.withheld == 3); // steps 2, 3 and 5
    const std::uint64_t learned = rt.stats().steps_learned;
    evict_one_of_four_step(rt, x, 101, out, small_loss);
    evict_one_of_four_step(rt, x, 101, out, small_loss);
    CHECK(rt.stats().steps_learned == learned + 1);
    CHECK(rt.forecast() != nullptr);        // offered from the new recording's first step
    CHECK(out.remat_per_step.back() == 10); // and it misleads, as before
    CHECK(out.withheld == 4);               // the new program's first step (still
                                            // following the old one until it diverged)
}

TEST_CASE("the forecast guard keeps a forecast that costs no more than the online scores") {
    // dtr_next_use on the same program evicts a1, as its online scores do: the forecast is
    // never withheld.
    const auto run = evict_one_of_four<h::dtr_next_use>(true, 6, one_of_four, 0);
    CHECK(run.remat_per_step == std::vector<double>(6, 1));
    CHECK(run.withheld == 0);
}

namespace {

//! How the second program differs from the first at its call 3.
enum class change { op, output_size, input, longer, shorter };

//! Runs `steps_a` steps of program A, then `steps_b` of program B, which differs from A at
//! call 3 as `what` says; returns whether a forecast was in force while each call of the
//! first B step ran (`during`) and right after it (`after`).
struct switch_result {
    std::vector<std::optional<bool>> during, after;
    std::vector<dtr::counters> stats_after; //!< after each call of the first B step
    dtr::counters stats;
    bool following_at_end = false;
};

switch_result switch_programs(bool marks, change what, int steps_a, int steps_b) {
    using runtime_type = dtr::runtime<dtr::host_backend, h::dtr_next_use>;
    runtime_type rt(
        {.budget = dtr::unlimited,
         .steps = marks ? dtr::step_learning::marks_only : dtr::step_learning::automatic});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(5));
    switch_result r;
    for (int step = 0; step < steps_a + steps_b; ++step) {
        const bool b_program = step >= steps_a;
        const bool watch = step == steps_a;
        if (marks) rt.begin_step();
        std::vector<dtr::tensor> t;
        t.push_back(x);
        const int calls = b_program && what == change::longer    ? 8
                          : b_program && what == change::shorter ? 5
                                                                 : 7;
        for (int k = 0; k < calls; ++k) {
            std::optional<bool> saw;
            std::size_t bytes = 16 + 8 * static_cast<std::size_t>(k);
            std::uint64_t key = 1;
            dtr::tensor in = t.back();
            if (b_program && k == 3) {
                if (what == change::op) key = 2;
                if (what == change::output_size) bytes += 1;
                if (what == change::input) in = t[t.size() - 2]; // same size? see below
            }
            // Inputs of the same size either way: call 3 reads the output of call 1 or 2,
            // both of a size the signature does not tell apart once views are equal.
            dtr::tensor view = rt.view(in, 0, 8);
            t.push_back(rt.call(probe_op<runtime_type>{bytes, &rt, &saw}, {view},
                                {.cost = 1.0 + k, .op_key = key}));
            if (watch) {
                r.during.push_back(saw);
                r.after.push_back(rt.forecast() != nullptr);
                r.stats_after.push_back(rt.stats());
            }
        }
    }
    r.stats = rt.stats();
    r.following_at_end = rt.forecast() != nullptr;
    return r;
}

} // namespace

TEST_CASE("switching programs mid-run falls back to online scores within one call") {
    for (const bool marks : {true, false}) {
        CAPTURE(marks);
        // Marks: A's second step is followed. Automatic: A is adopted in its second step,
        // and B's steps repeat from its third on.
        const int steps_a = 3, steps_b = 6;
        SUBCASE("another operator: the forecast is gone while it runs") {
            const auto r = switch_programs(marks, change::op, steps_a, steps_b);
            REQUIRE(r.during.size() == 7);
            for (int k = 0; k < 3; ++k) CHECK(*r.during[k]);
            CHECK_FALSE(*r.during[3]);
            CHECK_FALSE(*r.after[3]);
            CHECK(r.stats.step_divergences >= 1);
            CHECK(r.following_at_end); // B learned
        }
        SUBCASE("another output size: gone from the next call on") {
            const auto r = switch_programs(marks, change::output_size, steps_a, steps_b);
            CHECK(*r.during[3]);
            CHECK_FALSE(*r.after[3]);
            CHECK_FALSE(*r.during[4]);
            CHECK(r.following_at_end);
        }
        SUBCASE("another input of the same size: gone from the next call on") {
            const auto r = switch_programs(marks, change::input, steps_a, steps_b);
            CHECK(*r.during[3]);
            CHECK(r.stats_after[2].step_divergences == 0);
            CHECK(r.stats_after[3].step_divergences == 1);
            if (marks) {
                CHECK_FALSE(*r.after[3]);
                CHECK_FALSE(*r.during[4]);
            } else {
                // The signatures still repeat with period 7, so automatic detection adopts
                // the last 7 calls (B's new input among them) as a new step at once; the
                // stamps made under the old one are void from then on (another epoch).
                CHECK(r.stats_after[3].steps_learned == r.stats_after[2].steps_learned + 1);
            }
            CHECK(r.following_at_end);
        }
        if (marks) {
            SUBCASE("a longer step: gone at its first extra call") {
                const auto r = switch_programs(marks, change::longer, steps_a, steps_b);
                REQUIRE(r.during.size() == 8);
                CHECK(*r.during[6]);
                CHECK_FALSE(*r.during[7]);
                CHECK(r.following_at_end);
                CHECK(r.stats.step_divergences == 1);
                CHECK(r.stats.steps_learned == 2);
            }
            SUBCASE("a shorter step: dropped at the next mark, and relearned") {
                const auto r = switch_programs(marks, change::shorter, steps_a, steps_b);
                CHECK(*r.during[4]);
                CHECK(r.following_at_end);
                CHECK(r.stats.step_divergences == 1);
                CHECK(r.stats.steps_learned == 2);
            }
        }
    }
}

TEST_CASE("a step longer than step_limit gets no forecast, and the recording stays bounded") {
    next_use_runtime rt({.step_limit = 16});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    std::size_t most = 0;
    for (int step = 0; step < 6; ++step) {
        rt.begin_step();
        dtr::tensor t = x;
        for (int k = 0; k < 40; ++k) {
            t = rt.call(make_op{16}, {t}, {.cost = 1.0});
            CHECK(rt.forecast() == nullptr);
            most = std::max(most, rt.step_state().history);
        }
    }
    CHECK(most < 32);
    CHECK(rt.stats().steps_learned == 0);
    CHECK(rt.step_state().memory_bytes < 100000);
}

TEST_CASE("a mark inside the iteration only rotates the step") {
    // A training loop: forward (a1, a2), backward (g2, g1, reading a1 again), an in-place
    // update of w. Wherever the mark goes, activations or the update cross it; their reads
    // link into the period before, as in the recorded step, so every step from the third on
    // is followed call for call.
    struct update_op {
        void operator()(host_context& ctx) const {
            auto w = ctx.inout(0);
            w.data()[0] = std::byte(static_cast<std::uint8_t>(1 + dtr_test::u8(w.data()[0])));
        }
    };
    for (int place = 0; place < 4; ++place) {
        CAPTURE(place);
        next_use_runtime rt;
        dtr::tensor w = rt.constant(8, dtr_test::fill_with(1));
        std::uint64_t divergences_at_2 = 0;
        for (int step = 0; step < 6; ++step) {
            if (place == 0) rt.begin_step();
            dtr::tensor x = rt.constant(12, dtr_test::fill_with(2));
            auto a1 = rt.call(make_op{16}, {x, w}, {.cost = 1.0});
            if (place == 1) rt.begin_step();
            auto a2 = rt.call(make_op{24}, {a1}, {.cost = 2.0});
            if (place == 2) rt.begin_step();
            auto g2 = rt.call(make_op{32}, {a2}, {.cost = 3.0});
            auto g1 = rt.call(make_op{40}, {g2, a1}, {.cost = 4.0});
            if (place == 3) rt.begin_step();
            rt.mutate(update_op{}, {w, g1}, {0}, 1.0);
            if (step == 2) divergences_at_2 = rt.stats().step_divergences;
            if (step >= 2) {
                CHECK(rt.forecast() != nullptr);
                CHECK(rt.step_state().length == 5);
            }
        }
        CHECK(rt.stats().step_divergences == divergences_at_2);
        CHECK(rt.stats().steps_learned == 1);
    }
}

TEST_CASE("automatic detection finds a step whose calls repeat inside it") {
    // Each step is four identical layers and a head: the layers' period (2 calls) is found
    // first and lost at the head, then the step's (10 calls) is found and kept.
    next_use_runtime rt;
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
    for (int step = 0; step < 8; ++step) {
        dtr::tensor t = x;
        for (int layer = 0; layer < 4; ++layer) {
            t = rt.call(make_op{16}, {t}, {.cost = 1.0});
            t = rt.call(make_op{16}, {t}, {.cost = 2.0, .op_key = 9});
        }
        t = rt.call(make_op{24}, {t}, {.cost = 5.0});
        t = rt.call(make_op{32}, {t}, {.cost = 5.0});
    }
    const dtr::step_forecast* f = rt.forecast();
    REQUIRE(f != nullptr);
    CHECK(f->length() == 10);
    CHECK(f->step_time() == 22);
}

TEST_CASE("steps: misuse and the switch") {
    SUBCASE("begin_step from inside an operator") {
        next_use_runtime rt;
        dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
        bool threw = false;
        auto op = [&](host_context& ctx) {
            try {
                rt.begin_step();
            } catch (const dtr::logic_error&) {
                threw = true;
            }
            make_op{16}(ctx);
        };
        dtr::tensor y = rt.call(op, {x});
        CHECK(threw);
    }
    SUBCASE("step_learning::off records nothing") {
        next_use_runtime rt({.steps = dtr::step_learning::off});
        dtr::tensor x = rt.constant(8, dtr_test::fill_with(1));
        for (int step = 0; step < 4; ++step) {
            rt.begin_step();
            dtr::tensor y = rt.call(make_op{16}, {x});
        }
        CHECK(rt.forecast() == nullptr);
        CHECK(rt.step_state().memory_bytes == 0);
        CHECK(rt.stats().steps_marked == 4);
    }
}
