// SPDX-License-Identifier: Apache-2.0
// Offload to a host tier (runtime_options::offload, dtr::offloading_backend): the transfer
// model's clock arithmetic on sim_backend, prefetch, bit-identity on host_backend (hand-made
// programs and the property harness's random ones), constants leaving the device, the
// refusal and fault paths, the counters, and backends without the capability.
#include "support/expect.hpp"
#include "support/property_harness.hpp"

#include <dtr/backend/host_arena.hpp>
#include <dtr/heuristic/dtr.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/random.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <string>

#ifndef DTR_PROPERTY_PROGRAMS
#define DTR_PROPERTY_PROGRAMS 2000
#endif

namespace {

using dtr::cost_t;
using dtr_test::contains;
using dtr_test::logic_error_of;
using dtr_test::message_of;

// 1 byte per ns and 100 ns per transfer: a 100-byte transfer costs 200 ns.
dtr::host_tier_options slow_tier(bool overlap = true,
                                 std::size_t capacity = static_cast<std::size_t>(-1)) {
    return {
        .transfer = {.bandwidth = 1e9, .latency = 100}, .capacity = capacity, .overlap = overlap};
}

// Declares one fresh output of `bytes` bytes (sim: no data).
struct make {
    std::size_t bytes;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        ctx.output(0, bytes);
    }
};

using sim_rt = dtr::runtime<dtr::sim_backend, dtr::heuristics::lru>;

sim_rt sim_runtime(std::size_t budget, dtr::offload_policy policy,
                   dtr::host_tier_options tier = slow_tier(), std::uint32_t prefetch_ahead = 0) {
    dtr::sim_backend b;
    b.enable_host_tier(tier);
    return sim_rt({.budget = budget, .offload = policy, .prefetch_ahead = prefetch_ahead},
                  std::move(b));
}

// The prefetch_ahead tests' step has one read that waits 200 ns for a copy-back unless it was
// prefetched: with prefetch_ahead on, once the step is followed, one forecast prefetch and no
// wait; otherwise no prefetch, and the wait.
void check_step_prefetch(const sim_rt& rt, std::uint32_t ahead, bool following, cost_t waited,
                         std::uint64_t prefetched) {
    if (ahead != 0 && following) {
        CHECK(rt.stats().forecast_prefetches == prefetched + 1);
        CHECK(rt.stats().copy_back_stall == waited); // landed before it was needed
    } else {
        CHECK(rt.stats().forecast_prefetches == prefetched);
        CHECK(rt.stats().copy_back_stall == waited + 200); // it was waited for
    }
}

// Host operators on bytes: fill with a value, and add a value to every byte of an input.
struct fill {
    std::size_t bytes;
    unsigned char value;
    void operator()(dtr::op_context<dtr::host_backend>& ctx) const {
        auto out = ctx.output(0, bytes).as<unsigned char>();
        for (auto& b : out) b = value;
    }
};
struct add {
    unsigned char value;
    void operator()(dtr::op_context<dtr::host_backend>& ctx) const {
        auto in = ctx.input(0).as<unsigned char>();
        auto out = ctx.output(0, in.size()).as<unsigned char>();
        for (std::size_t i = 0; i < in.size(); ++i)
            out[i] = static_cast<unsigned char>(in[i] + value);
    }
};
struct add2 {
    void operator()(dtr::op_context<dtr::host_backend>& ctx) const {
        auto a = ctx.input(0).as<unsigned char>();
        auto b = ctx.input(1).as<unsigned char>();
        auto out = ctx.output(0, a.size()).as<unsigned char>();
        for (std::size_t i = 0; i < a.size(); ++i) out[i] = static_cast<unsigned char>(a[i] + b[i]);
    }
};

// Pins `t` (a copy-back if offloaded); whether it is then resident.
template <class Rt>
bool resident_after_pin(Rt& rt, const dtr::tensor& t) {
    auto g = rt.pin(t);
    return rt.is_resident(t);
}

template <class Rt>
unsigned char first_byte(Rt& rt, const dtr::tensor& t) {
    auto g = rt.pin(t);
    return static_cast<unsigned char>(g.template as<unsigned char>()[0]);
}

} // namespace

TEST_CASE("the concept: sim and host backends have a tier, the arena and a plain backend do not") {
    static_assert(dtr::offloading_backend<dtr::sim_backend>);
    static_assert(dtr::offloading_backend<dtr::host_backend>);
    static_assert(!dtr::offloading_backend<dtr::host_arena_backend>);
    CHECK(dtr::transfer_model{.bandwidth = 50e9, .latency = 0}.cost(50'000'000) ==
          doctest::Approx(1e6)); // 1 ms
    CHECK(dtr::transfer_model{.bandwidth = 25e9, .latency = 10}.cost(25'000) ==
          doctest::Approx(1010));
    dtr::sim_backend plain;
    CHECK_FALSE(plain.has_host_tier());
}

TEST_CASE(
    "sim: an out-copy delays the allocation that reuses its block; a copy-back stalls the read") {
    sim_rt rt = sim_runtime(200, dtr::offload_policy::always);
    dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor y = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.clock() == 2000);
    // z needs 100 bytes: x (lru) leaves by an out-copy of 200 ns, issued at 2000.
    dtr::tensor z = rt.call(make{100}, {y}, {.cost = 1000});
    CHECK(rt.is_offloaded(x));
    CHECK(rt.stats().offloads == 1);
    CHECK(rt.stats().evictions == 0);
    CHECK(rt.stats().transfer_stall == 200);
    CHECK(rt.stats().block_reuse_stall == 200); // z waited for x's block, nothing else
    CHECK(rt.stats().copy_back_stall == 0);
    CHECK(rt.clock() == 3200);
    // Reading x: its block comes from offloading y (out-copy 3200..3400), then the copy-back
    // (3400..3600); the read waits for it.
    { auto g = rt.pin(x); }
    CHECK_FALSE(rt.is_offloaded(x));
    CHECK(rt.is_resident(x));
    CHECK(rt.stats().copy_backs == 1);
    CHECK(rt.stats().offloads == 2);
    CHECK(rt.clock() == 3600);
    CHECK(rt.stats().transfer_stall == 600);
    CHECK(rt.stats().block_reuse_stall == 400); // y's out-copy freed x's new block
    CHECK(rt.stats().copy_back_stall == 200);   // the read waited for x to land
    CHECK(rt.stats().bytes_offloaded == 200);
    CHECK(rt.stats().bytes_copied_back == 100);
    CHECK(rt.stats().transfer_cost == 600);
    CHECK(rt.stats().remat_cost == 0);
    CHECK(rt.backend().tier().used_bytes() == 200); // x keeps its (clean) copy, y's is new
    rt.check_invariants();
    // x has a clean copy now: evicting it again costs no out-copy.
    CHECK(rt.evict(x));
    CHECK(rt.is_offloaded(x));
    CHECK(rt.stats().offloads_clean == 1);
    CHECK(rt.stats().bytes_offloaded == 200);
    rt.check_invariants();
}

TEST_CASE("sim: a prefetched copy-back overlaps compute; without overlap the clock waits at once") {
    for (bool prefetch : {false, true}) {
        CAPTURE(prefetch);
        sim_rt rt = sim_runtime(300, dtr::offload_policy::always);
        dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
        dtr::tensor y = rt.call(make{100}, {}, {.cost = 1000});
        CHECK(rt.evict(x)); // out-copy 2000..2200; nothing waits for it yet
        CHECK(rt.clock() == 2000);
        if (prefetch) {
            CHECK(rt.prefetch(x)); // its block waits for the out-copy: 2200; copy-back 2200..2400
            CHECK(rt.clock() == 2200);
            CHECK(rt.stats().prefetches == 1);
        }
        dtr::tensor w = rt.call(make{100}, {y}, {.cost = 1000});
        dtr::tensor v = rt.call(make{0}, {x}, {.cost = 1000});
        if (prefetch) {
            CHECK(rt.clock() == 4200); // 2200 + 1000 + 1000, the copy-back hidden
            CHECK(rt.stats().transfer_stall == 200);
            CHECK(rt.stats().copy_back_stall == 0); // only the block's wait is left
            CHECK(rt.stats().block_reuse_stall == 200);
        } else {
            // w waits for the out-copy (2200) and runs to 3200, the copy-back runs 3200..3400.
            CHECK(rt.clock() == 4400);
            CHECK(rt.stats().transfer_stall == 400);
            CHECK(rt.stats().copy_back_stall == 200);
            CHECK(rt.stats().block_reuse_stall == 200);
        }
        rt.check_invariants();
    }
    // No overlap: the prefetch itself waits for its copy-back.
    sim_rt rt = sim_runtime(300, dtr::offload_policy::always, slow_tier(false));
    dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.evict(x));
    CHECK(rt.prefetch(x));
    CHECK(rt.clock() == 1400);
    // The prefetch's block waited for x's out-copy, then the clock for the copy-back.
    CHECK(rt.stats().block_reuse_stall == 200);
    CHECK(rt.stats().copy_back_stall == 200);
    // Nothing to prefetch: resident, or no room without evicting.
    CHECK_FALSE(rt.prefetch(x));
}

TEST_CASE("sim: automatic offloads a victim when two transfers cost less than recomputing it") {
    // 100 bytes: two transfers cost 400 ns. x costs 1000 (offloaded), y 300 (dropped).
    sim_rt rt = sim_runtime(200, dtr::offload_policy::automatic);
    dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor y = rt.call(make{100}, {}, {.cost = 300});
    dtr::tensor z = rt.call(make{100}, {y}, {.cost = 10});
    CHECK(rt.is_offloaded(x));
    dtr::tensor w = rt.call(make{100}, {z}, {.cost = 10}); // y is the lru victim now
    CHECK_FALSE(rt.is_offloaded(y));
    CHECK_FALSE(rt.is_resident(y));
    CHECK(rt.stats().offloads == 1);
    CHECK(rt.stats().evictions == 1);
    // Off: nothing is offloaded even with a tier.
    sim_rt off = sim_runtime(200, dtr::offload_policy::off);
    dtr::tensor a = off.call(make{100}, {}, {.cost = 1000});
    dtr::tensor b = off.call(make{100}, {}, {.cost = 1000});
    dtr::tensor c = off.call(make{100}, {b}, {.cost = 1000});
    CHECK_FALSE(off.is_offloaded(a));
    CHECK(off.stats().offloads == 0);
    CHECK(off.stats().evictions == 1);
    CHECK(off.clock() == 3000);
}

TEST_CASE("sim: a full host tier drops the victim instead") {
    sim_rt rt = sim_runtime(200, dtr::offload_policy::always, slow_tier(true, 150));
    dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor y = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor z = rt.call(make{100}, {y}, {.cost = 1000});
    CHECK(rt.is_offloaded(x));
    dtr::tensor w = rt.call(make{100}, {z}, {.cost = 1000}); // y: no room for 100 more
    CHECK_FALSE(rt.is_offloaded(y));
    CHECK(rt.stats().evictions == 1);
    CHECK(rt.backend().tier().used_bytes() == 100);
    rt.check_invariants();
}

TEST_CASE("a kept storage chosen as victim is dropped, not copied out, even under always") {
    // keep_resident: a is released while b's record reads it, so it stays resident, and
    // kept_priority::first makes it the first victim. Nobody holds it: only a recomputation
    // of b can read it again, so a transfer would buy nothing.
    dtr::sim_backend backend;
    backend.enable_host_tier(slow_tier());
    sim_rt rt({.budget = 300,
               .dealloc = dtr::dealloc_policy::keep_resident,
               .offload = dtr::offload_policy::always},
              std::move(backend));
    dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor b = rt.call(make{100}, {a}, {.cost = 1000});
    a.reset();
    dtr::tensor c = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.resident_bytes() == 300);
    dtr::tensor d = rt.call(make{100}, {}, {.cost = 1000}); // one victim: the kept a
    CHECK(rt.stats().evictions == 1);
    CHECK(rt.stats().offloads == 0);
    CHECK(rt.backend().tier().used_bytes() == 0);
    CHECK(rt.is_resident(b));
    CHECK(rt.is_resident(c));
    // The next victim is held: copied out, as `always` says.
    dtr::tensor e = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.stats().offloads == 1);
    CHECK(rt.backend().tier().used_bytes() == 100);
    rt.check_invariants();
}

TEST_CASE("a prefetch makes room from kept storages only, and only when they suffice") {
    // 300-byte budget, keep_resident: a is released while b's record reads it, so it is
    // kept. x (100 bytes) and z (200) are offloaded; b, c and the kept a fill the budget.
    for (auto kept : {dtr::kept_priority::first, dtr::kept_priority::scored}) {
        CAPTURE(static_cast<int>(kept));
        dtr::sim_backend backend;
        backend.enable_host_tier(slow_tier());
        sim_rt rt({.budget = 300,
                   .dealloc = dtr::dealloc_policy::keep_resident,
                   .kept = kept,
                   .offload = dtr::offload_policy::always},
                  std::move(backend));
        dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
        CHECK(rt.evict(x));
        dtr::tensor z = rt.call(make{200}, {}, {.cost = 1000});
        CHECK(rt.evict(z));
        dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
        dtr::tensor b = rt.call(make{100}, {a}, {.cost = 1000});
        a.reset();
        dtr::tensor c = rt.call(make{100}, {}, {.cost = 1000});
        CHECK(rt.resident_bytes() == 300);
        const auto evictions = rt.stats().evictions;
        // z needs 200 bytes and the kept storages hold 100: nothing leaves.
        CHECK_FALSE(rt.prefetch(z));
        CHECK(rt.resident_bytes() == 300);
        CHECK(rt.stats().evictions == evictions);
        // x needs 100: under kept-first the kept a is dropped for it; under scored kept
        // storages are not the next victims, so a hint evicts nothing.
        const bool first = kept == dtr::kept_priority::first;
        CHECK(rt.prefetch(x) == first);
        CHECK(rt.is_resident(x) == first);
        CHECK(rt.stats().evictions == evictions + (first ? 1 : 0));
        CHECK(rt.is_resident(b));
        CHECK(rt.is_resident(c));
        CHECK(rt.resident_bytes() == 300);
        // Nothing kept is left: a held storage never leaves for a hint.
        CHECK(rt.evict(c));
        dtr::tensor d = rt.call(make{100}, {}, {.cost = 1000});
        CHECK_FALSE(rt.prefetch(c));
        CHECK(rt.is_resident(d));
        rt.check_invariants();
    }
    // A heuristic with its own choose might name a held storage: a hint evicts nothing.
    dtr::sim_backend backend;
    backend.enable_host_tier(slow_tier());
    dtr::runtime<dtr::sim_backend, dtr::heuristics::random> rt(
        {.budget = 300,
         .dealloc = dtr::dealloc_policy::keep_resident,
         .offload = dtr::offload_policy::always},
        std::move(backend));
    dtr::tensor x = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.evict(x));
    dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
    dtr::tensor b = rt.call(make{100}, {a}, {.cost = 1000});
    a.reset();
    dtr::tensor c = rt.call(make{100}, {}, {.cost = 1000});
    CHECK(rt.resident_bytes() == 300);
    CHECK_FALSE(rt.prefetch(x));
    CHECK(rt.resident_bytes() == 300);
    CHECK(rt.stats().evictions == 0);
    rt.check_invariants();
}

TEST_CASE("a prefetch gives up where the backend refuses its block: nothing held leaves") {
    SUBCASE("a backend smaller than the budget") {
        // The backend holds 250 bytes, the budget 1000: the budget's arithmetic has room for
        // x beside y and z, the backend has not.
        dtr::host_backend b(250);
        b.enable_host_tier({});
        dtr::runtime<dtr::host_backend, dtr::heuristics::lru> rt(
            {.budget = 1000, .offload = dtr::offload_policy::always}, std::move(b));
        dtr::tensor x = rt.call(fill{100, 5}, {}, {.cost = 10});
        CHECK(rt.evict(x));
        dtr::tensor y = rt.call(fill{100, 6}, {}, {.cost = 10});
        dtr::tensor z = rt.call(fill{100, 7}, {}, {.cost = 10});
        CHECK_FALSE(rt.prefetch(x));
        CHECK(rt.is_offloaded(x));
        CHECK(rt.is_resident(y));
        CHECK(rt.is_resident(z));
        CHECK(rt.stats().offloads == 1);
        CHECK(rt.stats().evictions == 0);
        CHECK(rt.stats().prefetches == 0);
        rt.check_invariants();
        // The read itself makes room as any allocation does.
        CHECK(first_byte(rt, x) == 5);
        CHECK(first_byte(rt, y) == 6);
        CHECK(first_byte(rt, z) == 7);
        rt.check_invariants();
    }
    SUBCASE("a fragmented region") {
        // 320 bytes in 64-byte units: a | x x | c | d. x leaves, e takes half its hole, d is
        // released: 128 bytes free, in two holes of 64, where x needs 128.
        dtr::sim_backend b = dtr::sim_backend::with_arena(320, 64);
        b.enable_host_tier(slow_tier());
        sim_rt rt({.budget = 1000, .offload = dtr::offload_policy::always}, std::move(b));
        dtr::tensor a = rt.call(make{64}, {}, {.cost = 1000});
        dtr::tensor x = rt.call(make{128}, {}, {.cost = 1000});
        dtr::tensor c = rt.call(make{64}, {}, {.cost = 1000});
        dtr::tensor d = rt.call(make{64}, {}, {.cost = 1000});
        CHECK(rt.evict(x));
        dtr::tensor e = rt.call(make{64}, {}, {.cost = 1000});
        d.reset();
        REQUIRE(rt.backend().memory_info()->free == 128);
        REQUIRE(rt.backend().memory_info()->largest_free == 64);
        CHECK_FALSE(rt.prefetch(x));
        CHECK(rt.is_offloaded(x));
        for (const dtr::tensor* held : {&a, &c, &e}) CHECK(rt.is_resident(*held));
        CHECK(rt.stats().window_evictions == 0);
        CHECK(rt.stats().offloads == 1);
        rt.check_invariants();
        CHECK(resident_after_pin(rt, x)); // a read evicts a window for it
        rt.check_invariants();
    }
}

TEST_CASE("sim: a storage copied out ahead of eviction later leaves without waiting") {
    // 250-byte budget; a 100-byte transfer takes 200 ns. With offload_ahead = 1, once b is
    // made (150 bytes resident, over half the budget) a has outlived one newer storage and
    // is copied out ahead (2000..2200). c needs a's block at 2500: without the copy ahead,
    // a's out-copy starts then and c's allocation waits 200 ns for it.
    for (std::uint32_t ahead : {0u, 1u}) {
        CAPTURE(ahead);
        dtr::sim_backend backend;
        backend.enable_host_tier(slow_tier());
        sim_rt rt(
            {.budget = 250, .offload = dtr::offload_policy::automatic, .offload_ahead = ahead},
            std::move(backend));
        dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
        CHECK(rt.stats().copies_ahead == 0); // 100 bytes: not over half the budget
        dtr::tensor b = rt.call(make{50}, {}, {.cost = 1000});
        CHECK(rt.stats().copies_ahead == ahead);
        CHECK(rt.is_resident(a)); // a copy ahead leaves the storage where it is
        rt.call_n(0, [](auto&) {}, {}, {.cost = 500});          // 500 ns of compute, no output
        dtr::tensor c = rt.call(make{150}, {}, {.cost = 1000}); // evicts a (lru)
        CHECK(rt.is_offloaded(a));
        CHECK(rt.stats().offloads_clean == ahead);
        CHECK(rt.stats().offloads == 1 - ahead);
        CHECK(rt.stats().transfer_stall == (ahead ? 0 : 200));
        CHECK(rt.clock() == (ahead ? 3500 : 3700));
        rt.check_invariants();
        if (ahead != 0) {
            // b was copied ahead after c ran (3500..3650). Reading a evicts b: its block is
            // reusable once that copy has read it (3650), then a comes back (3650..3850).
            CHECK(rt.stats().copies_ahead == 2);
            CHECK(resident_after_pin(rt, a));
            CHECK(rt.is_offloaded(b));
            CHECK(rt.clock() == 3850);
            CHECK(rt.stats().transfer_stall == 350);
            CHECK(rt.stats().offloads_clean == 2);
        }
    }
}

TEST_CASE("offload_ahead: nothing below half the budget, nothing young, nothing cheap to redo") {
    dtr::sim_backend backend;
    backend.enable_host_tier(slow_tier());
    sim_rt rt({.budget = 1000, .offload = dtr::offload_policy::automatic, .offload_ahead = 1},
              std::move(backend));
    dtr::tensor a = rt.call(make{200}, {}, {.cost = 100});
    CHECK(rt.stats().copies_ahead == 0); // 200 of 1000: below half
    dtr::tensor b = rt.call(make{400}, {}, {.cost = 10'000});
    // 600 bytes: b is the newest (not yet outlived one), and a's 300 ns copy-back would cost
    // more than its 100 ns recomputation.
    CHECK(rt.stats().copies_ahead == 0);
    // Two more storages: of the older ones, the largest worth it (b) is copied.
    auto c = rt.call<2>(
        [](auto& ctx) {
            ctx.output(0, 50);
            ctx.output(1, 100);
        },
        {}, {.cost = 10'000});
    CHECK(rt.stats().copies_ahead == 1);
    CHECK(rt.backend().tier().used_bytes() == 400);
    CHECK(rt.clock() == 20'100);
    rt.check_invariants();
    // Freeing b frees its host copy, but its block is reusable only once the copy in flight
    // (20'100..20'600) has read it: the next allocation waits.
    b.reset();
    CHECK(rt.backend().tier().used_bytes() == 0);
    CHECK(rt.stats().host_bytes == 0);
    dtr::tensor d = rt.call(make{10}, {}, {.cost = 1});
    CHECK(rt.stats().transfer_stall == 500);
    CHECK(rt.clock() == 20'601);
}

TEST_CASE(
    "copy_back_charge: a storage with a host copy leaves by transfer when its charged "
    "copy-back is below recomputing it") {
    // a's copy-back takes 200 ns and recomputing it 150: charged in full it is worth neither
    // a copy ahead nor a transfer when evicted (dropped); charged half (100 ns) it is copied
    // ahead once b is made, and leaves with that copy when c needs its block.
    for (double charge : {1.0, 0.5}) {
        CAPTURE(charge);
        dtr::sim_backend backend;
        backend.enable_host_tier(slow_tier());
        sim_rt rt({.budget = 250,
                   .offload = dtr::offload_policy::automatic,
                   .offload_ahead = 1,
                   .copy_back_charge = charge},
                  std::move(backend));
        dtr::tensor a = rt.call(make{100}, {}, {.cost = 150});
        dtr::tensor b = rt.call(make{50}, {}, {.cost = 1000});
        const bool half = charge < 1;
        CHECK(rt.stats().copies_ahead == (half ? 1 : 0));
        rt.call_n(0, [](auto&) {}, {}, {.cost = 500});          // lets the copy finish
        dtr::tensor c = rt.call(make{150}, {}, {.cost = 1000}); // evicts a (lru)
        CHECK(rt.is_offloaded(a) == half);
        CHECK(rt.is_resident(a) == false);
        CHECK(rt.stats().offloads_clean == (half ? 1 : 0));
        CHECK(rt.stats().offloads == 0);
        CHECK(rt.stats().evictions == (half ? 0 : 1));
        CHECK(rt.stats().transfer_stall == 0);
        CHECK(resident_after_pin(rt, a)); // back by copy (half) or by recomputation
        CHECK(rt.stats().copy_backs == (half ? 1 : 0));
        CHECK(rt.stats().rematerializations == (half ? 0 : 1));
        rt.check_invariants();
    }
    // Outside (0, inf) the constructor refuses it.
    for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::quiet_NaN()}) {
        CAPTURE(bad);
        dtr::sim_backend tiered;
        tiered.enable_host_tier(slow_tier());
        CHECK_THROWS_WITH_AS(
            sim_rt(
                {.budget = 250, .offload = dtr::offload_policy::automatic, .copy_back_charge = bad},
                std::move(tiered)),
            doctest::Contains("copy_back_charge must be finite and > 0"), dtr::logic_error);
    }
}

TEST_CASE("offload_ahead on a backend that cannot copy ahead is refused at construction") {
    CHECK_THROWS_WITH_AS(
        (dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru>(
            {.budget = 256, .offload = dtr::offload_policy::always, .offload_ahead = 4},
            dtr::host_arena_backend(256))),
        doctest::Contains("offload_ahead needs a backend that copies out ahead"), dtr::logic_error);
    static_assert(dtr::copying_ahead_backend<dtr::sim_backend>);
    static_assert(dtr::copying_ahead_backend<dtr::host_backend>);
    static_assert(!dtr::copying_ahead_backend<dtr::host_arena_backend>);
}

TEST_CASE("prefetch_ahead: from the second step, what the next calls read starts home unasked") {
    // 300-byte budget; a 100-byte transfer takes 200 ns, a call 1000. Each step makes a, reads
    // it in b, offloads it (the program's evict: the victim's copy runs while b's readers
    // compute), runs four calls that read b, then one that reads a. Without a hint the read
    // of a waits for its copy-back; with prefetch_ahead = 2 the runtime, following the step it
    // recorded, starts it two calls ahead, and the read finds it home.
    for (const std::uint32_t ahead : {0U, 2U}) {
        CAPTURE(ahead);
        sim_rt rt = sim_runtime(300, dtr::offload_policy::always, slow_tier(), ahead);
        for (int step = 0; step < 3; ++step) {
            CAPTURE(step);
            rt.begin_step();
            const cost_t waited = rt.stats().copy_back_stall;
            const std::uint64_t prefetched = rt.stats().forecast_prefetches;
            dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
            dtr::tensor x = rt.call(make{100}, {a}, {.cost = 1000});
            REQUIRE(rt.evict(a));
            REQUIRE(rt.is_offloaded(a));
            for (int k = 0; k < 4; ++k) (void)rt.call(make{0}, {x}, {.cost = 1000});
            (void)rt.call(make{0}, {a}, {.cost = 1000});
            const bool following = step > 0; // the step is learned at the second mark
            CHECK(rt.step_state().following == following);
            check_step_prefetch(rt, ahead, following, waited, prefetched);
            rt.check_invariants();
        }
        CHECK(rt.stats().peak_resident_bytes <= 300);
        CHECK(rt.stats().prefetches == rt.stats().forecast_prefetches);
    }
}

TEST_CASE(
    "prefetch_ahead: the offloaded input of a dropped storage the step reads starts home "
    "before its recomputation needs it") {
    // Each step makes a, computes y from it, offloads a and drops y (no host copy: reading y
    // recomputes it from a), runs four calls that read x, then one that reads y. The forecast
    // knows no read of a itself (only y's recipe reads it), so only the walk up from y, a
    // dropped storage the step reads, finds it. Without the prefetch the recomputation waits
    // for a's copy-back; with prefetch_ahead = 2 a lands before y's read.
    for (const std::uint32_t ahead : {0U, 2U}) {
        CAPTURE(ahead);
        sim_rt rt = sim_runtime(300, dtr::offload_policy::always, slow_tier(), ahead);
        dtr::tensor x = rt.constant(100);
        for (int step = 0; step < 3; ++step) {
            CAPTURE(step);
            rt.begin_step();
            const cost_t waited = rt.stats().copy_back_stall;
            const std::uint64_t prefetched = rt.stats().forecast_prefetches;
            const std::uint64_t remats = rt.stats().rematerializations;
            dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
            dtr::tensor y = rt.call(make{100}, {a}, {.cost = 1000});
            REQUIRE(rt.evict(a));
            REQUIRE(rt.is_offloaded(a));
            REQUIRE(rt.drop(y));
            REQUIRE_FALSE(rt.is_offloaded(y));
            for (int k = 0; k < 4; ++k) (void)rt.call(make{0}, {x}, {.cost = 1000});
            (void)rt.call(make{0}, {y}, {.cost = 1000});
            CHECK(rt.stats().rematerializations == remats + 1); // y, from a
            const bool following = step > 0;
            CHECK(rt.step_state().following == following);
            check_step_prefetch(rt, ahead, following, waited, prefetched);
            rt.check_invariants();
        }
        CHECK(rt.stats().peak_resident_bytes <= 300);
    }
}

TEST_CASE("prefetch_ahead: the walk up from a dropped storage stops at an offloaded input") {
    // q, p from q, y from p; q and p offloaded, y dropped; y read four calls later. Recomputing
    // y copies p back, and p's own input q is not read (p is not recomputed): only p is
    // prefetched for y.
    sim_rt rt = sim_runtime(400, dtr::offload_policy::always, slow_tier(), 8);
    dtr::tensor x = rt.constant(100);
    for (int step = 0; step < 3; ++step) {
        CAPTURE(step);
        rt.begin_step();
        const std::uint64_t before = rt.stats().forecast_recompute_prefetches;
        dtr::tensor q = rt.call(make{100}, {}, {.cost = 1000});
        dtr::tensor p = rt.call(make{100}, {q}, {.cost = 1000});
        dtr::tensor y = rt.call(make{100}, {p}, {.cost = 1000});
        REQUIRE(rt.evict(q));
        REQUIRE(rt.evict(p));
        REQUIRE(rt.drop(y));
        for (int k = 0; k < 4; ++k) (void)rt.call(make{0}, {x}, {.cost = 1000});
        (void)rt.call(make{0}, {y}, {.cost = 1000});
        CHECK(rt.stats().forecast_recompute_prefetches == before + (step > 0 ? 1 : 0));
        CHECK(rt.is_offloaded(q));
        rt.check_invariants();
    }
}

TEST_CASE(
    "prefetch_ahead: off the recorded step nothing starts; what waited for a prefetch and "
    "is freed is forgotten") {
    // Each step makes a and x from it, and offloads a. The step reads at its end either a
    // itself (a waits in the prefetch queue), or x, dropped (x waits in the map of storages
    // whose recomputation reads offloaded inputs). Four calls that read the constant c come
    // between. A divergent step (a call the step does not have, of another size) never comes
    // to that read: the storage waiting for it is released with its host copy and its place.
    for (const bool via_recompute : {false, true}) {
        CAPTURE(via_recompute);
        sim_rt rt = sim_runtime(300, dtr::offload_policy::always, slow_tier(), 8);
        dtr::tensor c = rt.constant(100);
        auto step = [&](bool diverge) {
            rt.begin_step();
            dtr::tensor a = rt.call(make{100}, {}, {.cost = 1000});
            dtr::tensor x = rt.call(make{100}, {a}, {.cost = 1000});
            REQUIRE(rt.evict(a));
            if (via_recompute) REQUIRE(rt.drop(x));
            rt.check_invariants();
            if (diverge) (void)rt.call(make{50}, {c}, {.cost = 1000});
            for (int k = 0; k < 4; ++k) (void)rt.call(make{0}, {c}, {.cost = 1000});
            if (!diverge) (void)rt.call(make{0}, {via_recompute ? x : a}, {.cost = 1000});
        };
        step(false);
        step(false);
        const std::uint64_t prefetched = rt.stats().forecast_prefetches;
        CHECK(prefetched == 1);
        CHECK(rt.stats().forecast_recompute_prefetches == (via_recompute ? 1 : 0));
        step(true);
        CHECK_FALSE(rt.step_state().following);
        CHECK(rt.stats().forecast_prefetches == prefetched);
        rt.check_invariants();
        CHECK(rt.stats().host_bytes == 0);
        // Back on the step: learned again at the next marks, prefetched again.
        step(false);
        step(false);
        step(false);
        CHECK(rt.stats().forecast_prefetches > prefetched);
        CHECK(rt.stats().host_bytes == 0);
        rt.check_invariants();
    }
}

TEST_CASE("prefetch_ahead on a backend without a host tier is refused at construction") {
    CHECK_THROWS_WITH_AS((dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru>(
                             {.budget = 256, .prefetch_ahead = 4}, dtr::host_arena_backend(256))),
                         doctest::Contains("prefetch_ahead needs a backend with a host tier"),
                         dtr::logic_error);
}

TEST_CASE("host: offloaded storages come back bit for bit, constants too") {
    for (auto policy : {dtr::offload_policy::always, dtr::offload_policy::automatic}) {
        CAPTURE(static_cast<int>(policy));
        dtr::host_backend b;
        b.enable_host_tier({.transfer = {.bandwidth = 1e12, .latency = 0}});
        dtr::runtime<dtr::host_backend, dtr::heuristics::dtr_local> rt(
            {.budget = 300, .offload = policy}, std::move(b));
        dtr::tensor c1 = rt.constant(100, [](auto v) { std::memset(v.data(), 7, v.size()); });
        dtr::tensor c2 = rt.constant(100, [](auto v) { std::memset(v.data(), 9, v.size()); });
        dtr::tensor a = rt.call(add{1}, {c1}, {.cost = 1e6});
        dtr::tensor d = rt.call(add{2}, {c2}, {.cost = 1e6});
        // Nothing but constants and a, d resident: a third output needs a constant to leave.
        dtr::tensor e = rt.call(add2{}, {a, d}, {.cost = 1e6});
        CHECK(rt.stats().constant_offloads >= 1);
        rt.check_invariants();
        dtr::tensor f = rt.call(add2{}, {c1, c2}, {.cost = 1e6});
        CHECK(first_byte(rt, a) == 8);
        CHECK(first_byte(rt, d) == 11);
        CHECK(first_byte(rt, e) == 19);
        CHECK(first_byte(rt, f) == 16);
        CHECK(first_byte(rt, c1) == 7);
        CHECK(first_byte(rt, c2) == 9);
        CHECK(rt.stats().copy_backs >= 1);
        CHECK(rt.resident_bytes() <= 300);
        rt.check_invariants();
    }
}

TEST_CASE(
    "offload_constants = false keeps constants on the device; the budget then fails "
    "cleanly and is retried") {
    dtr::host_backend b;
    b.enable_host_tier({.transfer = {.bandwidth = 1e12, .latency = 0}});
    dtr::runtime<dtr::host_backend, dtr::heuristics::dtr_local> rt(
        {.budget = 300, .offload = dtr::offload_policy::always, .offload_constants = false},
        std::move(b));
    dtr::tensor c1 = rt.constant(100, [](auto v) { std::memset(v.data(), 7, v.size()); });
    dtr::tensor c2 = rt.constant(100, [](auto v) { std::memset(v.data(), 9, v.size()); });
    dtr::tensor a = rt.call(add{1}, {c1}, {.cost = 1e6});
    dtr::tensor d = rt.call(add{2}, {c2}, {.cost = 1e6});
    CHECK(rt.stats().offloads >= 1); // computed storages still leave by transfer
    // a, d and e beside both constants need 500 bytes: the case above lets a constant leave.
    CHECK_THROWS_AS(rt.call(add2{}, {a, d}, {.cost = 1e6}), dtr::out_of_memory);
    CHECK(rt.stats().constant_offloads == 0);
    rt.check_invariants();
    rt.set_budget(500);
    dtr::tensor e = rt.call(add2{}, {a, d}, {.cost = 1e6});
    CHECK(first_byte(rt, e) == 19);
    CHECK(first_byte(rt, c1) == 7);
    CHECK(rt.stats().constant_offloads == 0);
    rt.check_invariants();
}

TEST_CASE(
    "allow_offload lets one constant leave under offload_constants = false, and its updated "
    "versions after it") {
    auto make_runtime = [](std::size_t budget) {
        dtr::host_backend b;
        b.enable_host_tier({.transfer = {.bandwidth = 1e12, .latency = 0}});
        return std::make_unique<dtr::runtime<dtr::host_backend, dtr::heuristics::dtr_local>>(
            dtr::runtime_options{.budget = budget,
                                 .offload = dtr::offload_policy::always,
                                 .offload_constants = false},
            std::move(b));
    };
    auto increment = [](dtr::op_context<dtr::host_backend>& ctx) {
        auto io = ctx.inout(0).as<unsigned char>();
        for (auto& x : io) x = static_cast<unsigned char>(x + 1);
    };
    SUBCASE("allowed") {
        auto rt = make_runtime(400);
        dtr::tensor c1 = rt->constant(100, [](auto v) { std::memset(v.data(), 7, v.size()); });
        dtr::tensor c2 = rt->constant(100, [](auto v) { std::memset(v.data(), 9, v.size()); });
        CHECK_FALSE(rt->offload_allowed(c2));
        rt->allow_offload(c2);
        CHECK(rt->offload_allowed(c2));
        rt->mutate(increment, {c2}, {0}, 1e6); // a new version, allowed as the old one was
        CHECK_FALSE(rt->is_rematerializable(c2));
        CHECK(rt->offload_allowed(c2));
        CHECK_FALSE(rt->offload_allowed(c1));
        dtr::tensor a = rt->call(add{1}, {c1}, {.cost = 1e6});
        CHECK(rt->offload_allowed(a)); // computed storages always may
        dtr::tensor d = rt->call(add{2}, {c2}, {.cost = 1e6});
        // a, d and e beside both constants need 500 bytes: c2 leaves, c1 stays.
        dtr::tensor e = rt->call(add2{}, {a, d}, {.cost = 1e6});
        CHECK(rt->stats().constant_offloads == 1);
        CHECK(rt->is_offloaded(c2));
        CHECK(rt->is_resident(c1));
        rt->check_invariants();
        CHECK(first_byte(*rt, e) == 20);
        CHECK(first_byte(*rt, c2) == 10);
        CHECK(first_byte(*rt, c1) == 7);
        CHECK(rt->stats().copy_backs >= 1);
        CHECK_THROWS_WITH_AS(rt->allow_offload(a), doctest::Contains("is not a constant"),
                             dtr::logic_error);
        rt->check_invariants();
    }
    SUBCASE("taken back") {
        auto rt = make_runtime(400);
        dtr::tensor c1 = rt->constant(100, [](auto v) { std::memset(v.data(), 7, v.size()); });
        dtr::tensor c2 = rt->constant(100, [](auto v) { std::memset(v.data(), 9, v.size()); });
        rt->allow_offload(c2);
        rt->mutate(increment, {c2}, {0}, 1e6);
        rt->allow_offload(c2, false);
        CHECK_FALSE(rt->offload_allowed(c2));
        dtr::tensor a = rt->call(add{1}, {c1}, {.cost = 1e6});
        dtr::tensor d = rt->call(add{2}, {c2}, {.cost = 1e6});
        CHECK_THROWS_AS(rt->call(add2{}, {a, d}, {.cost = 1e6}), dtr::out_of_memory);
        CHECK(rt->stats().constant_offloads == 0);
        CHECK(first_byte(*rt, d) == 12);
        rt->check_invariants();
    }
}

TEST_CASE(
    "a banished storage's child leaves under offload_constants = false, as offload_allowed "
    "says") {
    dtr::host_backend b;
    b.enable_host_tier({.transfer = {.bandwidth = 1e12, .latency = 0}});
    dtr::runtime<dtr::host_backend, dtr::heuristics::dtr_local> rt(
        {.budget = 300,
         .dealloc = dtr::dealloc_policy::banish,
         .offload = dtr::offload_policy::always,
         .offload_constants = false},
        std::move(b));
    dtr::tensor c = rt.constant(100, [](auto v) { std::memset(v.data(), 7, v.size()); });
    dtr::tensor x = rt.call(add{1}, {c}, {.cost = 1e6});
    dtr::tensor y = rt.call(add{1}, {x}, {.cost = 1e6});
    x.reset(); // banished: y, resident, loses its recipe
    CHECK_FALSE(rt.is_rematerializable(y));
    CHECK(rt.offload_allowed(y)); // computed by the runtime: its bytes are the runtime's
    CHECK_FALSE(rt.offload_allowed(c));
    // c and y fill 200 of 300 bytes and neither can be evicted: a 200-byte output needs y to
    // leave for the host, as offload_allowed says it may.
    dtr::tensor z = rt.call(fill{200, 3}, {}, {.cost = 1e6});
    CHECK(rt.is_offloaded(y));
    CHECK(rt.is_resident(c));
    CHECK(rt.stats().constant_offloads == 1); // counted with the storages without a recipe
    rt.check_invariants();
    CHECK(first_byte(rt, y) == 9);
    CHECK(first_byte(rt, c) == 7);
    CHECK(first_byte(rt, z) == 3);
    rt.check_invariants();
}

TEST_CASE(
    "under constants_high a computed storage's copy-back is placed best fit, a constant's "
    "at the top") {
    dtr::sim_backend b = dtr::sim_backend::with_arena(1024, 64);
    b.enable_host_tier(slow_tier());
    sim_rt rt({.budget = 192,
               .placement = dtr::placement_policy::constants_high,
               .offload = dtr::offload_policy::always},
              std::move(b));
    const auto offset_of = [&rt](const dtr::tensor& t) {
        auto g = rt.pin(t);
        return rt.backend().region_offset(g.data().data());
    };
    dtr::tensor c = rt.constant(64);
    dtr::tensor x = rt.call(make{64}, {}, {.cost = 1000});
    dtr::tensor y = rt.call(make{64}, {}, {.cost = 1000});
    CHECK(offset_of(c) == 1024 - 64);
    CHECK(offset_of(x) == 0);
    CHECK(offset_of(y) == 64);
    CHECK(rt.evict(x));
    REQUIRE(rt.is_offloaded(x));
    CHECK(offset_of(x) == 0); // back into its hole, not among the constants
    CHECK(rt.stats().copy_backs == 1);
    // The constant leaves when x and y are pinned and a third output needs room, and comes
    // back at the top.
    {
        auto gx = rt.pin(x);
        auto gy = rt.pin(y);
        dtr::tensor z = rt.call(make{64}, {}, {.cost = 1000});
        CHECK(rt.is_offloaded(c));
    }
    CHECK(offset_of(c) == 1024 - 64);
    rt.check_invariants();
}

TEST_CASE("a request larger than the backend's whole region throws at once, moving nothing") {
    dtr::sim_backend b = dtr::sim_backend::with_arena(256, 64);
    b.enable_host_tier(slow_tier());
    sim_rt rt({.budget = 1024, .offload = dtr::offload_policy::always}, std::move(b));
    dtr::tensor c1 = rt.constant(64);
    dtr::tensor c2 = rt.constant(64);
    dtr::tensor x = rt.call(make{64}, {}, {.cost = 1000});
    const std::string what =
        message_of<dtr::out_of_memory>([&] { (void)rt.call(make{512}, {x}, {.cost = 1000}); });
    CHECK(contains(what, "larger than the backend's whole region of 256 bytes"));
    CHECK(rt.stats().constant_offloads == 0);
    CHECK(rt.stats().offloads == 0);
    CHECK(rt.stats().evictions == 0);
    for (const dtr::tensor* t : {&c1, &c2, &x}) CHECK(rt.is_resident(*t));
    rt.check_invariants();
}

TEST_CASE("drop() evicts without a transfer where evict() would copy out") {
    dtr::host_backend b;
    b.enable_host_tier({});
    dtr::runtime<dtr::host_backend, dtr::heuristics::lru> rt(
        {.budget = 400, .offload = dtr::offload_policy::always}, std::move(b));
    dtr::tensor x = rt.call(fill{100, 5}, {}, {.cost = 10});
    dtr::tensor y = rt.call(fill{100, 6}, {}, {.cost = 10});
    CHECK(rt.evict(x)); // `always`: copied out
    CHECK(rt.stats().offloads == 1);
    CHECK(rt.drop(y));
    CHECK(rt.stats().offloads == 1);
    CHECK(rt.stats().evictions == 1);
    CHECK(rt.stats().host_bytes == 100); // x's copy only
    CHECK(first_byte(rt, y) == 6);       // recomputed
    CHECK(rt.stats().rematerializations == 1);
    // a storage copied back keeps its (clean) host copy; drop() releases it with the bytes
    CHECK(first_byte(rt, x) == 5);
    CHECK(rt.stats().copy_backs == 1);
    CHECK(rt.drop(x));
    CHECK(rt.stats().host_bytes == 0);
    CHECK(first_byte(rt, x) == 5);
    CHECK(rt.stats().rematerializations == 2);
    rt.check_invariants();
}

TEST_CASE("a copy-back that cannot get a block throws out_of_memory and loses nothing") {
    dtr::host_backend b;
    b.enable_host_tier({});
    dtr::runtime<dtr::host_backend, dtr::heuristics::lru> rt(
        {.budget = 200, .offload = dtr::offload_policy::always}, std::move(b));
    dtr::tensor x = rt.call(fill{100, 5}, {}, {.cost = 10});
    CHECK(rt.evict(x));
    CHECK(rt.is_offloaded(x));
    dtr::tensor y = rt.call(fill{100, 6}, {}, {.cost = 10});
    dtr::tensor z = rt.call(fill{100, 7}, {}, {.cost = 10});
    {
        auto gy = rt.pin(y);
        auto gz = rt.pin(z);
        const std::string what = message_of<dtr::out_of_memory>([&] { (void)rt.pin(x); });
        // It says what the block was for, and whose it was.
        CHECK(contains(what, "to copy storage #0 back from the host tier"));
        CHECK(rt.is_offloaded(x));
        CHECK_FALSE(rt.prefetch(x));
        rt.check_invariants();
    }
    CHECK(first_byte(rt, x) == 5);
    CHECK(first_byte(rt, y) == 6);
    CHECK(first_byte(rt, z) == 7);
    rt.check_invariants();
}

namespace {

// A host backend whose tier fails on demand: out-copies throw std::bad_alloc, copy-backs a
// device error.
struct flaky_tier : dtr::host_backend {
    bool fail_out = false, fail_in = false;
    flaky_tier() { enable_host_tier({}); }
    dtr::copy_out_result<host_copy> copy_out(const_pointer src, std::size_t bytes, cost_t now) {
        if (fail_out) throw std::bad_alloc();
        return host_backend::copy_out(src, bytes, now);
    }
    cost_t copy_in(pointer dst, const host_copy& c, std::size_t bytes, cost_t now) {
        if (fail_in) throw std::runtime_error("copy-back failed");
        return host_backend::copy_in(dst, c, bytes, now);
    }
};
static_assert(dtr::offloading_backend<flaky_tier>);

} // namespace

TEST_CASE("a failing out-copy drops the victim; a failing copy-back fails the read, nothing lost") {
    dtr::runtime<flaky_tier, dtr::heuristics::lru> rt(
        {.budget = 200, .offload = dtr::offload_policy::always});
    auto plus = [](dtr::op_context<flaky_tier>& ctx) {
        auto in = ctx.input(0).as<unsigned char>();
        auto out = ctx.output(0, in.size()).as<unsigned char>();
        for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<unsigned char>(in[i] + 1);
    };
    auto fill3 = [](dtr::op_context<flaky_tier>& ctx) {
        auto out = ctx.output(0, 100).as<unsigned char>();
        for (auto& v : out) v = 3;
    };
    dtr::tensor x = rt.call(fill3, {}, {.cost = 10});
    rt.backend().fail_out = true;
    CHECK(rt.evict(x)); // dropped: recomputed on use
    CHECK_FALSE(rt.is_offloaded(x));
    CHECK(rt.stats().evictions == 1);
    rt.backend().fail_out = false;
    dtr::tensor y = rt.call(plus, {x}, {.cost = 10});
    CHECK(rt.evict(y));
    CHECK(rt.is_offloaded(y));
    rt.backend().fail_in = true;
    CHECK_THROWS_AS(rt.pin(y), std::runtime_error);
    CHECK(rt.is_offloaded(y));
    CHECK(rt.resident_bytes() == 100); // x's block; y's was freed again
    rt.check_invariants();
    rt.backend().fail_in = false;
    auto g = rt.pin(y);
    CHECK(static_cast<unsigned>(g.as<unsigned char>()[0]) == 4u);
}

TEST_CASE("offload asked of a backend without a host tier is refused at construction") {
    // An instance whose tier was never enabled, under the options of examples/train_mlp.
    const std::string untiered = logic_error_of([] {
        dtr::runtime<dtr::host_backend, dtr::heuristics::lru> rt(
            {.budget = 256, .offload = dtr::offload_policy::automatic, .offload_ahead = 8});
    });
    CHECK(contains(untiered, "has no host tier"));
    CHECK(contains(untiered, "enable_host_tier"));
    CHECK(contains(logic_error_of([] {
                       dtr::runtime<dtr::sim_backend, dtr::heuristics::lru> rt(
                           {.budget = 256, .offload = dtr::offload_policy::always});
                   }),
                   "has no host tier"));
    // A backend type without the capability.
    CHECK(contains(logic_error_of([] {
                       dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru> rt(
                           {.budget = 256, .offload = dtr::offload_policy::always},
                           dtr::host_arena_backend(256));
                   }),
                   "dtr::offloading_backend"));
    // offload off asks nothing of the backend.
    dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru> plain({.budget = 256},
                                                                      dtr::host_arena_backend(256));
    dtr::runtime<dtr::host_backend, dtr::heuristics::lru> untiered_off({.budget = 256});
    CHECK(plain.stats().offloads == 0);
    CHECK(untiered_off.stats().offloads == 0);
}

TEST_CASE("the counters print the offload figures") {
    dtr::counters c;
    c.offloads = 3;
    c.copy_backs = 2;
    c.prefetches = 1;
    std::ostringstream os;
    os << c;
    CHECK(os.str().find("offloads=3") != std::string::npos);
    CHECK(os.str().find("copy_backs=2") != std::string::npos);
    CHECK(os.str().find("prefetches=1") != std::string::npos);
    CHECK(os.str().find("transfer_stall=0") != std::string::npos);
}

namespace {

//! One run of a program over a host backend (with a tier when `tier`) under fault injection
//! as `plan` says: allocations refused, executions and transfers thrown.
template <class Heuristic>
dtr_test::program_trace run_offload(std::uint64_t seed, std::size_t steps,
                                    dtr::runtime_options options, bool tier,
                                    dtr_test::run_plan plan = {{}, 4}) {
    using backend = dtr::fault_injecting_backend<dtr::host_backend>;
    dtr::host_backend b;
    if (tier) b.enable_host_tier({.transfer = {.bandwidth = 1e9, .latency = 50}});
    dtr::runtime<backend, Heuristic> rt(options, backend(plan.faults, std::move(b)));
    auto t = dtr_test::program_runner<decltype(rt)>(rt, seed, steps, plan.invariant_period).run();
    rt.check_invariants();
    CHECK(rt.stats().host_bytes == 0); // every host copy freed with its storage
    CHECK(rt.backend().upstream().tier().used_bytes() == 0);
    return t;
}

} // namespace

TEST_CASE(
    "random programs with offload read exactly what the unbudgeted run reads, under "
    "injected faults") {
    // A tenth of the property test's programs: offload changes where bytes wait, not values,
    // also when allocations are refused and executions and transfers throw (most runs).
    const dtr_test::property_programs programs(
        "offload property test", std::max<std::uint64_t>(1, DTR_PROPERTY_PROGRAMS / 10));
    dtr_test::run_totals sum;
    programs.for_each([&](const dtr_test::program_case& c) {
        dtr_test::program_trace reference;
        try {
            reference = run_offload<dtr::heuristics::dtr_local>(c.seed, c.steps,
                                                                {.mutation = c.scope}, false);
        } catch (const std::exception& e) {
            FAIL("reference run failed: ", std::string(e.what()));
            return;
        }
        std::mt19937_64 rng(c.seed), fault_rng(dtr_test::splitmix(c.seed));
        for (auto policy : {dtr::offload_policy::always, dtr::offload_policy::automatic}) {
            for (auto dealloc : {dtr::dealloc_policy::eager_evict, dtr::dealloc_policy::banish}) {
                const std::size_t budget = dtr_test::draw_budget(reference, rng);
                INFO(c.replay, " policy=", static_cast<int>(policy),
                     " dealloc=", static_cast<int>(dealloc), " budget=", budget);
                // Half the runs copy out ahead of eviction as well, at ages 1 to 8.
                const auto ahead = static_cast<std::uint32_t>((rng() & 1) != 0 ? 1 + rng() % 8 : 0);
                const dtr_test::run_plan plan = dtr_test::draw_plan(fault_rng);
                INFO("offload_ahead=", ahead, " ", dtr_test::describe(plan));
                dtr::runtime_options o{.budget = budget,
                                       .dealloc = dealloc,
                                       .mutation = c.scope,
                                       .offload = policy,
                                       .offload_ahead = ahead};
                dtr_test::program_trace t;
                try {
                    t = run_offload<dtr::heuristics::dtr_local>(c.seed, c.steps, o, true, plan);
                } catch (const std::exception& e) {
                    FAIL("program failed: ", std::string(e.what()));
                    return;
                }
                dtr_test::check_matches_reference(t, reference, budget);
                sum.add(t);
            }
        }
    });
    sum.print_tier("offload property test", sum.runs);
    sum.print_faults("offload property test");
    if (!programs.single() && programs.count() >= 20) {
        sum.check_tier_events();
        CHECK(sum.recoveries > 0);
    }
}
