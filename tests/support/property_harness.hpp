// SPDX-License-Identifier: Apache-2.0
// What the property tests share: how a program's seed and a budget are drawn, how a budgeted
// run is compared with the unbudgeted reference, and the environment knobs that replay a
// failure (DTR_PROPERTY_SEED, DTR_PROPERTY_PROGRAMS, DTR_PROPERTY_ONLY).
#pragma once

#include "random_program.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>

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
inline std::uint64_t program_seed(std::uint64_t seed, std::uint64_t p) { return splitmix(seed ^ splitmix(p)); }

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

//! A budgeted run must read exactly what the reference read and, unless it reported
//! out_of_memory (then recovered), never hold more than its budget.
inline void check_matches_reference(const program_trace& run, const program_trace& reference, std::size_t budget) {
    CHECK(run.sizes == reference.sizes);
    CHECK(run.reads == reference.reads);
    if (run.ooms == 0) {
        CHECK(run.peak_resident <= budget);
        CHECK(run.backend_peak <= budget);
    }
}

//! What the budgeted runs of a property test did, for its closing line.
struct run_totals {
    std::uint64_t runs = 0, evictions = 0, remats = 0, banishments = 0, ooms = 0, reads = 0;
    void add(const program_trace& t) {
        ++runs;
        evictions += t.evictions;
        remats += t.remats;
        banishments += t.banishments;
        ooms += t.ooms;
        reads += t.reads.size();
    }
};

} // namespace dtr_test
