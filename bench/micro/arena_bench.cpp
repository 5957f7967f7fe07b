// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Micro-benchmark of dtr::arena: median nanoseconds per deallocate + allocate pair in
//! steady state, for 10^2 .. 10^5 live blocks with a mixed size distribution.
//!
//! Usage: arena_bench [--csv FILE] [--json FILE] [--reps R] [--pairs K] [--seed S]
//!
//! For each live-block count N the arena is filled with N blocks, churned until its layout
//! (holes, fragmentation) stops depending on the fill order, then timed in R repetitions of K
//! pairs. One pair frees a random live block and allocates a fresh random size in its place,
//! so N stays constant. Random choices are drawn before the clock starts. The capacity is
//! twice the expected live bytes, so requests rarely fail; failures are counted and shown.
#include <dtr/arena.hpp>
#include <dtr_tools/cli.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t npos = static_cast<std::size_t>(-1);

// Tensor-like sizes: mostly small (activations of small layers, scalars, indices), a quarter
// medium, a few large. Mean about 140 KiB.
std::size_t draw_size(std::mt19937_64& rng) {
    const auto pick = [&](std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
    };
    const std::size_t p = pick(0, 99);
    if (p < 70) return pick(1, 4 * kib);
    if (p < 95) return pick(4 * kib, 256 * kib);
    return pick(256 * kib, 4 * kib * kib);
}
constexpr std::size_t mean_size = 142 * kib; // 0.7 * 2 KiB + 0.25 * 130 KiB + 0.05 * 2.1 MiB

struct row {
    std::size_t live = 0, blocks = 0, holes = 0, failures = 0;
    double fragmentation = 0, median_ns = 0, min_ns = 0, max_ns = 0;
};

row measure(std::size_t live_blocks, std::size_t reps, std::size_t pairs, std::uint64_t seed) {
    std::mt19937_64 rng(seed ^ live_blocks);
    dtr::arena a(2 * live_blocks * mean_size);
    row r;
    r.live = live_blocks;

    std::vector<std::size_t> live(live_blocks, npos);
    for (std::size_t& slot : live) slot = a.allocate(draw_size(rng)).value_or(npos);

    std::vector<std::size_t> victims(pairs), sizes(pairs);
    const auto draw_ops = [&] {
        std::uniform_int_distribution<std::size_t> slot(0, live_blocks - 1);
        for (std::size_t i = 0; i < pairs; ++i) {
            victims[i] = slot(rng);
            sizes[i] = draw_size(rng);
        }
    };
    std::size_t failures = 0;
    const auto churn = [&] {
        for (std::size_t i = 0; i < pairs; ++i) {
            std::size_t& slot = live[victims[i]];
            if (slot != npos) a.deallocate(slot);
            const std::optional<std::size_t> got = a.allocate(sizes[i]);
            slot = got.value_or(npos);
            failures += got ? 0 : 1;
        }
    };

    // Warm-up: replace every block a few times over (at least), so the layout is in steady
    // state and the node pool has reached its size.
    for (std::size_t done = 0; done < std::max<std::size_t>(3 * live_blocks, pairs);
         done += pairs) {
        draw_ops();
        churn();
    }
    failures = 0;

    std::vector<double> ns;
    for (std::size_t rep = 0; rep < reps; ++rep) {
        draw_ops();
        const auto t0 = std::chrono::steady_clock::now();
        churn();
        const auto t1 = std::chrono::steady_clock::now();
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                     static_cast<double>(pairs));
    }
    std::sort(ns.begin(), ns.end());
    r.median_ns = ns[ns.size() / 2];
    r.min_ns = ns.front();
    r.max_ns = ns.back();
    r.blocks = a.block_count();
    r.holes = a.free_block_count();
    r.fragmentation = a.fragmentation();
    r.failures = failures;
    a.check_invariants(); // the numbers mean nothing if the arena is broken
    return r;
}

} // namespace

int main(int argc, char** argv) {
    std::string csv_path, json;
    std::size_t reps = 15, pairs = 20'000;
    std::uint64_t seed = 2021;
    CLI::App app{"arena_bench: dtr::arena under deallocate + allocate pairs"};
    app.add_option("--csv", csv_path, "write the results as CSV to FILE");
    app.add_option("--json", json, "write the results as JSON to FILE");
    app.add_option("--reps", reps, "runs per cell; the median is reported")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--pairs", pairs, "deallocate + allocate pairs per run")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--seed", seed, "seed of the size draws")->capture_default_str();
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;

    std::vector<row> rows;
    std::printf(
        "dtr::arena: deallocate + allocate pairs, alignment %zu, seed %llu, "
        "%zu reps x %zu pairs\n",
        dtr::arena::default_alignment, static_cast<unsigned long long>(seed), reps, pairs);
    std::printf("%11s %9s %8s %8s %12s %9s %9s %8s\n", "live_blocks", "blocks", "holes", "frag",
                "median_ns", "min_ns", "max_ns", "failed");
    for (const std::size_t n :
         {std::size_t{100}, std::size_t{1'000}, std::size_t{10'000}, std::size_t{100'000}}) {
        const row r = measure(n, reps, pairs, seed);
        std::printf("%11zu %9zu %8zu %8.3f %12.1f %9.1f %9.1f %8zu\n", r.live, r.blocks, r.holes,
                    r.fragmentation, r.median_ns, r.min_ns, r.max_ns, r.failures);
        std::fflush(stdout);
        rows.push_back(r);
    }

    if (!csv_path.empty()) {
        std::FILE* f = std::fopen(csv_path.c_str(), "w");
        if (f == nullptr) {
            std::perror(csv_path.c_str());
            return 1;
        }
        std::fprintf(f,
                     "live_blocks,blocks,holes,fragmentation,median_ns_per_pair,min_ns,max_ns,"
                     "failed_allocations\n");
        for (const row& r : rows)
            std::fprintf(f, "%zu,%zu,%zu,%.4f,%.2f,%.2f,%.2f,%zu\n", r.live, r.blocks, r.holes,
                         r.fragmentation, r.median_ns, r.min_ns, r.max_ns, r.failures);
        std::fclose(f);
    }
    if (!json.empty()) {
        std::FILE* f = std::fopen(json.c_str(), "w");
        if (f == nullptr) {
            std::perror(json.c_str());
            return 1;
        }
        std::fprintf(f, "[\n");
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const row& r = rows[i];
            std::fprintf(
                f,
                "  {\"live_blocks\": %zu, \"blocks\": %zu, \"holes\": %zu, \"fragmentation\": "
                "%.4f, "
                "\"median_ns_per_pair\": %.2f, \"min_ns\": %.2f, \"max_ns\": %.2f, "
                "\"failed_allocations\": %zu, \"reps\": %zu, \"pairs\": %zu, \"seed\": %llu}%s\n",
                r.live, r.blocks, r.holes, r.fragmentation, r.median_ns, r.min_ns, r.max_ns,
                r.failures, reps, pairs, static_cast<unsigned long long>(seed),
                i + 1 < rows.size() ? "," : "");
        }
        std::fprintf(f, "]\n");
        std::fclose(f);
    }
    return 0;
}
