// SPDX-License-Identifier: Apache-2.0
// Property test of the eviction policies and search strategies: random programs run once
// without a budget, then under random budgets with each policy and strategy and both
// release policies, most runs with faults injected into the backend
// (dtr::fault_injecting_backend) and pin guards kept across later steps. A policy only
// chooses victims, so every value read must be bit-identical to the reference run, resident
// bytes must never exceed the budget, and nothing may leak.
//
// Environment: DTR_PROPERTY_SEED (default: random, printed), DTR_PROPERTY_PROGRAMS
// (default: a quarter of the build's property_programs option: this file runs eleven
// policies per program), DTR_PROPERTY_ONLY=i (replay one program).
#include "support/property_harness.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/by_name.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>

#ifndef DTR_PROPERTY_PROGRAMS
#define DTR_PROPERTY_PROGRAMS 2000
#endif

namespace {

namespace h = dtr::heuristics;
namespace search = dtr::search;

using totals = dtr_test::run_totals;

template <class Heuristic>
struct is_sampled : std::false_type {};
template <class H>
struct is_sampled<search::sampled<H>> : std::true_type {};

//! Seeded policies get the program's seed.
template <class Heuristic>
Heuristic make_policy(std::uint64_t seed) {
    if constexpr (std::is_same_v<Heuristic, h::random>)
        return Heuristic(seed);
    else if constexpr (is_sampled<Heuristic>::value)
        return Heuristic(typename Heuristic::inner_type{}, seed);
    else
        return Heuristic{};
}

template <class Heuristic>
dtr_test::program_trace run_one(std::uint64_t seed, std::size_t steps, dtr::runtime_options options,
                                dtr_test::run_plan plan = {{}, 16}) {
    using backend = dtr::fault_injecting_backend<dtr::host_backend>;
    dtr::runtime<backend, Heuristic> rt(options, backend(plan.faults),
                                        make_policy<Heuristic>(seed));
    return dtr_test::program_runner<decltype(rt)>(rt, seed, steps, plan.invariant_period).run();
}

template <class Heuristic>
void check_against(const dtr_test::program_trace& reference, std::uint64_t seed, std::size_t steps,
                   dtr::mutation_scope scope, dtr::dealloc_policy dealloc,
                   std::mt19937_64& budget_rng, std::mt19937_64& fault_rng, totals& sum) {
    const std::size_t budget = dtr_test::draw_budget(reference, budget_rng);
    const dtr_test::run_plan plan = dtr_test::draw_plan(fault_rng);
    const char* policy = dealloc == dtr::dealloc_policy::eager_evict ? "eager_evict" : "banish";
    INFO("heuristic=", std::string(Heuristic::name), " dealloc=", std::string(policy),
         " budget=", budget, " (reference peak ", reference.peak_resident, ", floor ",
         reference.floor, ") ", dtr_test::describe(plan));
    dtr_test::program_trace t;
    try {
        t = run_one<Heuristic>(seed, steps,
                               {.budget = budget, .dealloc = dealloc, .mutation = scope}, plan);
    } catch (const std::exception& e) {
        FAIL("program failed: ", std::string(e.what()));
        return;
    }
    dtr_test::check_matches_reference(t, reference, budget);
    sum.add(t);
}

} // namespace

TEST_CASE("random programs read the same values under every eviction policy and search strategy") {
    const dtr_test::property_programs programs("property test (policies)",
                                               (DTR_PROPERTY_PROGRAMS + 3) / 4);
    totals sum;
    std::uint64_t ran = 0;
    programs.for_each([&](const dtr_test::program_case& c) {
        const std::uint64_t program_seed = c.seed;
        const std::size_t steps = c.steps;
        const auto scope = c.scope;
        dtr_test::program_trace reference;
        try {
            reference = run_one<h::dtr_local>(program_seed, steps, {.mutation = scope});
        } catch (const std::exception& e) {
            FAIL("reference run failed: ", std::string(e.what()));
            return;
        }
        REQUIRE(reference.ooms == 0);
        std::mt19937_64 budget_rng(program_seed), fault_rng(dtr_test::splitmix(program_seed));
        for (auto dealloc : {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::banish}) {
            auto check = [&](auto tag) {
                check_against<typename decltype(tag)::type>(reference, program_seed, steps, scope,
                                                            dealloc, budget_rng, fault_rng, sum);
            };
            using std::type_identity;
            check(type_identity<h::dtr>{});
            check(type_identity<h::dtr_eqclass>{});
            check(type_identity<h::msps>{});
            check(type_identity<h::dtr_ancestors>{});
            check(type_identity<h::dtr_ancestors_soft>{});
            check(type_identity<search::sampled<h::dtr_ancestors_soft>>{});
            check(type_identity<h::dtr_held>{});
            check(type_identity<search::skip_small<h::dtr_held>>{});
            check(type_identity<h::dtr_held_bounded>{});
            check(type_identity<h::random>{});
            check(type_identity<h::dtr_reduced>{});
            check(type_identity<h::ablation<h::cost::none, true, true>>{});
            check(type_identity<search::sampled<h::dtr_eqclass>>{});
            check(type_identity<search::skip_small<h::dtr>>{});
            check(type_identity<search::indexed<h::dtr_eqclass>>{});
            check(type_identity<search::indexed<h::dtr>>{});
            check(type_identity<search::indexed<h::msps>>{});
            check(type_identity<search::indexed<h::dtr_ancestors>>{});
        }
        ++ran;
    });
    std::printf(
        "property test (policies): %llu programs, %llu budgeted runs, %llu values compared, %llu "
        "evictions, %llu rematerializations, %llu out_of_memory recovered\n",
        static_cast<unsigned long long>(ran), static_cast<unsigned long long>(sum.runs),
        static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.evictions),
        static_cast<unsigned long long>(sum.remats), static_cast<unsigned long long>(sum.ooms));
    sum.print_faults("property test (policies)");
    CHECK(sum.evictions > 0);
    CHECK(sum.remats > 0);
    if (!programs.single() && programs.count() >= 50) sum.check_events();
}
