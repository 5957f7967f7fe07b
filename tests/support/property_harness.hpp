// SPDX-License-Identifier: Apache-2.0
// What the property tests share: how a program's seed, a budget and the injected faults are
// drawn, how a budgeted run is compared with the unbudgeted reference, the closing figures,
// and the environment knobs that replay a failure (DTR_PROPERTY_SEED, DTR_PROPERTY_PROGRAMS,
// DTR_PROPERTY_ONLY).
#pragma once

#include "random_program.hpp"

#include <dtr/backend/fault_injecting.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace dtr_test {

//! The unsigned integer in environment variable `name`, or `fallback` when unset or empty.
inline std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

//! SplitMix64: decorrelates the per-program seeds derived from one printed seed.
inline std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

//! Program p of the run seeded `seed`: its own seed, so DTR_PROPERTY_ONLY=p replays it alone.
inline std::uint64_t program_seed(std::uint64_t seed, std::uint64_t p) {
    return splitmix(seed ^ splitmix(p));
}

//! One random program of a property test.
struct program_case {
    std::uint64_t seed;        //!< the program's own seed (also seeds its budget draws)
    std::size_t steps;         //!< how many steps the program runs
    dtr::mutation_scope scope; //!< the mutation scope its runtimes use
    std::string replay;        //!< the environment that replays this program alone
};

//! The programs of one property test, as the environment asks: DTR_PROPERTY_SEED (default
//! random), DTR_PROPERTY_PROGRAMS (default `default_count`), DTR_PROPERTY_ONLY=p (only program
//! p). The seed is printed first, so that any failure can be replayed.
class property_programs {
public:
    property_programs(const char* label, std::uint64_t default_count)
        : seed_(env_or("DTR_PROPERTY_SEED", std::random_device{}())),
          count_(env_or("DTR_PROPERTY_PROGRAMS", default_count)),
          only_(env_or("DTR_PROPERTY_ONLY", ~0ULL)) {
        std::printf("%s: seed %llu, %llu programs (replay: DTR_PROPERTY_SEED=%llu)\n", label,
                    static_cast<unsigned long long>(seed_), static_cast<unsigned long long>(count_),
                    static_cast<unsigned long long>(seed_));
    }

    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
    //! Whether DTR_PROPERTY_ONLY picked one program (aggregate checks then mean little).
    [[nodiscard]] bool single() const noexcept { return only_ != ~0ULL; }

    //! Calls f(program_case) for each selected program, with its replay line in doctest's
    //! context (printed with any failure inside f).
    template <class F>
    void for_each(F&& f) const {
        for (std::uint64_t p = 0; p < count_; ++p) {
            if (single() && p != only_) continue;
            const std::uint64_t s = program_seed(seed_, p);
            const program_case c{
                s, 30 + s % 170,
                (s >> 20) % 2 ? dtr::mutation_scope::storage : dtr::mutation_scope::tensor,
                "DTR_PROPERTY_SEED=" + std::to_string(seed_) +
                    " DTR_PROPERTY_ONLY=" + std::to_string(p)};
            INFO(c.replay);
            f(c);
        }
    }

private:
    std::uint64_t seed_, count_, only_;
};

//! A budget drawn uniformly in [lo, hi]; lo is clamped to hi.
inline std::size_t draw_budget(std::size_t lo, std::size_t hi, std::mt19937_64& rng) {
    lo = std::min(lo, hi);
    return lo + static_cast<std::size_t>(std::uniform_real_distribution<double>(0, 1)(rng) *
                                         static_cast<double>(hi - lo));
}

//! A budget between the largest single step's footprint and the reference's peak: every
//! budget in that range can run the program, most of them only by evicting.
inline std::size_t draw_budget(const program_trace& reference, std::mt19937_64& rng) {
    return draw_budget(reference.floor, reference.peak_resident, rng);
}

//! How one budgeted run is disturbed and watched: the faults it injects, and how often it
//! checks the runtime's invariants.
struct run_plan {
    dtr::fault_options faults;
    std::size_t invariant_period = 1;
};

//! A quarter of the runs inject no fault, the others a random share of up to `max_rate` of
//! allocations refused, of executions thrown (before or after the body at random) and, on a
//! backend with a host tier, of transfers thrown, from their own seed. One run in `every_step` checks the invariants after every step, the
//! others every 16 steps (and after every step that failed): the check walks the whole graph
//! and would otherwise dominate the test's time. Drawn from `rng` with integer arithmetic
//! only, so that a printed seed replays the same plan on any platform.
inline run_plan draw_plan(std::mt19937_64& rng, double max_rate = 0.05,
                          std::uint64_t every_step = 8) {
    auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
    run_plan plan;
    plan.invariant_period = rng() % every_step == 0 ? 1 : 16;
    plan.faults.seed = rng();
    if (rng() % 4 == 0) return plan;
    plan.faults.allocation_fault_rate = max_rate * unit();
    plan.faults.execution_fault_rate = max_rate * unit();
    plan.faults.after_body_share = unit();
    plan.faults.transfer_fault_rate = max_rate * unit();
    return plan;
}

//! The plan as the replay context shows it.
inline std::string describe(const run_plan& p) {
    const dtr::fault_options& f = p.faults;
    return "faults(seed " + std::to_string(f.seed) + ", allocations " +
           std::to_string(f.allocation_fault_rate) + ", executions " +
           std::to_string(f.execution_fault_rate) + ", after body " +
           std::to_string(f.after_body_share) + ", transfers " +
           std::to_string(f.transfer_fault_rate) + "), invariants every " +
           std::to_string(p.invariant_period) + " steps";
}

//! A budgeted run must read exactly what the reference read and, unless it had to lift its
//! budget to finish (an out_of_memory without injected faults), never hold more than its
//! budget.
inline void check_matches_reference(const program_trace& run, const program_trace& reference,
                                    std::size_t budget) {
    CHECK(run.sizes == reference.sizes);
    CHECK(run.reads == reference.reads);
    CHECK(run.guard_mutations == reference.guard_mutations);
    CHECK(run.write_guard_rejections == reference.write_guard_rejections);
    if (run.budget_lifts == 0) {
        CHECK(run.peak_resident <= budget);
        CHECK(run.backend_peak <= budget);
    }
}

//! What the budgeted runs of a property test did, for its closing lines.
struct run_totals {
    std::uint64_t runs = 0, evictions = 0, remats = 0, banishments = 0, ooms = 0, reads = 0;
    std::uint64_t in_place_reuses = 0;
    std::uint64_t budget_lifts = 0, faulty_runs = 0, allocation_faults = 0, execution_faults = 0;
    std::uint64_t copy_out_faults = 0, copy_in_faults = 0;
    std::uint64_t faults_caught = 0, recoveries = 0, faults_suspended = 0;
    //! The host tier's traffic.
    std::uint64_t offloads = 0, copy_backs = 0, copies_ahead = 0, prefetches = 0;
    std::uint64_t guards = 0, guard_reads = 0, guard_mutations = 0, write_guard_rejections = 0;
    void add(const program_trace& t) {
        ++runs;
        evictions += t.evictions;
        remats += t.remats;
        banishments += t.banishments;
        in_place_reuses += t.in_place_reuses;
        ooms += t.ooms;
        reads += t.reads.size();
        budget_lifts += t.budget_lifts;
        faulty_runs +=
            (t.allocation_faults + t.execution_faults + t.copy_out_faults + t.copy_in_faults) != 0;
        allocation_faults += t.allocation_faults;
        execution_faults += t.execution_faults;
        copy_out_faults += t.copy_out_faults;
        copy_in_faults += t.copy_in_faults;
        offloads += t.offloads;
        copy_backs += t.copy_backs;
        copies_ahead += t.copies_ahead;
        prefetches += t.prefetches;
        faults_caught += t.faults_caught;
        recoveries += t.recoveries;
        faults_suspended += t.faults_suspended;
        guards += t.guards_taken;
        guard_reads += t.guard_reads;
        guard_mutations += t.guard_mutations;
        write_guard_rejections += t.write_guard_rejections;
    }

    //! The closing line on guards and faults.
    void print_faults(const char* label) const {
        auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
        std::printf(
            "%s: %llu injected faults in %llu of %llu runs (%llu allocations refused, %llu "
            "executions thrown, %llu transfers thrown: %llu out, %llu back), %llu steps "
            "recovered by retrying (%llu injected_fault, %llu out_of_memory caught; %llu needed "
            "injection stopped, %llu the budget lifted); %llu pin guards, %llu reads through "
            "them, %llu guard-across-mutation events, %llu write-guard rejections\n",
            label, u(allocation_faults + execution_faults + copy_out_faults + copy_in_faults),
            u(faulty_runs), u(runs), u(allocation_faults), u(execution_faults),
            u(copy_out_faults + copy_in_faults), u(copy_out_faults), u(copy_in_faults),
            u(recoveries), u(faults_caught), u(ooms), u(faults_suspended), u(budget_lifts),
            u(guards), u(guard_reads), u(guard_mutations), u(write_guard_rejections));
    }

    //! The closing line on the host tier (runs with runtime_options::offload).
    void print_tier(const char* label, std::uint64_t tier_runs) const {
        auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
        std::printf(
            "%s: %llu runs with a host tier: %llu offloads, %llu copy-backs (%llu of "
            "them started by a prefetch), %llu copies ahead; %llu transfers thrown by "
            "injection (%llu out, %llu back)\n",
            label, u(tier_runs), u(offloads), u(copy_backs), u(prefetches), u(copies_ahead),
            u(copy_out_faults + copy_in_faults), u(copy_out_faults), u(copy_in_faults));
    }

    //! Over a whole CI run with a host tier, every kind of transfer must have happened, and
    //! failed by injection.
    void check_tier_events() const {
        CHECK(offloads > 0);
        CHECK(copy_backs > 0);
        CHECK(copies_ahead > 0);
        CHECK(prefetches > 0);
        CHECK(copy_out_faults > 0);
        CHECK(copy_in_faults > 0);
    }

    //! Over a whole CI run every kind of event must have happened, or the test has stopped
    //! testing what it claims.
    void check_events() const {
        CHECK(allocation_faults > 0);
        CHECK(execution_faults > 0);
        CHECK(faults_caught > 0);
        CHECK(recoveries > 0);
        CHECK(guard_mutations > 0);
        CHECK(write_guard_rejections > 0);
        CHECK(guard_reads > 0);
    }
};

} // namespace dtr_test
