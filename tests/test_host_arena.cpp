// SPDX-License-Identifier: Apache-2.0
// Fixed-region backends without a GPU: host_arena_backend (real host memory carved by
// dtr::arena) and sim_backend with an arena. Fragmentation makes the backend refuse what the
// budget allows; the runtime must evict until a contiguous block exists, count the retries,
// and, when nothing is left to evict, say in out_of_memory that fragmentation was the cause.
#include "support/byte_ops.hpp"
#include "support/expect.hpp"

#include <dtr/backend/device_pointer.hpp>
#include <dtr/backend/fault_injecting.hpp>
#include <dtr/backend/host_arena.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <new>
#include <string>
#include <vector>

using dtr::tensor;
using namespace dtr_test;

namespace {

using arena_context = dtr::op_context<dtr::host_arena_backend>;
using arena_rt = dtr::runtime<dtr::host_arena_backend, dtr::heuristics::lru>;

//! Offset of `t`'s storage in the region (it must be resident; pinning keeps it so).
template <class Runtime>
std::size_t offset_of(Runtime& rt, const tensor& t) {
    auto guard = rt.pin(t);
    return static_cast<std::size_t>(guard.data().data() - rt.backend().base()) - t.offset();
}

//! The region [0, 256) of four 64-byte blocks: w | a | b | c, then a and c evicted, leaving
//! 128 bytes free in two holes of 64 around b.
struct fragmented_region {
    arena_rt rt{{.budget = 256}, dtr::host_arena_backend(256)};
    tensor w = rt.constant(64, fill_with(1));
    tensor a = rt.call(add_op{1}, {w}, {.cost = 1});
    tensor b = rt.call(add_op{2}, {w}, {.cost = 1});
    tensor c = rt.call(add_op{3}, {w}, {.cost = 1});

    fragmented_region() {
        REQUIRE(rt.backend().used_bytes() == 256);
        REQUIRE(offset_of(rt, b) == 128);
        REQUIRE(rt.evict(a));
        REQUIRE(rt.evict(c));
        const auto m = rt.backend().memory_info();
        REQUIRE(m.has_value());
        REQUIRE(m->free == 128);
        REQUIRE(m->largest_free == 64);
        REQUIRE(m->free_blocks == 2);
        REQUIRE(rt.resident_bytes() == 128);
    }
};

} // namespace

TEST_CASE("host_arena_backend: one aligned region, best fit, physical accounting") {
    dtr::host_arena_backend b(1000); // rounded down to 960
    CHECK(b.capacity() == 960);
    std::byte* p = b.allocate(1);
    std::byte* q = b.allocate(0);
    REQUIRE(p != nullptr);
    REQUIRE(q != nullptr);
    CHECK(p != q);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(q) % 64 == 0);
    CHECK(b.used_bytes() == 128); // one byte and zero bytes each hold a 64-byte unit
    CHECK(b.allocate(900) == nullptr);
    CHECK(b.refusals() == 1);
    b.deallocate(p, 1);
    b.deallocate(q, 0);
    CHECK(b.used_bytes() == 0);
    CHECK(b.peak_bytes() == 128);
    const auto m = b.memory_info();
    REQUIRE(m);
    CHECK(m->capacity == 960);
    CHECK(m->alignment == 64);
    CHECK(m->largest_free == 960);
    CHECK(m->fragmentation() == 0.0);
    b.layout().check_invariants();

    dtr::host_arena_backend moved(std::move(b));
    CHECK(moved.capacity() == 960);
    CHECK(b.capacity() == 0); // NOLINT(bugprone-use-after-move): the documented moved-from state
    CHECK(b.allocate(1) == nullptr);
}

TEST_CASE("a request the budget allows but no hole holds: the runtime evicts until one does") {
    fragmented_region f;
    auto& rt = f.rt;
    // 128 bytes fit the budget (128 of 256 resident) but not any hole: b is evicted, the
    // holes around it merge, and the retry succeeds.
    tensor big = rt.call(mix_op{128}, {f.w}, {.cost = 1});
    CHECK(rt.stats().allocation_retries == 1);
    CHECK_FALSE(rt.is_resident(f.b));
    CHECK(offset_of(rt, big) == 64);
    CHECK(rt.backend().refusals() == 1);
    CHECK(rt.backend().peak_bytes() <= 256);
    rt.check_invariants();
    // Everything evicted comes back bit for bit (more evictions and retries on the way).
    CHECK(read(rt, f.a) == pattern(1, 64, 1));
    CHECK(read(rt, f.b) == pattern(1, 64, 2));
    CHECK(read(rt, f.c) == pattern(1, 64, 3));
    CHECK(read(rt, big).size() == 128);
    CHECK(rt.backend().peak_bytes() <= 256);
    rt.check_invariants();
    rt.backend().layout().check_invariants();
}

TEST_CASE("out_of_memory under fragmentation says so, with the figures, and loses nothing") {
    fragmented_region f;
    auto& rt = f.rt;
    {
        auto hold = rt.pin(f.b); // the only evictable storage: now nothing can be evicted
        try {
            (void)rt.call(mix_op{128}, {f.w}, {.cost = 1});
            FAIL("no out_of_memory");
        } catch (const dtr::out_of_memory& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(contains(what, "cannot allocate 128 bytes"));
            CHECK(contains(what, "the budget allows it but the backend has no block of that size"));
            CHECK(contains(what, "backend region of 256 bytes: 128 bytes free in 2 blocks"));
            CHECK(contains(what, "largest free block 64 bytes"));
            CHECK(contains(what, "fragmentation 50%"));
            CHECK(contains(what, "no contiguous block does: fragmentation"));
            CHECK(e.info().largest_free == 64);
            CHECK(e.info().free_total == 128);
            CHECK(e.info().requested == 128);
            CHECK(e.info().budget == 256);
        }
        rt.check_invariants();
        CHECK(rt.resident_bytes() == 128);
        CHECK(rt.backend().used_bytes() == 128);
    }
    // Released, b can go: the same call now succeeds.
    tensor big = rt.call(mix_op{128}, {f.w}, {.cost = 1});
    CHECK(big.size() == 128);
    CHECK(read(rt, f.b) == pattern(1, 64, 2));
    rt.check_invariants();
}

TEST_CASE("plain exhaustion is not called fragmentation") {
    arena_rt rt({.budget = dtr::unlimited}, dtr::host_arena_backend(128));
    tensor w = rt.constant(64, fill_with(0));
    tensor x = rt.constant(64, fill_with(0));
    try {
        (void)rt.call(add_op{1}, {w}, {.cost = 1});
        FAIL("no out_of_memory");
    } catch (const dtr::out_of_memory& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(contains(what, "0 bytes free in 0 blocks"));
        CHECK_FALSE(contains(what, "no contiguous block does"));
        CHECK(e.info().free_total == 0);
    }
    rt.check_invariants();
}

namespace {

//! A region whose allocator fails with std::bad_alloc on demand, as a driver's can, while
//! its free blocks would hold the request.
struct throwing_arena : dtr::host_arena_backend {
    bool fail = false;
    explicit throwing_arena(std::size_t capacity) : host_arena_backend(capacity) {}
    pointer allocate(std::size_t bytes) {
        if (fail) throw std::bad_alloc();
        return host_arena_backend::allocate(bytes);
    }
};

} // namespace

TEST_CASE("a refusal the region does not explain is not called fragmentation") {
    SUBCASE("an injected refusal") {
        using faulty_arena = dtr::fault_injecting_backend<dtr::host_arena_backend>;
        dtr::runtime<faulty_arena, dtr::heuristics::lru> rt(
            {.budget = 1024},
            faulty_arena({.allocation_fault_rate = 1}, dtr::host_arena_backend(1024)));
        const std::string what = message_of<dtr::out_of_memory>([&] { (void)rt.constant(64); });
        INFO(what);
        CHECK(contains(what, "largest free block 1024 bytes"));
        CHECK(
            contains(what, "the backend refused it although its largest free block would hold it"));
        CHECK_FALSE(contains(what, "fragmentation)"));
        CHECK_FALSE(contains(what, "has no block of that size"));
        rt.check_invariants();
    }
    SUBCASE("the system allocator behind the region") {
        dtr::runtime<throwing_arena, dtr::heuristics::lru> rt({.budget = 1024},
                                                              throwing_arena(1024));
        tensor w = rt.constant(64, fill_with(1));
        rt.backend().fail = true;
        const std::string what =
            message_of<dtr::out_of_memory>([&] { (void)rt.call(add_op{1}, {w}, {.cost = 1}); });
        INFO(what);
        CHECK(contains(what, "system allocator behind the backend failed (std::bad_alloc)"));
        CHECK_FALSE(contains(what, "fragmentation)"));
        CHECK_FALSE(contains(what, "has no block of that size"));
        rt.backend().fail = false;
        CHECK(read(rt, w) == pattern(1, 64));
        rt.check_invariants();
    }
}

TEST_CASE("a region smaller than the budget is the limit: refusals become evictions") {
    // The budget says 4096; the region holds 512. The runtime cannot know the difference
    // but by being refused, and must still finish with correct values.
    arena_rt rt({.budget = 4096}, dtr::host_arena_backend(512));
    tensor x = rt.constant(40, fill_with(7));
    std::vector<tensor> chain;
    for (int i = 0; i < 20; ++i)
        chain.push_back(rt.call(add_op{1}, {chain.empty() ? x : chain.back()}, {.cost = 1}));
    CHECK(rt.stats().allocation_retries > 0);
    CHECK(rt.stats().evictions > 0);
    CHECK(rt.backend().peak_bytes() <= 512);
    for (int i = 19; i >= 0; --i)
        CHECK(read(rt, chain[static_cast<std::size_t>(i)]) == pattern(7, 40, i + 1));
    rt.check_invariants();
    chain.clear();
    x.reset();
    CHECK(rt.backend().used_bytes() == 0);
}

TEST_CASE("budget equal to the region: the physical footprint never exceeds it") {
    // Sizes that round badly (65 bytes take 128) so the budget's byte count and the region
    // disagree all the time; mutation and views on top.
    constexpr std::size_t region = 2048;
    arena_rt rt({.budget = region}, dtr::host_arena_backend(region));
    tensor w = rt.constant(65, fill_with(3));
    std::vector<tensor> live{w};
    for (int i = 0; i < 200; ++i) {
        const tensor& in = live[static_cast<std::size_t>(i * 7) % live.size()];
        const std::size_t bytes = 1 + static_cast<std::size_t>(i * 37) % 130;
        live.push_back(rt.call(mix_op{bytes}, {in, w}, {.cost = 1.0 + i % 5}));
        if (i % 9 == 0) live.push_back(rt.view(live.back(), 0, live.back().size() / 2));
        if (i % 11 == 0) {
            tensor target = live.back();
            rt.mutate(
                [](arena_context& ctx) {
                    auto io = ctx.inout(0);
                    for (std::size_t k = 0; k < io.size(); ++k)
                        io.data()[k] =
                            std::byte(static_cast<std::uint8_t>(u8(io.data()[k]) ^ 0x5a));
                },
                {target}, {0}, 2.0);
        }
        if (live.size() > 24) live.erase(live.begin() + 1 + (i % 20));
        CHECK(rt.backend().used_bytes() <= region);
    }
    CHECK(rt.stats().allocation_retries > 0);
    CHECK(rt.backend().peak_bytes() <= region);
    CHECK(rt.stats().peak_resident_bytes <= region);
    for (const tensor& t : live) CHECK_NOTHROW((void)read(rt, t));
    rt.check_invariants();
    rt.backend().layout().check_invariants();
}

TEST_CASE("sim_backend with an arena models the same fragmentation; without one it has none") {
    dtr::runtime<dtr::sim_backend, dtr::heuristics::lru> rt({.budget = 1024},
                                                            dtr::sim_backend::with_arena(1024));
    auto op = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, ctx.input(0).size()); };
    auto big = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 512); };
    tensor w = rt.constant(256);
    tensor a = rt.call(op, {w}, {.cost = 1});
    tensor b = rt.call(op, {w}, {.cost = 1});
    tensor c = rt.call(op, {w}, {.cost = 1});
    {
        auto guard = rt.pin(b);
        CHECK(guard.data().data() == 256 + 512); // address = alignment + offset
    }
    REQUIRE(rt.evict(a));
    REQUIRE(rt.evict(c));
    tensor d = rt.call(big, {w}, {.cost = 1});
    CHECK(rt.stats().allocation_retries == 1);
    CHECK_FALSE(rt.is_resident(b));
    REQUIRE(rt.backend().memory_info().has_value());
    CHECK(rt.backend().memory_info()->peak_used <= 1024);
    CHECK(rt.backend().layout() != nullptr);
    rt.check_invariants();

    dtr::sim_backend endless;
    CHECK_FALSE(endless.memory_info().has_value());
    CHECK(endless.layout() == nullptr);
}

TEST_CASE("backends without a region report no fragmentation figures") {
    dtr::runtime<dtr::host_backend> rt({.budget = 100});
    tensor w = rt.constant(60, fill_with(0));
    try {
        (void)rt.call(mix_op{50}, {w}, {.cost = 1});
        FAIL("no out_of_memory");
    } catch (const dtr::out_of_memory& e) {
        CHECK_FALSE(contains(e.what(), "backend region"));
        CHECK(e.info().largest_free == 0);
        CHECK(e.info().free_total == 0);
    }
    dtr::runtime<dtr::sim_backend> sim({.budget = 100});
    tensor s = sim.constant(60);
    try {
        (void)sim.call([](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 50); }, {s},
                       {.cost = 1});
        FAIL("no out_of_memory");
    } catch (const dtr::out_of_memory& e) {
        CHECK_FALSE(contains(e.what(), "backend region"));
    }
}

TEST_CASE("device_pointer: byte arithmetic, read-only conversion, no host dereference") {
    alignas(256) static std::byte storage[512];
    using dp = dtr::device_pointer<std::byte>;
    using cdp = dtr::device_pointer<const std::byte>;
    static_assert(std::regular<dp> && std::regular<cdp>);
    static_assert(std::is_convertible_v<dp, cdp> && !std::is_convertible_v<cdp, dp>);
    static_assert(!std::is_pointer_v<dp>); // buffer_view::span() is unavailable on it
    const dp null{};
    CHECK_FALSE(static_cast<bool>(null));
    CHECK(null == dp{});
    const dp p(storage);
    CHECK(static_cast<bool>(p));
    CHECK((p + 256).get() == storage + 256);
    CHECK((p + 256) - p == 256);
    const cdp c = p + 8;
    CHECK(c.get() == storage + 8);
    CHECK(p.as<float>() == reinterpret_cast<float*>(storage));
    static_assert(std::is_same_v<decltype(c.as<float>()), const float*>);
    const dtr::buffer_view<dp> view(p, 64);
    CHECK(view.subview(16, 8).data() == p + 16);
    const dtr::buffer_view<cdp> read_only = view;
    CHECK(read_only.data() == cdp(storage));
}
