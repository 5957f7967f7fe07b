// SPDX-License-Identifier: Apache-2.0
// Property test against a reference: random programs run once without a budget, then under
// random budgets with dtr_local, lru, largest and the runtime's default policy and two release
// policies, most runs with faults injected into the backend (dtr::fault_injecting_backend:
// refused allocations, operators throwing before or after their body), half of them with a
// host tier the runtime offloads to (runtime_options::offload, some copying out ahead), whose
// transfers are made to fail too. Every value read, also through pin guards kept across later
// calls and mutations, must be bit-identical to the reference run, resident bytes must never
// exceed the budget, and nothing may leak, on the device or in the host tier.
//
// Environment: DTR_PROPERTY_SEED (default: random, printed), DTR_PROPERTY_PROGRAMS
// (default: the build's property_programs option), DTR_PROPERTY_ONLY=i (replay one program).
#include "support/property_harness.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#ifndef DTR_PROPERTY_PROGRAMS
#define DTR_PROPERTY_PROGRAMS 2000
#endif

namespace {

using totals = dtr_test::run_totals;

template <class Heuristic>
dtr_test::program_trace run_one(std::uint64_t seed, std::size_t steps, dtr::runtime_options options,
                                dtr_test::run_plan plan = {{}, 16}) {
    using backend = dtr::fault_injecting_backend<dtr::host_backend>;
    dtr::host_backend device;
    // A host tier where the options offload: at 4 GB/s and 10 ns a transfer, moving a 64-byte
    // storage out and back (52 ns) is about as dear as recomputing one (1 to 100 ns), so that
    // `automatic` decides both ways.
    if (options.offload != dtr::offload_policy::off)
        device.enable_host_tier({.transfer = {.bandwidth = 4e9, .latency = 10}});
    dtr::runtime<backend, Heuristic> rt(options, backend(plan.faults, std::move(device)));
    return dtr_test::program_runner<decltype(rt)>(rt, seed, steps, plan.invariant_period).run();
}

template <class Heuristic>
void check_against(const dtr_test::program_trace& reference, std::uint64_t seed, std::size_t steps,
                   dtr::mutation_scope scope, dtr::dealloc_policy dealloc,
                   std::mt19937_64& budget_rng, std::mt19937_64& fault_rng, totals& sum,
                   std::uint64_t& tier_runs, const std::string& replay) {
    const std::size_t budget = dtr_test::draw_budget(reference, budget_rng);
    const dtr_test::run_plan plan = dtr_test::draw_plan(fault_rng);
    // Keeping released storages resident instead of evicting them changes memory, never
    // values: half the eager runs keep (drawn from the budget, as in_place below).
    // Of those, half keep only once the budget has bound (keep_once_bound).
    if (dealloc == dtr::dealloc_policy::eager_evict &&
        dtr_test::splitmix(seed ^ budget ^ 0x6b656570u) % 2)
        dealloc = dtr_test::splitmix(seed ^ budget ^ 0x6f6e6365u) % 2
                      ? dtr::dealloc_policy::keep_once_bound
                      : dtr::dealloc_policy::keep_resident;
    const bool keeps = dealloc == dtr::dealloc_policy::keep_resident ||
                       dealloc == dtr::dealloc_policy::keep_once_bound;
    const char* policy = dealloc == dtr::dealloc_policy::eager_evict       ? "eager_evict"
                         : dealloc == dtr::dealloc_policy::keep_resident   ? "keep_resident"
                         : dealloc == dtr::dealloc_policy::keep_once_bound ? "keep_once_bound"
                                                                           : "banish";
    // Kept storages first or on their scores: half each (it matters only when keeping).
    const auto kept = dtr_test::splitmix(seed ^ budget ^ 0x6b657074u) % 2
                          ? dtr::kept_priority::first
                          : dtr::kept_priority::scored;
    // Planned restores hold what their recipes read and let it go before failing: memory
    // changes, never values. Half the runs (drawn from the budget, as in_place below).
    const auto restore = dtr_test::splitmix(seed ^ budget ^ 0x706c616eu) % 2
                             ? dtr::restore_pins::planned
                             : dtr::restore_pins::yield_when_full;
    // Offload to a host tier changes where bytes wait, never values: half the runs, always or
    // automatic, half of those copying out ahead of eviction at ages 1 to 8.
    const std::uint64_t tier_draw = dtr_test::splitmix(seed ^ budget ^ 0x74696572u);
    const auto offload = tier_draw % 2 == 0          ? dtr::offload_policy::off
                         : (tier_draw >> 1) % 2 == 0 ? dtr::offload_policy::always
                                                     : dtr::offload_policy::automatic;
    const auto ahead = static_cast<std::uint32_t>(
        offload != dtr::offload_policy::off && (tier_draw >> 2) % 2 ? 1 + (tier_draw >> 3) % 8 : 0);
    INFO(replay, " heuristic=", std::string(Heuristic::name), " dealloc=", std::string(policy),
         restore == dtr::restore_pins::planned ? " restore=planned" : "",
         keeps ? (kept == dtr::kept_priority::first ? " kept=first" : " kept=scored") : "",
         " in_place=", dtr_test::splitmix(seed ^ budget) % 2 ? "reuse" : "copy",
         offload == dtr::offload_policy::off      ? ""
         : offload == dtr::offload_policy::always ? " offload=always"
                                                  : " offload=automatic",
         ahead != 0 ? " offload_ahead=" + std::to_string(ahead) : std::string(), " budget=", budget,
         " (reference peak ", reference.peak_resident, ", floor ", reference.floor, ") ",
         dtr_test::describe(plan));
    dtr_test::program_trace t;
    try {
        // Whether parameter updates stay recomputable changes memory, never values.
        const auto updates = budget_rng() % 2 ? dtr::constant_update::constant
                                              : dtr::constant_update::rematerializable;
        // Nor does writing updates into the old version's block. Drawn from the budget, not
        // from budget_rng, so that the budgets and plans drawn stay those of earlier rounds.
        const auto in_place = dtr_test::splitmix(seed ^ budget) % 2
                                  ? dtr::in_place_writes::reuse_when_unshared
                                  : dtr::in_place_writes::copy;
        t = run_one<Heuristic>(seed, steps,
                               {.budget = budget,
                                .dealloc = dealloc,
                                .kept = kept,
                                .mutation = scope,
                                .constant_updates = updates,
                                .restore = restore,
                                .offload = offload,
                                .offload_ahead = ahead,
                                .in_place = in_place},
                               plan);
    } catch (const std::exception& e) {
        FAIL("program failed: ", std::string(e.what()));
        return;
    }
    dtr_test::check_matches_reference(t, reference, budget);
    sum.add(t);
    tier_runs += offload != dtr::offload_policy::off;
}

using default_policy = dtr::default_heuristic;

} // namespace

TEST_CASE("random programs under budgets read exactly what the unbudgeted run reads") {
    const dtr_test::property_programs programs("property test", DTR_PROPERTY_PROGRAMS);
    totals sum;
    std::uint64_t ran = 0, tier_runs = 0;
    programs.for_each([&](const dtr_test::program_case& c) {
        const std::uint64_t program_seed = c.seed;
        const std::size_t steps = c.steps;
        const auto scope = c.scope;
        const std::string& replay = c.replay;
        dtr_test::program_trace reference;
        try {
            reference =
                run_one<dtr::heuristics::dtr_local>(program_seed, steps, {.mutation = scope});
        } catch (const std::exception& e) {
            FAIL("reference run failed: ", std::string(e.what()));
            return;
        }
        REQUIRE(reference.ooms == 0);
        std::mt19937_64 budget_rng(program_seed), fault_rng(dtr_test::splitmix(program_seed));
        for (auto dealloc : {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::banish}) {
            check_against<dtr::heuristics::dtr_local>(reference, program_seed, steps, scope,
                                                      dealloc, budget_rng, fault_rng, sum,
                                                      tier_runs, replay);
            check_against<dtr::heuristics::lru>(reference, program_seed, steps, scope, dealloc,
                                                budget_rng, fault_rng, sum, tier_runs, replay);
            check_against<dtr::heuristics::largest>(reference, program_seed, steps, scope, dealloc,
                                                    budget_rng, fault_rng, sum, tier_runs, replay);
            // The runtime's default (indexed:dtr_next_use). These programs repeat no step, so
            // it runs on dtr_eqclass's index here; test_property_steps covers its forecast.
            check_against<default_policy>(reference, program_seed, steps, scope, dealloc,
                                          budget_rng, fault_rng, sum, tier_runs, replay);
        }
        ++ran;
    });
    std::printf(
        "property test: %llu programs, %llu budgeted runs, %llu values compared, %llu evictions, "
        "%llu rematerializations, %llu banishments, %llu out_of_memory recovered, %llu in-place "
        "updates into the old block\n",
        static_cast<unsigned long long>(ran), static_cast<unsigned long long>(sum.runs),
        static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.evictions),
        static_cast<unsigned long long>(sum.remats),
        static_cast<unsigned long long>(sum.banishments), static_cast<unsigned long long>(sum.ooms),
        static_cast<unsigned long long>(sum.in_place_reuses));
    sum.print_faults("property test");
    sum.print_tier("property test", tier_runs);
    CHECK(sum.evictions > 0);
    CHECK(sum.remats > 0);
    CHECK(sum.in_place_reuses > 0);
    if (!programs.single() && programs.count() >= 50) {
        sum.check_events();
        sum.check_tier_events();
    }
}
