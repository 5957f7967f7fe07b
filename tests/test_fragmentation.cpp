// SPDX-License-Identifier: Apache-2.0
// Fragmentation-aware eviction (runtime_options::fragmentation): when the budget allows an
// allocation but no free block of an arena backend holds it, the runtime evicts the window
// of adjacent blocks whose eviction frees a large enough block at the lowest total score
// (dtr::cheapest_window), instead of evicting in heuristic order until a block appears.
//
// Arena level: the window search on hand-made and real layouts. Runtime level: a layout
// where one-by-one eviction evicts five storages and the window one; pinned storages stay;
// no window means out_of_memory at once, without evicting in vain; random programs keep
// the budget and the region and read back bit-identical values in both modes; backends
// without a layout behave exactly as before. Placement: arena::placement::high and the
// runtime's constants_high policy put constants at the top of the region.
#include "support/byte_ops.hpp"

#include <dtr/arena.hpp>
#include <dtr/backend/host_arena.hpp>
#include <dtr/backend/sim.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using dtr::tensor;
using dtr::window_block;
using namespace dtr_test;

namespace {

using kind = window_block::kind;
using arena_rt = dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru>;

window_block free_block(std::size_t offset, std::size_t size) {
    return {offset, size, kind::free, 0};
}
window_block wall(std::size_t offset, std::size_t size) { return {offset, size, kind::fixed, 0}; }
window_block live(std::size_t offset, std::size_t size, double score) {
    return {offset, size, kind::evictable, score};
}

//! Offset of `t`'s storage in the region (pinning keeps it resident meanwhile).
std::size_t offset_of(arena_rt& rt, const tensor& t) {
    auto guard = rt.pin(t);
    return static_cast<std::size_t>(guard.data().data() - rt.backend().base()) - t.offset();
}

//! A region of sixteen 64-byte units:
//!   c0 o1 c1 o2 c2 o3 c3 o4 | y1 [ ] y3 y4 [ ] y6 y7 y8
//! c* are constants (walls), o* the oldest outputs, each between two constants (or, for o4,
//! a constant and y1), y* younger outputs; y2 and y5 are evicted, leaving two one-unit
//! holes. 896 of 1024 bytes are resident, so a 128-byte request fits the budget but no hole.
//! Under LRU, one-by-one eviction takes o1, o2, o3, o4 (whose holes merge with nothing)
//! and then y1 (units 7-9 merge): five evictions. The cheapest window is y1 with the hole
//! after it: one eviction.
struct interleaved_region {
    arena_rt rt;
    std::vector<tensor> constants, old, young;
    std::uint64_t setup_evictions = 0; //!< the two explicit ones

    explicit interleaved_region(dtr::fragmentation_policy policy)
        : rt({.budget = 1024, .fragmentation = policy}, dtr::host_arena_backend(1024)) {
        for (int i = 0; i < 4; ++i) {
            constants.push_back(rt.constant(64, fill_with(static_cast<std::uint8_t>(10 * i))));
            old.push_back(rt.call(add_op{i + 1}, {constants.front()}, {.cost = 1}));
        }
        for (int i = 0; i < 8; ++i)
            young.push_back(rt.call(add_op{20 + i}, {constants.front()}, {.cost = 1}));
        REQUIRE(rt.backend().used_bytes() == 1024);
        REQUIRE(rt.evict(young[1]));
        REQUIRE(rt.evict(young[4]));
        REQUIRE(rt.resident_bytes() == 896);
        // The holes are units 9 and 12 (read from the layout: pinning to ask a tensor's
        // address would count as a use and change the LRU order).
        std::vector<std::size_t> holes;
        rt.backend().layout().for_each_block(
            [&](std::size_t offset, std::size_t size, bool is_free) {
                if (is_free) {
                    CHECK(size == 64);
                    holes.push_back(offset / 64);
                }
            });
        REQUIRE(holes == std::vector<std::size_t>{9, 12});
        setup_evictions = rt.stats().evictions;
    }
    //! Evictions since the layout was set up.
    std::uint64_t evictions() const { return rt.stats().evictions - setup_evictions; }

    void check_values() {
        for (int i = 0; i < 4; ++i) {
            CHECK(read(rt, constants[static_cast<std::size_t>(i)]) ==
                  pattern(static_cast<std::uint8_t>(10 * i)));
            CHECK(read(rt, old[static_cast<std::size_t>(i)]) == pattern(0, i + 1));
        }
        for (int i = 0; i < 8; ++i)
            CHECK(read(rt, young[static_cast<std::size_t>(i)]) == pattern(0, 20 + i));
    }

    static std::vector<std::uint8_t> pattern(std::uint8_t first, int delta = 0) {
        std::vector<std::uint8_t> v(64);
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = static_cast<std::uint8_t>(first + i + delta);
        return v;
    }
};

} // namespace

TEST_CASE("region_bytes: a request rounded up to the region's unit, saturating") {
    using dtr::detail::region_bytes;
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    CHECK(region_bytes(0, 256) == 256); // a zero-byte request takes a unit
    CHECK(region_bytes(1, 256) == 256);
    CHECK(region_bytes(256, 256) == 256);
    CHECK(region_bytes(257, 256) == 512);
    CHECK(region_bytes(7, 0) == 7); // no unit: as asked
    CHECK(region_bytes(0, 0) == 1);
    CHECK(region_bytes(max, 256) == max); // cannot round up: above every capacity
    CHECK(region_bytes(max - 10, 256) == max);
    CHECK(region_bytes(max - 255, 256) == max - 255); // already a multiple (max + 1 is)
}

TEST_CASE("cheapest_window: lowest total score among wall-free runs that span the request") {
    // [free 64][a 64, 5][b 64, 1][wall 64][c 64, 2][d 64, 2][free 64]
    const std::vector<window_block> blocks{free_block(0, 64),  live(64, 64, 5),  live(128, 64, 1),
                                           wall(192, 64),      live(256, 64, 2), live(320, 64, 2),
                                           free_block(384, 64)};
    SUBCASE("128 bytes: b with a neighbour costs more than c's free neighbour... d and the hole") {
        const auto w = dtr::cheapest_window(blocks, 128);
        REQUIRE(w.has_value());
        // Candidates: hole+a (5), a+b (6), c+d (4), d+hole (2). Cheapest: d and the hole.
        CHECK(w->first == 5);
        CHECK(w->last == 7);
        CHECK(w->offset == 320);
        CHECK(w->size == 128);
        CHECK(w->score == 2);
        CHECK(w->evictions == 1);
        CHECK(w->evicted_bytes == 64);
    }
    SUBCASE("192 bytes: the wall splits the region; each side holds exactly 192") {
        const auto w = dtr::cheapest_window(blocks, 192);
        REQUIRE(w.has_value());
        CHECK(w->offset == 256); // c+d+hole: 4 < hole+a+b: 6
        CHECK(w->score == 4);
        CHECK(w->evictions == 2);
    }
    SUBCASE("256 bytes: no run without the wall is that long") {
        CHECK_FALSE(dtr::cheapest_window(blocks, 256).has_value());
    }
    SUBCASE("a request a hole already holds costs nothing") {
        const auto w = dtr::cheapest_window(blocks, 64);
        REQUIRE(w.has_value());
        CHECK(w->score == 0);
        CHECK(w->evictions == 0);
        CHECK(w->offset == 0);
    }
}

TEST_CASE(
    "cheapest_window: ties go to fewer evictions, then fewer bytes; odd scores stay ordered") {
    SUBCASE("equal scores: the window evicting one storage beats the one evicting two") {
        const std::vector<window_block> blocks{live(0, 64, 1), live(64, 64, 0), wall(128, 64),
                                               live(192, 128, 1)};
        const auto w = dtr::cheapest_window(blocks, 128);
        REQUIRE(w.has_value());
        CHECK(w->offset == 192);
        CHECK(w->evictions == 1);
    }
    SUBCASE("a negative score counts as 0 and NaN as the most expensive") {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const std::vector<window_block> blocks{live(0, 64, nan), live(64, 64, -3),
                                               live(128, 64, 0.5)};
        const auto w = dtr::cheapest_window(blocks, 128);
        REQUIRE(w.has_value());
        CHECK(w->offset == 64);
        CHECK(w->score == 0.5);
        const auto only_nan = dtr::cheapest_window(std::vector<window_block>{live(0, 64, nan)}, 64);
        REQUIRE(only_nan.has_value());
        CHECK(std::isinf(only_nan->score));
    }
    SUBCASE("blocks that are not adjacent do not form one window") {
        const std::vector<window_block> blocks{live(0, 64, 1), live(128, 64, 1)};
        CHECK_FALSE(dtr::cheapest_window(blocks, 128).has_value());
    }
    SUBCASE("small scores next to huge ones are summed exactly, not by differences") {
        const std::vector<window_block> blocks{live(0, 64, 1e300), live(64, 64, 1e-300),
                                               free_block(128, 64)};
        const auto w = dtr::cheapest_window(blocks, 128);
        REQUIRE(w.has_value());
        CHECK(w->offset == 64);
        CHECK(w->score == 1e-300);
    }
}

TEST_CASE(
    "cheapest_window on a real arena: evicting the window leaves a block that holds the request") {
    dtr::arena a(64 * 256, 256);
    std::vector<std::size_t> offsets;
    for (int i = 0; i < 64; ++i) offsets.push_back(*a.allocate(256));
    // Free every third block: 1-unit holes everywhere, none of two units.
    for (std::size_t i = 0; i < offsets.size(); i += 3) a.deallocate(offsets[i]);
    REQUIRE(a.largest_free_block() == 256);
    REQUIRE_FALSE(a.allocate(1000).has_value());
    std::mt19937 rng(7);
    std::vector<window_block> blocks;
    a.for_each_block([&](std::size_t offset, std::size_t size, bool is_free) {
        if (is_free)
            blocks.push_back(free_block(offset, size));
        else if (offset % 7 == 0)
            blocks.push_back(wall(offset, size)); // a few walls
        else
            blocks.push_back(live(offset, size, static_cast<double>(rng() % 100)));
    });
    const auto w = dtr::cheapest_window(blocks, 1024);
    REQUIRE(w.has_value());
    // Brute force over every window agrees on the score.
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        double score = 0;
        std::size_t span = 0;
        for (std::size_t j = i; j < blocks.size() && blocks[j].what != kind::fixed; ++j) {
            span += blocks[j].size;
            if (blocks[j].what == kind::evictable) score += blocks[j].score;
            if (span >= 1024) {
                best = std::min(best, score);
                break;
            }
        }
    }
    CHECK(w->score == best);
    for (std::size_t i = w->first; i < w->last; ++i) {
        CHECK(blocks[i].what != kind::fixed);
        if (blocks[i].what == kind::evictable) a.deallocate(blocks[i].offset);
    }
    const auto placed = a.allocate(1000);
    REQUIRE(placed.has_value());
    CHECK(*placed >= w->offset);
    CHECK(*placed + 1024 <= w->offset + w->size + 256); // in the freed block (or its free tail)
    a.check_invariants();
}

TEST_CASE("runtime: one-by-one evicts five scattered storages where the window evicts one") {
    interleaved_region one(dtr::fragmentation_policy::one_by_one);
    interleaved_region win(dtr::fragmentation_policy::window);
    tensor big_one = one.rt.call(mix_op{128}, {one.constants.front()}, {.cost = 1});
    tensor big_win = win.rt.call(mix_op{128}, {win.constants.front()}, {.cost = 1});

    CHECK(one.evictions() == 5);
    CHECK(one.rt.stats().window_evictions == 0);
    CHECK(one.rt.stats().fragmented_allocations == 1);
    CHECK(one.rt.stats().allocation_retries == 5);
    for (const tensor& o : one.old) CHECK_FALSE(one.rt.is_resident(o));

    CHECK(win.evictions() == 1);
    CHECK(win.rt.stats().window_evictions == 1);
    CHECK(win.rt.stats().fragmented_allocations == 1);
    CHECK(win.rt.stats().allocation_retries == 1);
    CHECK_FALSE(win.rt.is_resident(win.young[0]));
    for (const tensor& o : win.old) CHECK(win.rt.is_resident(o));
    CHECK(offset_of(win.rt, big_win) == 8 * 64);
    CHECK(win.rt.backend().refusals() == 1);

    for (interleaved_region* r : {&one, &win}) {
        CHECK(r->rt.backend().peak_bytes() <= 1024);
        CHECK(r->rt.stats().peak_resident_bytes <= 1024);
        r->rt.check_invariants();
        r->rt.backend().layout().check_invariants();
        r->check_values(); // bit-identical after rematerializing whatever went
    }
    CHECK(read(one.rt, big_one) == read(win.rt, big_win));
}

TEST_CASE("runtime: a pinned storage is never part of a window") {
    interleaved_region win(dtr::fragmentation_policy::window);
    {
        auto hold = win.rt.pin(win.young[0]); // the cheapest window's only storage
        tensor big = win.rt.call(mix_op{128}, {win.constants.front()}, {.cost = 1});
        CHECK(win.rt.is_resident(win.young[0]));
        CHECK(win.rt.stats().window_evictions == 1);
        // Next cheapest: y3 (after the hole at unit 9) or y4 (before the hole at 12); y3 is older.
        CHECK_FALSE(win.rt.is_resident(win.young[2]));
        CHECK(offset_of(win.rt, big) == 9 * 64);
        for (const tensor& o : win.old) CHECK(win.rt.is_resident(o));
    }
    win.rt.check_invariants();
    win.check_values();
}

TEST_CASE(
    "runtime: with no window at all, out_of_memory comes at once instead of after evicting "
    "everything") {
    // c0 o1 c1 o2 c2 o3 c3 o4, each o between walls once the last unit is a constant too:
    // no two adjacent units can ever be freed together.
    for (const auto policy :
         {dtr::fragmentation_policy::window, dtr::fragmentation_policy::one_by_one}) {
        CAPTURE(static_cast<int>(policy));
        arena_rt rt({.budget = 512, .fragmentation = policy}, dtr::host_arena_backend(512));
        std::vector<tensor> constants, outs;
        for (int i = 0; i < 4; ++i) {
            constants.push_back(rt.constant(64, fill_with(static_cast<std::uint8_t>(i))));
            outs.push_back(rt.call(add_op{1}, {constants.back()}, {.cost = 1}));
        }
        REQUIRE(rt.evict(outs[0]));
        REQUIRE(rt.evict(outs[1])); // 384 of 512 resident: 128 fit the budget, no hole does
        const std::uint64_t before = rt.stats().evictions;
        CHECK_THROWS_AS((void)rt.call(mix_op{128}, {constants.front()}, {.cost = 1}),
                        dtr::out_of_memory);
        CHECK(rt.stats().fragmented_allocations == 1);
        if (policy == dtr::fragmentation_policy::window) {
            CHECK(rt.stats().evictions == before);
            CHECK(rt.is_resident(outs[2]));
            CHECK(rt.is_resident(outs[3]));
        } else {
            CHECK(rt.stats().evictions == before + 2); // both, in vain
        }
        rt.check_invariants();
        CHECK(read(rt, outs[0]) == std::vector<std::uint8_t>{[] {
                  std::vector<std::uint8_t> v(64);
                  for (std::size_t i = 0; i < v.size(); ++i)
                      v[i] = static_cast<std::uint8_t>(i + 1);
                  return v;
              }()});
    }
}

namespace {

//! A random program over `rt`: chains of mix_op calls on random earlier tensors with sizes
//! that round badly, releases, views, and reads of everything at the end. Returns the bytes
//! read, in order, for comparison across runtimes.
template <class Runtime>
std::vector<std::vector<std::uint8_t>> random_program(Runtime& rt, std::uint32_t seed,
                                                      std::size_t region) {
    std::mt19937 rng(seed);
    std::vector<tensor> live{rt.constant(65, fill_with(static_cast<std::uint8_t>(seed)))};
    const tensor w = live.front();
    std::vector<std::vector<std::uint8_t>> seen;
    for (int i = 0; i < 150; ++i) {
        const tensor in = live[rng() % live.size()];
        const std::size_t bytes = 1 + rng() % 200;
        live.push_back(
            rt.call(mix_op{bytes}, {in, w}, {.cost = 1.0 + static_cast<double>(rng() % 7)}));
        if (rng() % 8 == 0) live.push_back(rt.view(live.back(), 0, live.back().size() / 2));
        if (live.size() > 20)
            live.erase(live.begin() + 1 + static_cast<std::ptrdiff_t>(rng() % (live.size() - 1)));
        if (rng() % 10 == 0) seen.push_back(read(rt, live[rng() % live.size()]));
        if constexpr (requires { rt.backend().layout().used_bytes(); })
            CHECK(rt.backend().layout().used_bytes() <= region);
        CHECK(rt.resident_bytes() <= rt.budget());
    }
    for (const tensor& t : live) seen.push_back(read(rt, t));
    return seen;
}

} // namespace

TEST_CASE(
    "runtime: random programs keep the budget and the region and read identical values in both "
    "modes") {
    constexpr std::size_t region = 2560;
    std::uint64_t fragmented = 0, window_evictions = 0;
    for (std::uint32_t seed = 1; seed <= 30; ++seed) {
        CAPTURE(seed);
        dtr::runtime<dtr::host_backend, dtr::heuristics::dtr_local> reference;
        const auto expected = random_program(reference, seed, region);
        for (const auto policy :
             {dtr::fragmentation_policy::window, dtr::fragmentation_policy::one_by_one}) {
            CAPTURE(static_cast<int>(policy));
            dtr::runtime<dtr::host_arena_backend, dtr::heuristics::dtr_local> rt(
                {.budget = region, .fragmentation = policy}, dtr::host_arena_backend(region));
            const auto got = random_program(rt, seed, region);
            CHECK(got == expected);
            CHECK(rt.backend().peak_bytes() <= region);
            CHECK(rt.stats().peak_resident_bytes <= region);
            rt.check_invariants();
            rt.backend().layout().check_invariants();
            if (policy == dtr::fragmentation_policy::window) {
                fragmented += rt.stats().fragmented_allocations;
                window_evictions += rt.stats().window_evictions;
            } else {
                CHECK(rt.stats().window_evictions == 0);
            }
        }
    }
    // The programs must actually fragment the region, or this test proves nothing.
    CHECK(fragmented > 0);
    CHECK(window_evictions > 0);
}

TEST_CASE(
    "sim_backend: the arena takes windows; the endless address space is untouched by the option") {
    auto op = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, ctx.input(0).size()); };
    auto big = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 512); };
    SUBCASE("with an arena") {
        dtr::runtime<dtr::sim_backend, dtr::heuristics::lru> rt({.budget = 1024},
                                                                dtr::sim_backend::with_arena(1024));
        CHECK(rt.backend().has_layout());
        tensor w = rt.constant(256);
        tensor a = rt.call(op, {w}, {.cost = 1});
        tensor b = rt.call(op, {w}, {.cost = 1});
        tensor c = rt.call(op, {w}, {.cost = 1});
        REQUIRE(rt.evict(a));
        REQUIRE(rt.evict(c));
        tensor d = rt.call(big, {w}, {.cost = 1});
        CHECK(rt.stats().window_evictions == 1);
        CHECK_FALSE(rt.is_resident(b));
        CHECK(rt.backend().memory_info()->peak_used <= 1024);
        rt.check_invariants();
    }
    SUBCASE("endless, with a capacity below the budget: both policies make the same choices") {
        std::vector<dtr::counters> stats;
        for (const auto policy :
             {dtr::fragmentation_policy::window, dtr::fragmentation_policy::one_by_one}) {
            dtr::runtime<dtr::sim_backend, dtr::heuristics::lru> rt(
                {.budget = 4096, .fragmentation = policy}, dtr::sim_backend(1024));
            CHECK_FALSE(rt.backend().has_layout());
            tensor w = rt.constant(256);
            std::vector<tensor> chain;
            for (int i = 0; i < 12; ++i)
                chain.push_back(rt.call(op, {chain.empty() ? w : chain.back()}, {.cost = 1}));
            for (const tensor& t : chain) (void)rt.pin(t);
            stats.push_back(rt.stats());
        }
        CHECK(stats[0].evictions == stats[1].evictions);
        CHECK(stats[0].allocation_retries == stats[1].allocation_retries);
        CHECK(stats[0].allocation_retries > 0);
        CHECK(stats[0].window_evictions == 0);
        CHECK(stats[0].remat_cost == stats[1].remat_cost);
    }
}

TEST_CASE(
    "arena placement::high: the top of the highest hole that fits; invariants hold under churn") {
    dtr::arena a(4096, 256);
    CHECK(a.allocate(100, dtr::arena::placement::high) == std::optional<std::size_t>{3840});
    CHECK(a.allocate(100) == std::optional<std::size_t>{0});
    CHECK(a.allocate(512, dtr::arena::placement::high) == std::optional<std::size_t>{3328});
    a.deallocate(3840);
    CHECK(a.allocate(256, dtr::arena::placement::high) == std::optional<std::size_t>{3840});
    CHECK_FALSE(a.allocate(4096, dtr::arena::placement::high).has_value());
    a.check_invariants();
    std::mt19937 rng(3);
    std::vector<std::size_t> live;
    for (int i = 0; i < 5000; ++i) {
        if (live.empty() || rng() % 3 != 0) {
            const std::size_t bytes = rng() % 600;
            const auto o =
                rng() % 2 ? a.allocate(bytes, dtr::arena::placement::high) : a.allocate(bytes);
            if (o) live.push_back(*o);
        } else {
            const std::size_t k = rng() % live.size();
            a.deallocate(live[k]);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
        a.check_invariants();
    }
}

TEST_CASE(
    "runtime placement constants_high: constants from the top, the rest best-fit, same values") {
    for (const auto placement :
         {dtr::placement_policy::best_fit, dtr::placement_policy::constants_high}) {
        CAPTURE(static_cast<int>(placement));
        arena_rt rt({.budget = 1024, .placement = placement}, dtr::host_arena_backend(1024));
        tensor w = rt.constant(64, fill_with(5));
        tensor a = rt.call(add_op{1}, {w}, {.cost = 1});
        tensor v = rt.constant(64, fill_with(9));
        tensor b = rt.call(add_op{2}, {v}, {.cost = 1});
        const bool high = placement == dtr::placement_policy::constants_high;
        CHECK(offset_of(rt, w) == (high ? 960u : 0u));
        CHECK(offset_of(rt, v) == (high ? 896u : 128u));
        CHECK(offset_of(rt, a) == (high ? 0u : 64u));
        CHECK(offset_of(rt, b) == (high ? 64u : 192u));
        CHECK(read(rt, b) == std::vector<std::uint8_t>{[] {
                  std::vector<std::uint8_t> x(64);
                  for (std::size_t i = 0; i < x.size(); ++i)
                      x[i] = static_cast<std::uint8_t>(9 + i + 2);
                  return x;
              }()});
        rt.check_invariants();
        rt.backend().layout().check_invariants();
    }
}

TEST_CASE("runtime: a window's cost is its members' scores times their bytes") {
    // c0 A A c1 B [X] c2 [Y] c3 ... c10 (64-byte units; X and Y evicted). Under LRU, A (128
    // bytes, last used at 10) has a lower score than B (64 bytes, at 11), but evicting it
    // costs twice the bytes: 1280 against 704. The window is B with the hole after it.
    arena_rt rt({.budget = 1024}, dtr::host_arena_backend(1024));
    std::vector<tensor> constants{rt.constant(64, fill_with(0))};
    const tensor c0 = constants.front();
    tensor a = rt.call(mix_op{128}, {c0}, {.cost = 10});
    constants.push_back(rt.constant(64, fill_with(1)));
    tensor b = rt.call(add_op{1}, {c0}, {.cost = 1});
    tensor x = rt.call(add_op{2}, {c0}, {.cost = 1});
    constants.push_back(rt.constant(64, fill_with(2)));
    tensor y = rt.call(add_op{3}, {c0}, {.cost = 1});
    for (int i = 3; i < 11; ++i)
        constants.push_back(rt.constant(64, fill_with(static_cast<std::uint8_t>(i))));
    REQUIRE(rt.backend().used_bytes() == 1024);
    REQUIRE(rt.evict(x));
    REQUIRE(rt.evict(y));
    tensor big = rt.call(mix_op{128}, {c0}, {.cost = 1});
    CHECK(rt.stats().window_evictions == 1);
    CHECK(rt.is_resident(a));
    CHECK_FALSE(rt.is_resident(b));
    CHECK(offset_of(rt, big) == 4 * 64);
    rt.check_invariants();
}
