// SPDX-License-Identifier: Apache-2.0
// Property test of the forecast policies: random programs (tests/support/random_program.hpp)
// run four times in a row on one runtime, as the steps of a training loop: the same program
// four times, one program then another (a switch mid-run), two alternating, or four
// different ones (steps that always differ). Each run is one step: marked with
// runtime::begin_step(), or left for the runtime to detect. The policies that read the
// forecast (dtr_next_use, dtr_held_next_use, and dtr_next_use under the indexed search) only
// choose victims, so every value read must
// be bit-identical to an unbudgeted run of dtr_local, resident bytes must never exceed the
// budget (faults injected in most runs), and nothing may leak. Some runs offload to a host
// tier with the runtime's prefetch from the forecast on (runtime_options::prefetch_ahead),
// which moves bytes between the tiers ahead of the reads, and must not change a value either.
//
// Environment: DTR_PROPERTY_SEED, DTR_PROPERTY_PROGRAMS (default: an eighth of the build's
// property_programs option), DTR_PROPERTY_ONLY=i, as the other property tests.
#include "support/property_harness.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/heuristic/dtr_eqclass_held.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/indexed.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#ifndef DTR_PROPERTY_PROGRAMS
#define DTR_PROPERTY_PROGRAMS 2000
#endif

namespace {

namespace h = dtr::heuristics;

//! The programs of the four steps, by the kind of sequence.
std::array<std::uint64_t, 4> step_seeds(std::uint64_t seed) {
    const std::uint64_t a = seed, b = dtr_test::splitmix(seed + 1);
    switch (seed % 4) {
        case 0:
            return {a, a, a, a}; // repeated
        case 1:
            return {a, a, b, b}; // switched mid-run
        case 2:
            return {a, b, a, b}; // alternating
        default:
            return {a, b, dtr_test::splitmix(seed + 2), dtr_test::splitmix(seed + 3)};
    }
}

const char* describe(std::uint64_t seed) {
    static const char* kinds[] = {"repeated", "switched", "alternating", "all different"};
    return kinds[seed % 4];
}

//! Runs the four steps on one runtime and joins what they observed.
template <class Runtime>
dtr_test::program_trace run_steps(Runtime& rt, std::uint64_t seed, std::size_t steps, bool marks,
                                  std::size_t invariant_period) {
    dtr_test::program_trace all;
    for (const std::uint64_t s : step_seeds(seed)) {
        if (marks) rt.begin_step();
        dtr_test::program_trace t =
            dtr_test::program_runner<Runtime>(rt, s, steps, invariant_period).run();
        all.reads.insert(all.reads.end(), t.reads.begin(), t.reads.end());
        all.sizes.insert(all.sizes.end(), t.sizes.begin(), t.sizes.end());
        all.floor = std::max(all.floor, t.floor);
        all.ooms += t.ooms;
        all.budget_lifts += t.budget_lifts;
        all.guard_mutations += t.guard_mutations;
        all.write_guard_rejections += t.write_guard_rejections;
        all.guards_taken += t.guards_taken;
        all.guard_reads += t.guard_reads;
        all.faults_caught += t.faults_caught;
        all.recoveries += t.recoveries;
        all.faults_suspended += t.faults_suspended;
        // The runtime's and backend's own figures are cumulative: the last run's are all.
        all.peak_resident = t.peak_resident;
        all.backend_peak = t.backend_peak;
        all.evictions = t.evictions;
        all.remats = t.remats;
        all.banishments = t.banishments;
        all.in_place_reuses = t.in_place_reuses;
        all.allocation_faults = t.allocation_faults;
        all.execution_faults = t.execution_faults;
    }
    return all;
}

struct step_totals {
    std::uint64_t forecast_calls = 0, divergences = 0, learned = 0, forecast_prefetches = 0,
                  recompute_prefetches = 0;
};

//! Where a run's victims may go: dropped only, or also to a host tier with the forecast's
//! prefetch (prefetch_ahead drawn from 1 to 16 calls; offload always, or automatic, which
//! drops the victims cheaper to recompute than to transfer).
enum class tier { none, prefetching };

template <class Heuristic>
void check_against(const dtr_test::program_trace& reference, const dtr_test::program_case& c,
                   bool marks, dtr::dealloc_policy dealloc, std::mt19937_64& budget_rng,
                   std::mt19937_64& fault_rng, dtr_test::run_totals& sum, step_totals& steps,
                   tier where = tier::none) {
    const std::size_t budget = dtr_test::draw_budget(reference, budget_rng);
    const dtr_test::run_plan plan = dtr_test::draw_plan(fault_rng);
    const bool offload = where == tier::prefetching;
    const auto ahead = static_cast<std::uint32_t>(offload ? 1 + budget_rng() % 16 : 0);
    const dtr::offload_policy policy = !offload                ? dtr::offload_policy::off
                                       : budget_rng() % 2 == 0 ? dtr::offload_policy::always
                                                               : dtr::offload_policy::automatic;
    INFO("heuristic=", std::string(Heuristic::name), " marks=", marks,
         " dealloc=", static_cast<int>(dealloc), " steps: ", describe(c.seed), " budget=", budget,
         " (reference peak ", reference.peak_resident, ", floor ", reference.floor, ") ",
         dtr_test::describe(plan), " offload=", static_cast<int>(policy),
         " prefetch_ahead=", ahead);
    using backend = dtr::fault_injecting_backend<dtr::host_backend>;
    dtr::host_backend upstream;
    // Under automatic, a tier of 1e8, 1e9 or 1e10 bytes/s: some victims are dropped
    // (recomputing them is cheaper than the copy-back) beside offloaded ones.
    const double bandwidth =
        policy == dtr::offload_policy::automatic ? std::pow(10.0, 8 + budget_rng() % 3) : 1e9;
    // A tier of half the budget: once it is full, victims are dropped beside offloaded ones,
    // and reading a dropped one recomputes it from offloaded inputs (which the prefetch
    // brings back ahead: 8 to 51 of them in 300 programs, over eleven seeds).
    if (offload)
        upstream.enable_host_tier(
            {.transfer = {.bandwidth = bandwidth, .latency = 50}, .capacity = budget / 2});
    dtr::runtime<backend, Heuristic> rt({.budget = budget,
                                         .dealloc = dealloc,
                                         .mutation = c.scope,
                                         .offload = policy,
                                         .prefetch_ahead = ahead},
                                        backend(plan.faults, std::move(upstream)));
    dtr_test::program_trace t;
    try {
        t = run_steps(rt, c.seed, c.steps, marks, plan.invariant_period);
    } catch (const std::exception& e) {
        FAIL("program failed: ", std::string(e.what()));
        return;
    }
    dtr_test::check_matches_reference(t, reference, budget);
    if (offload) CHECK(rt.stats().host_bytes == 0); // every host copy freed with its storage
    sum.add(t);
    steps.forecast_calls += rt.stats().forecast_calls;
    steps.divergences += rt.stats().step_divergences;
    steps.learned += rt.stats().steps_learned;
    steps.forecast_prefetches += rt.stats().forecast_prefetches;
    steps.recompute_prefetches += rt.stats().forecast_recompute_prefetches;
}

} // namespace

TEST_CASE("random programs read the same values under the forecast, steps repeated or not") {
    const dtr_test::property_programs programs("property test (steps)",
                                               (DTR_PROPERTY_PROGRAMS + 7) / 8);
    dtr_test::run_totals sum;
    step_totals steps;
    std::uint64_t ran = 0;
    programs.for_each([&](const dtr_test::program_case& c) {
        dtr_test::program_trace reference;
        try {
            dtr::runtime<dtr::host_backend, h::dtr_local> rt({.mutation = c.scope});
            reference = run_steps(rt, c.seed, c.steps, false, 16);
        } catch (const std::exception& e) {
            FAIL("reference run failed: ", std::string(e.what()));
            return;
        }
        REQUIRE(reference.ooms == 0);
        std::mt19937_64 budget_rng(c.seed), fault_rng(dtr_test::splitmix(c.seed));
        for (const auto dealloc :
             {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::keep_once_bound}) {
            check_against<h::dtr_next_use>(reference, c, true, dealloc, budget_rng, fault_rng, sum,
                                           steps);
            check_against<h::dtr_next_use>(reference, c, false, dealloc, budget_rng, fault_rng, sum,
                                           steps);
            check_against<h::dtr_held_next_use>(reference, c, true, dealloc, budget_rng, fault_rng,
                                                sum, steps);
            check_against<dtr::search::indexed<h::dtr_next_use>>(reference, c, true, dealloc,
                                                                 budget_rng, fault_rng, sum, steps);
            check_against<dtr::search::indexed<h::dtr_eqclass_held_next_use>>(
                reference, c, true, dealloc, budget_rng, fault_rng, sum, steps);
            check_against<dtr::search::indexed<h::dtr_next_use>>(
                reference, c, true, dealloc, budget_rng, fault_rng, sum, steps, tier::prefetching);
        }
        ++ran;
    });
    std::printf(
        "property test (steps): %llu programs, %llu budgeted runs, %llu values compared, %llu "
        "evictions, %llu rematerializations, %llu out_of_memory recovered; %llu calls ran with a "
        "forecast, %llu divergences, %llu steps learned, %llu copy-backs prefetched by the "
        "forecast (%llu of them inputs of recomputations)\n",
        static_cast<unsigned long long>(ran), static_cast<unsigned long long>(sum.runs),
        static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.evictions),
        static_cast<unsigned long long>(sum.remats), static_cast<unsigned long long>(sum.ooms),
        static_cast<unsigned long long>(steps.forecast_calls),
        static_cast<unsigned long long>(steps.divergences),
        static_cast<unsigned long long>(steps.learned),
        static_cast<unsigned long long>(steps.forecast_prefetches),
        static_cast<unsigned long long>(steps.recompute_prefetches));
    sum.print_faults("property test (steps)");
    if (!programs.single() && programs.count() >= 20) {
        // The forecast was in force, left and learned again: the test tests what it claims.
        CHECK(steps.forecast_calls > 0);
        CHECK(steps.divergences > 0);
        CHECK(steps.learned > 0);
        CHECK(steps.forecast_prefetches > 0);
        // Rarer (see the tier above): checked where there are enough programs.
        if (programs.count() >= 200) CHECK(steps.recompute_prefetches > 0);
        CHECK(sum.evictions > 0);
        CHECK(sum.remats > 0);
    }
}

namespace {

//! indexed<dtr_next_use>, checked at each decision it makes against a scan of the same pool
//! with the same context: with a forecast, the same victim as dtr_next_use alone (the
//! scan's last lowest); without, a victim of the minimum score, found by the index.
struct indexed_next_use_probe : dtr::search::indexed<h::dtr_next_use> {
    using base = dtr::search::indexed<h::dtr_next_use>;
    indexed_next_use_probe() : base(h::dtr_next_use{}) {}
    std::uint64_t with_forecast = 0, without = 0, victim_differs = 0, score_differs = 0;
    std::uint64_t evaluations_without = 0, pool_without = 0;

    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const dtr::heuristic_context& ctx) {
        using S = typename Pool::value_type;
        std::uint64_t evaluations = 0;
        const dtr::heuristic_context counted{ctx.now, ctx.metadata_accesses, &evaluations,
                                             ctx.forecast};
        S* mine = base::choose(pool, counted);
        const dtr::heuristic_context quiet{ctx.now, nullptr, nullptr, ctx.forecast};
        dtr::search::detail::last_lowest<S> scan;
        for (S& s : pool)
            if (!scan.offer(s, inner().score(s, quiet))) break;
        if (ctx.forecast != nullptr) {
            ++with_forecast;
            if (mine != scan.best()) ++victim_differs;
        } else {
            ++without;
            evaluations_without += evaluations;
            pool_without += pool.size();
        }
        if (inner().score(*mine, quiet) != scan.best_score()) ++score_differs;
        return mine;
    }
};

} // namespace

TEST_CASE("the indexed search over dtr_next_use: the index without a forecast, the scan with") {
    // Each program runs four times (marked steps), repeated or switched mid-run, at a budget
    // between its floor and its peak, under both releases.
    std::uint64_t with_forecast = 0, without = 0, evaluations = 0, pool = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        dtr_test::program_trace reference;
        {
            dtr::runtime<dtr::host_backend, h::dtr_local> rt;
            reference = run_steps(rt, seed, 120, false, 16);
        }
        std::mt19937_64 budget_rng(seed);
        for (const auto dealloc :
             {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::keep_once_bound}) {
            const std::size_t budget = dtr_test::draw_budget(reference, budget_rng);
            CAPTURE(seed);
            CAPTURE(budget);
            dtr::runtime<dtr::host_backend, indexed_next_use_probe> rt(
                {.budget = budget, .dealloc = dealloc});
            const auto t = run_steps(rt, seed, 120, true, 16);
            CHECK(t.reads == reference.reads);
            const auto& probe = rt.heuristic();
            CHECK(probe.victim_differs == 0);
            CHECK(probe.score_differs == 0);
            with_forecast += probe.with_forecast;
            without += probe.without;
            evaluations += probe.evaluations_without;
            pool += probe.pool_without;
        }
    }
    std::printf(
        "indexed:dtr_next_use: %llu decisions with a forecast (scan), %llu without "
        "(index: %.1f scores per decision, pool %.1f)\n",
        static_cast<unsigned long long>(with_forecast), static_cast<unsigned long long>(without),
        static_cast<double>(evaluations) / static_cast<double>(without),
        static_cast<double>(pool) / static_cast<double>(without));
    // Both ways were taken, and without a forecast the index scored fewer than the pool.
    CHECK(with_forecast > 100);
    CHECK(without > 100);
    CHECK(evaluations < pool);
}
