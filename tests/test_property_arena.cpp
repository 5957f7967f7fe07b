// SPDX-License-Identifier: Apache-2.0
// The property test's random programs on a fixed, fragmenting region (host_arena_backend):
// every value read must be bit-identical to an unbudgeted run on plain host memory, and the
// region, exactly as large as the budget, is the physical limit. Requests are rounded up to
// 64 bytes and placed best-fit, so the backend refuses allocations the budget allows; the
// runtime must evict and retry. Reports how fragmented the region got and how often
// fragmentation (not exhaustion) caused a refusal.
//
// Budgets are drawn as in the property test, between the program's floor and its peak, but
// in the region's terms: both scaled by the ratio of the program's physical peak (in an
// ample region) to its requested peak, since the random programs' tensors are tiny and
// rounding to 64 bytes more than doubles them.
//
// When a program cannot run at all in a region of the budget's size (a step's own inputs and
// outputs, rounded and fragmented, do not fit), the run is repeated with a 25% larger
// region; such escalations are counted and bounded.
//
// Most runs also inject faults (dtr::fault_injecting_backend around the region): refused
// allocations on top of the region's own refusals, operators throwing before or after their
// body. Steps that fail are retried (see support/random_program.hpp), and the programs keep
// pin guards across later steps and mutations, as in the property test.
//
// Environment: DTR_PROPERTY_SEED (default: random, printed), DTR_PROPERTY_PROGRAMS (default:
// the build's property_programs option), DTR_PROPERTY_ONLY=i (replay one program).
#include "support/property_harness.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/backend/host_arena.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#ifndef DTR_PROPERTY_PROGRAMS
#define DTR_PROPERTY_PROGRAMS 2000
#endif

namespace {

//! host_arena_backend that samples the region's fragmentation after every allocation
//! attempt and classifies refusals.
class sampled_arena_backend : public dtr::host_arena_backend {
public:
    struct figures {
        std::uint64_t samples = 0, refusals = 0, fragmentation_refusals = 0;
        double fragmentation_sum = 0, fragmentation_max = 0;
    };

    explicit sampled_arena_backend(std::size_t capacity) : host_arena_backend(capacity) {}
    sampled_arena_backend(sampled_arena_backend&&) noexcept = default;

    [[nodiscard]] pointer allocate(std::size_t bytes) {
        pointer p = host_arena_backend::allocate(bytes);
        const double f = layout().fragmentation();
        ++figures_.samples;
        figures_.fragmentation_sum += f;
        figures_.fragmentation_max = std::max(figures_.fragmentation_max, f);
        if (p == nullptr) {
            ++figures_.refusals;
            const std::size_t need =
                std::max<std::size_t>((bytes + alignment - 1) / alignment, 1) * alignment;
            if (layout().free_bytes() >= need) ++figures_.fragmentation_refusals;
        }
        return p;
    }

    [[nodiscard]] const figures& stats() const noexcept { return figures_; }

private:
    figures figures_;
};

static_assert(dtr::backend<sampled_arena_backend>);

struct run_result {
    dtr_test::program_trace trace;
    sampled_arena_backend::figures figures;
    std::uint64_t retries = 0;
    std::size_t peak_physical = 0;
};

using faulty_arena = dtr::fault_injecting_backend<sampled_arena_backend>;

template <class Heuristic>
run_result run_arena(std::uint64_t seed, std::size_t steps, dtr::runtime_options options,
                     std::size_t capacity, dtr_test::run_plan plan = {{}, 16}) {
    dtr::runtime<faulty_arena, Heuristic> rt(
        options, faulty_arena(plan.faults, sampled_arena_backend(capacity)));
    run_result r;
    r.trace = dtr_test::program_runner<decltype(rt)>(rt, seed, steps, plan.invariant_period).run();
    r.figures = rt.backend().upstream().stats();
    r.retries = rt.stats().allocation_retries;
    r.peak_physical = rt.backend().peak_bytes();
    rt.backend().layout().check_invariants();
    return r;
}

struct totals {
    std::uint64_t runs = 0, escalations = 0, retries = 0, refusals = 0, fragmentation_refusals = 0;
    std::uint64_t samples = 0, reads = 0, evictions = 0, remats = 0;
    double fragmentation_sum = 0, fragmentation_max = 0, run_mean_max = 0;
    double physical_over_requested_max = 0;
    dtr_test::run_totals events; //!< guards and faults
};

//! The reference's requested figures scaled to the region's: `physical_peak` is what the
//! unbudgeted program held in a region (requests rounded up, zero-byte ones taking a unit).
template <class Heuristic>
void check_against(const dtr_test::program_trace& reference, std::size_t physical_peak,
                   std::uint64_t seed, std::size_t steps, dtr::mutation_scope scope,
                   dtr::dealloc_policy dealloc, std::mt19937_64& budget_rng,
                   std::mt19937_64& fault_rng, totals& sum, const std::string& replay) {
    const double scale =
        reference.peak_resident == 0
            ? 1.0
            : static_cast<double>(physical_peak) / static_cast<double>(reference.peak_resident);
    const std::size_t hi = physical_peak;
    const std::size_t lo =
        std::min(static_cast<std::size_t>(static_cast<double>(reference.floor) * scale), hi);
    std::size_t budget = dtr_test::draw_budget(lo, hi, budget_rng);
    const dtr_test::run_plan plan = dtr_test::draw_plan(fault_rng);
    const char* policy = dealloc == dtr::dealloc_policy::eager_evict ? "eager_evict" : "banish";
    for (int attempt = 0;; ++attempt) {
        INFO(replay, " heuristic=", std::string(Heuristic::name), " dealloc=", std::string(policy),
             " region=budget=", budget, " (physical reference peak ", hi, ", scaled floor ", lo,
             ", attempt ", attempt, ") ", dtr_test::describe(plan));
        try {
            const run_result r = run_arena<Heuristic>(
                seed, steps, {.budget = budget, .dealloc = dealloc, .mutation = scope}, budget,
                plan);
            CHECK(r.trace.sizes == reference.sizes);
            CHECK(r.trace.reads == reference.reads);
            CHECK(r.trace.guard_mutations == reference.guard_mutations);
            CHECK(r.trace.write_guard_rejections == reference.write_guard_rejections);
            CHECK(r.peak_physical <= budget);
            if (r.trace.budget_lifts == 0) CHECK(r.trace.peak_resident <= budget);
            ++sum.runs;
            sum.events.add(r.trace);
            sum.retries += r.retries;
            sum.refusals += r.figures.refusals;
            sum.fragmentation_refusals += r.figures.fragmentation_refusals;
            sum.samples += r.figures.samples;
            sum.fragmentation_sum += r.figures.fragmentation_sum;
            sum.fragmentation_max = std::max(sum.fragmentation_max, r.figures.fragmentation_max);
            if (r.figures.samples != 0)
                sum.run_mean_max =
                    std::max(sum.run_mean_max,
                             r.figures.fragmentation_sum / static_cast<double>(r.figures.samples));
            if (r.trace.peak_resident != 0)
                sum.physical_over_requested_max =
                    std::max(sum.physical_over_requested_max,
                             static_cast<double>(r.peak_physical) /
                                 static_cast<double>(r.trace.peak_resident));
            sum.reads += r.trace.reads.size();
            sum.evictions += r.trace.evictions;
            sum.remats += r.trace.remats;
            return;
        } catch (const dtr::out_of_memory& e) {
            // Not even one step fits this region (rounded, fragmented): grow it and start over.
            if (attempt == 40) {
                FAIL("still out of memory after 40 larger regions: ", std::string(e.what()));
                return;
            }
            ++sum.escalations;
            budget = budget + budget / 4 + 64;
        } catch (const std::exception& e) {
            FAIL("program failed: ", std::string(e.what()));
            return;
        }
    }
}

} // namespace

TEST_CASE("random programs on a fragmenting region read exactly what the unbudgeted run reads") {
    const dtr_test::property_programs programs("arena property test", DTR_PROPERTY_PROGRAMS);
    totals sum;
    std::uint64_t ran = 0;
    programs.for_each([&](const dtr_test::program_case& c) {
        const std::uint64_t program_seed = c.seed;
        const std::size_t steps = c.steps;
        const auto scope = c.scope;
        const std::string& replay = c.replay;
        dtr_test::program_trace reference;
        try {
            dtr::runtime<dtr::host_backend> rt({.mutation = scope});
            reference = dtr_test::program_runner<decltype(rt)>(rt, program_seed, steps, 16).run();
        } catch (const std::exception& e) {
            FAIL("reference run failed: ", std::string(e.what()));
            return;
        }
        REQUIRE(reference.ooms == 0);
        // The same program in an ample region: its physical peak scales the budgets. (Sized
        // from the reference, not generously: Meson's MALLOC_PERTURB_ makes every byte of a
        // region cost a write.)
        run_result ample;
        for (std::size_t region = 2 * reference.peak_resident + (std::size_t{1} << 16);;
             region *= 2) {
            try {
                ample = run_arena<dtr::heuristics::dtr_local>(program_seed, steps,
                                                              {.mutation = scope}, region);
                break;
            } catch (const dtr::out_of_memory&) {}
        }
        CHECK(ample.trace.reads == reference.reads);
        std::mt19937_64 budget_rng(program_seed), fault_rng(dtr_test::splitmix(program_seed));
        for (auto dealloc : {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::banish}) {
            check_against<dtr::heuristics::dtr_local>(reference, ample.peak_physical, program_seed,
                                                      steps, scope, dealloc, budget_rng, fault_rng,
                                                      sum, replay);
            check_against<dtr::heuristics::lru>(reference, ample.peak_physical, program_seed, steps,
                                                scope, dealloc, budget_rng, fault_rng, sum, replay);
            check_against<dtr::heuristics::largest>(reference, ample.peak_physical, program_seed,
                                                    steps, scope, dealloc, budget_rng, fault_rng,
                                                    sum, replay);
        }
        ++ran;
    });
    const double mean =
        sum.samples == 0 ? 0 : sum.fragmentation_sum / static_cast<double>(sum.samples);
    std::printf(
        "arena property test: %llu programs, %llu runs (%llu region escalations), %llu values "
        "compared, "
        "%llu evictions, %llu rematerializations\n",
        static_cast<unsigned long long>(ran), static_cast<unsigned long long>(sum.runs),
        static_cast<unsigned long long>(sum.escalations),
        static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.evictions),
        static_cast<unsigned long long>(sum.remats));
    std::printf(
        "arena property test: fragmentation after each allocation: mean %.3f (worst run mean "
        "%.3f), max %.3f "
        "over %llu samples; %llu refusals, %llu of them with enough free bytes (fragmentation); "
        "%llu allocation retries; physical peak up to %.2fx the requested peak\n",
        mean, sum.run_mean_max, sum.fragmentation_max, static_cast<unsigned long long>(sum.samples),
        static_cast<unsigned long long>(sum.refusals),
        static_cast<unsigned long long>(sum.fragmentation_refusals),
        static_cast<unsigned long long>(sum.retries), sum.physical_over_requested_max);
    sum.events.print_faults("arena property test");
    if (!programs.single() && programs.count() >= 50) sum.events.check_events();
    if (!programs.single() && programs.count() >= 20) {
        CHECK(sum.retries > 0);
        CHECK(sum.fragmentation_refusals > 0);
        CHECK(sum.remats > 0);
    }
}
