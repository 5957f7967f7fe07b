// SPDX-License-Identifier: Apache-2.0
// Unit tests of dtr::runtime: calls, views, multi-output and data-dependent operators,
// mutation, release policies, rematerialization, errors.
#include "support/byte_ops.hpp"
#include "support/expect.hpp"

#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/exhaustive.hpp>
#include <dtr/search/indexed.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

using dtr::tensor;
using namespace dtr_test;

namespace {

using host_rt = dtr::runtime<dtr::host_backend>;

} // namespace

TEST_CASE("a call computes its output and counts it") {
    host_rt rt;
    tensor c = rt.constant(8, fill_with(10));
    tensor y = rt.call(add_op{2}, {c}, {.cost = 5});
    CHECK(read(rt, y) == pattern(10, 8, 2));
    CHECK(rt.stats().operators_run == 1);
    CHECK(rt.stats().compute_cost == 5);
    CHECK(rt.clock() == 5);
    CHECK(rt.resident_bytes() == 16);
    CHECK(rt.is_rematerializable(y));
    CHECK_FALSE(rt.is_rematerializable(c));
    rt.check_invariants();
}

TEST_CASE("evicted storages are recomputed bit for bit") {
    host_rt rt({.budget = 64});
    tensor x = rt.constant(16, fill_with(1));
    std::vector<tensor> chain;
    for (int i = 0; i < 10; ++i)
        chain.push_back(rt.call(add_op{1}, {chain.empty() ? x : chain.back()}, {.cost = 1}));
    rt.check_invariants();
    CHECK(rt.stats().evictions > 0);
    CHECK(rt.stats().peak_resident_bytes <= 64);
    CHECK(rt.backend().peak_bytes() <= 64);
    for (int i = 9; i >= 0; --i)
        CHECK(read(rt, chain[static_cast<std::size_t>(i)]) == pattern(1, 16, i + 1));
    CHECK(rt.stats().rematerializations > 0);
    rt.check_invariants();
}

TEST_CASE("a chain of a million evicted storages rematerializes without recursion") {
    // Simulated backend: the point is the depth of the work stack, not the bytes.
    dtr::runtime<dtr::sim_backend> rt({.budget = 64});
    tensor x = rt.constant(8);
    tensor last = x;
    constexpr int length = 1'000'000;
    auto op = [](dtr::op_context<dtr::sim_backend>& ctx) { ctx.output(0, 8); };
    for (int i = 0; i < length; ++i) last = rt.call(op, {last}, {.cost = 1});
    REQUIRE(rt.evict(last));
    // Every ancestor was evicted on release (eager eviction); restoring `last` needs them all.
    CHECK(rt.storage_count() == static_cast<std::size_t>(length) + 1);
    const auto before = rt.stats().rematerializations;
    { auto guard = rt.pin(last); }
    CHECK(rt.stats().rematerializations - before == static_cast<std::uint64_t>(length));
    CHECK(rt.stats().peak_resident_bytes <= 64);
    last.reset();
    x.reset();
    CHECK(rt.storage_count() == 0);
    CHECK(rt.resident_bytes() == 0);
}

TEST_CASE("multi-output operators: one recomputation refills the outputs still needed") {
    host_rt rt({.budget = 1 << 20});
    tensor x = rt.constant(8, fill_with(3));
    auto split = [](host_context& ctx) {
        auto in = ctx.input(0);
        auto a = ctx.output(0, 4);
        auto b = ctx.output(1, 6);
        for (std::size_t i = 0; i < 4; ++i) a.data()[i] = in.data()[i];
        for (std::size_t i = 0; i < 6; ++i)
            b.data()[i] = std::byte(static_cast<std::uint8_t>(u8(in.data()[i % 8]) * 2));
    };
    auto [a, b] = rt.call<2>(split, {x}, {.cost = 7});
    const auto a_bytes = read(rt, a), b_bytes = read(rt, b);
    CHECK(a_bytes == pattern(3, 4));

    SUBCASE("both evicted: restoring one restores both") {
        REQUIRE(rt.evict(a));
        REQUIRE(rt.evict(b));
        CHECK(read(rt, a) == a_bytes);
        CHECK(rt.is_resident(b));
        CHECK(rt.stats().rematerializations == 1);
        CHECK(read(rt, b) == b_bytes);
        CHECK(rt.stats().rematerializations == 1);
    }
    SUBCASE("one evicted: the resident sibling is recomputed into scratch and kept") {
        REQUIRE(rt.evict(b));
        const auto allocated = rt.stats().bytes_allocated;
        CHECK(read(rt, b) == b_bytes);
        CHECK(rt.stats().bytes_allocated - allocated == 10); // b refilled, a's copy discarded
        CHECK(read(rt, a) == a_bytes);
    }
    SUBCASE("call_n with a run-time output count") {
        auto outs = rt.call_n(2, split, std::span<const tensor>(&x, 1), {.cost = 1});
        REQUIRE(outs.size() == 2);
        CHECK(read(rt, outs[0]) == a_bytes);
        CHECK(read(rt, outs[1]) == b_bytes);
    }
    SUBCASE("call_into writes the handles into the caller's array") {
        std::array<tensor, 2> outs;
        rt.call_into(outs, split, std::span<const tensor>(&x, 1), {.cost = 1});
        CHECK(read(rt, outs[0]) == a_bytes);
        CHECK(read(rt, outs[1]) == b_bytes);
        // A live handle among the outputs is refused before the operator runs (assigning
        // over it would release its tensor in the middle of the call).
        const auto calls = rt.stats().operators_run;
        std::array<tensor, 2> busy{tensor{}, a};
        CHECK_THROWS_WITH_AS(rt.call_into(busy, split, std::span<const tensor>(&x, 1)),
                             doctest::Contains("output handle 1 is not empty"), dtr::logic_error);
        CHECK(rt.stats().operators_run == calls);
        CHECK_FALSE(busy[0]);
        // What the operator throws leaves the outputs empty.
        std::array<tensor, 2> failed;
        auto throws = [](host_context&) { throw std::runtime_error("kernel failed"); };
        CHECK_THROWS_AS(rt.call_into(failed, throws, std::span<const tensor>(&x, 1)),
                        std::runtime_error);
        CHECK_FALSE(failed[0]);
        CHECK_FALSE(failed[1]);
    }
    rt.check_invariants();
}

TEST_CASE("views alias their input's storage") {
    host_rt rt({.budget = 1 << 20});
    tensor x = rt.constant(4, fill_with(0));
    tensor y = rt.call(add_op{100}, {x}, {.cost = 3});
    const auto resident = rt.resident_bytes();
    tensor v = rt.call([](host_context& ctx) { ctx.alias(0, 0, 1, 2); }, {y}, {.cost = 1});
    CHECK(rt.resident_bytes() == resident); // no new memory
    CHECK(v.size() == 2);
    CHECK(v.offset() == 1);
    CHECK(read(rt, v) == std::vector<std::uint8_t>{101, 102});
    // Evicting the storage takes the view with it; reading restores both.
    REQUIRE(rt.evict(v));
    CHECK_FALSE(rt.is_resident(y));
    CHECK(read(rt, v) == std::vector<std::uint8_t>{101, 102});
    // A metadata-only view (no operator) of the view.
    tensor w = rt.view(v, 1, 1);
    CHECK(read(rt, w) == std::vector<std::uint8_t>{102});
    // Operators read views as byte ranges of the storage.
    tensor z = rt.call(add_op{1}, {w}, {.cost = 1});
    CHECK(read(rt, z) == std::vector<std::uint8_t>{103});
    // Dropping the base keeps the storage alive for its views.
    y.reset();
    CHECK(read(rt, v) == std::vector<std::uint8_t>{101, 102});
    rt.check_invariants();
}

TEST_CASE("an operator making several views of one storage adds its cost to it once") {
    // split/chunk: the simulator's storage cost sums the storage's distinct operators.
    host_rt rt({.budget = 1 << 20});
    tensor x = rt.constant(4, fill_with(0));
    tensor y = rt.call(add_op{1}, {x}, {.cost = 3});
    auto halves = rt.call_n(2,
                            [](host_context& ctx) {
                                ctx.alias(0, 0, 0, 2);
                                ctx.alias(1, 0, 2, 2);
                            },
                            std::span<const tensor>(&y, 1), {.cost = 5});
    REQUIRE(halves.size() == 2);
    double cost = -1;
    rt.for_each_storage([&](const auto& s) {
        if (s.rematerializable()) cost = static_cast<double>(s.cost());
    });
    CHECK(cost == 8);
    rt.check_invariants();
}

TEST_CASE("an operator may size its output from its input's data") {
    host_rt rt({.budget = 64});
    tensor x = rt.constant(8, fill_with(5));
    auto take_prefix = [](host_context& ctx) {
        auto in = ctx.input(0);
        const std::size_t n = u8(in.data()[0]) % 8 + 1; // known only while running
        auto out = ctx.output(0, n);
        std::memcpy(out.data(), in.data(), n);
    };
    tensor p = rt.call(take_prefix, {x}, {.cost = 1});
    CHECK(p.size() == 6);
    CHECK(read(rt, p) == pattern(5, 6));
    REQUIRE(rt.evict(p));
    CHECK(read(rt, p) == pattern(5, 6));
}

TEST_CASE("in-place mutation is copy-on-write") {
    host_rt rt({.budget = 1 << 20});
    tensor x = rt.constant(4, fill_with(1));
    tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
    tensor d = rt.call(add_op{0}, {y}, {.cost = 2}); // reads y's old value
    tensor v = rt.view(y, 2, 2);
    auto double_it = [](host_context& ctx) {
        auto io = ctx.inout(0);
        for (std::size_t i = 0; i < io.size(); ++i)
            io.data()[i] = std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) * 2));
    };
    rt.mutate(double_it, {y}, {0}, 4.0);
    CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
    CHECK(read(rt, v) == std::vector<std::uint8_t>{26, 28}); // storage scope: views follow
    // The old version is still what d was computed from, and d can be recomputed from it.
    REQUIRE(rt.evict(d));
    CHECK(read(rt, d) == std::vector<std::uint8_t>{11, 12, 13, 14});
    // Recomputing the new version replays the copy and the update.
    REQUIRE(rt.evict(y));
    CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
    rt.check_invariants();
}

namespace {

// y *= 2, in place (each byte).
void double_in_place(host_rt& rt, tensor& y) {
    rt.mutate(
        [](host_context& ctx) {
            auto io = ctx.inout(0);
            for (std::size_t i = 0; i < io.size(); ++i)
                io.data()[i] = std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) * 2));
        },
        {y}, {0}, 4.0);
}

} // namespace

TEST_CASE("an unshared in-place update writes into the old version's block") {
    const auto reuse = dtr::in_place_writes::reuse_when_unshared;
    for (auto mode : {dtr::in_place_writes::copy, reuse}) {
        CAPTURE(static_cast<int>(mode));
        host_rt rt({.budget = 1 << 20, .in_place = mode});
        tensor x = rt.constant(4, fill_with(1));
        tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
        tensor d = rt.call(add_op{0}, {y}, {.cost = 2}); // reads y's old value
        const std::size_t before = rt.stats().peak_resident_bytes;
        const std::uint64_t allocations = rt.stats().allocations;
        double_in_place(rt, y);
        CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
        if (mode == reuse) {
            // No block for the new version: the old one's bytes became it.
            CHECK(rt.stats().in_place_reuses == 1);
            CHECK(rt.stats().peak_resident_bytes == before);
            CHECK(rt.stats().allocations == allocations);
        } else {
            CHECK(rt.stats().in_place_reuses == 0);
            CHECK(rt.stats().peak_resident_bytes == before + 4);
        }
        rt.check_invariants();
        // Either way the old version is gone from memory (no handle left) and comes back by
        // recomputation for what was computed from it; the new one replays the update.
        CHECK(rt.resident_bytes() == 12);
        REQUIRE(rt.evict(d));
        CHECK(read(rt, d) == std::vector<std::uint8_t>{11, 12, 13, 14});
        REQUIRE(rt.evict(y));
        CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
        rt.check_invariants();
    }
}

TEST_CASE("an in-place update copies the old version when something else wants it") {
    const dtr::runtime_options reuse{.budget = 1 << 20,
                                     .in_place = dtr::in_place_writes::reuse_when_unshared};
    SUBCASE("a pin guard holds it") {
        host_rt rt(reuse);
        tensor x = rt.constant(4, fill_with(1));
        tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
        auto guard = rt.pin(y);
        double_in_place(rt, y);
        CHECK(rt.stats().in_place_reuses == 0);
        // The guard still reads the old bytes.
        CHECK(guard.span()[0] == std::byte{11});
        CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
    }
    SUBCASE("other names keep the old version (tensor scope)") {
        dtr::runtime_options o = reuse;
        o.mutation = dtr::mutation_scope::tensor;
        host_rt rt(o);
        tensor x = rt.constant(4, fill_with(1));
        tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
        tensor y2 = rt.view(y);
        double_in_place(rt, y);
        CHECK(rt.stats().in_place_reuses == 0);
        CHECK(read(rt, y2) == std::vector<std::uint8_t>{11, 12, 13, 14});
    }
    SUBCASE("a constant is updated by its own rule") {
        host_rt rt(reuse);
        tensor w = rt.constant(4, fill_with(1));
        double_in_place(rt, w);
        CHECK(rt.stats().in_place_reuses == 0);
        CHECK(read(rt, w) == std::vector<std::uint8_t>{2, 4, 6, 8});
    }
}

TEST_CASE("an in-place update that fails leaves the old version evicted and recomputable") {
    host_rt rt({.budget = 1 << 20, .in_place = dtr::in_place_writes::reuse_when_unshared});
    tensor x = rt.constant(4, fill_with(1));
    tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
    auto half_done = [](host_context& ctx) {
        ctx.inout(0).data()[0] = std::byte{0};       // the old bytes are overwritten...
        throw std::runtime_error("operator failed"); // ...and the update never completes
    };
    CHECK_THROWS_AS(rt.mutate(half_done, {y}, {0}, 1.0), std::runtime_error);
    CHECK(rt.stats().in_place_reuses == 1);
    CHECK_FALSE(rt.is_resident(y));
    CHECK(rt.resident_bytes() == 4);
    rt.check_invariants();
    CHECK(read(rt, y) == std::vector<std::uint8_t>{11, 12, 13, 14});
    double_in_place(rt, y); // and the runtime goes on
    CHECK(read(rt, y) == std::vector<std::uint8_t>{22, 24, 26, 28});
    rt.check_invariants();
}

TEST_CASE("a recomputed in-place update copies the old version it restored") {
    // Recomputing z restores y's old version and replays the update; the update then copies
    // (the first run reused), so the old version stays resident for the policy to evict.
    host_rt rt({.budget = 1 << 20, .in_place = dtr::in_place_writes::reuse_when_unshared});
    tensor x = rt.constant(8, fill_with(1));
    tensor y = rt.call(add_op{10}, {x}, {.cost = 2});
    double_in_place(rt, y);
    CHECK(rt.stats().in_place_reuses == 1);
    tensor z = rt.call(add_op{1}, {y}, {.cost = 2});
    REQUIRE(rt.evict(z));
    REQUIRE(rt.evict(y));
    const std::size_t resident = rt.resident_bytes(); // x
    CHECK(read(rt, z) ==
          std::vector<std::uint8_t>{23, 25, 27, 29, 31, 33, 35, 37}); // (x + 10) * 2 + 1
    CHECK(rt.stats().in_place_reuses == 1);
    CHECK(rt.resident_bytes() == resident + 24); // z, y and y's old version
    rt.check_invariants();
}

TEST_CASE("tensor-scope mutation leaves other names on the old version") {
    host_rt rt({.budget = 1 << 20, .mutation = dtr::mutation_scope::tensor});
    tensor x = rt.constant(2, fill_with(1));
    tensor y = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor y2 = rt.view(y); // a second name (the logs' COPY)
    rt.mutate([](host_context& ctx) { ctx.inout(0).data()[0] = std::byte{99}; }, {y}, {0}, 1.0);
    CHECK(read(rt, y) == std::vector<std::uint8_t>{99, 3});
    CHECK(read(rt, y2) == std::vector<std::uint8_t>{2, 3});
}

TEST_CASE("mutation through a view sees inputs that alias the mutated storage in place") {
    host_rt rt({.budget = 1 << 20});
    tensor x = rt.constant(4, fill_with(1));
    tensor y = rt.call(add_op{0}, {x}, {.cost = 1});
    tensor lo = rt.view(y, 0, 2), hi = rt.view(y, 2, 2);
    // lo += hi, with hi read from the same (new) storage: in-place semantics.
    auto add_into = [](host_context& ctx) {
        auto io = ctx.inout(0);
        auto in = ctx.input(1);
        for (std::size_t i = 0; i < io.size(); ++i)
            io.data()[i] =
                std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) + u8(in.data()[i])));
    };
    rt.mutate(add_into, {lo, hi}, {0}, 1.0);
    CHECK(read(rt, y) == std::vector<std::uint8_t>{4, 6, 3, 4});
    REQUIRE(rt.evict(y));
    CHECK(read(rt, lo) == std::vector<std::uint8_t>{4, 6});
}

TEST_CASE("updating a constant keeps it a constant and frees the old version") {
    host_rt rt({.budget = 1 << 20});
    tensor w = rt.constant(4, fill_with(1));
    tensor g = rt.call(add_op{1}, {w}, {.cost = 1});
    auto sgd = [](host_context& ctx) {
        auto io = ctx.inout(0);
        auto grad = ctx.input(1);
        for (std::size_t i = 0; i < io.size(); ++i)
            io.data()[i] =
                std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) - u8(grad.data()[i])));
    };
    rt.mutate(sgd, {w, g}, {0}, 1.0);
    CHECK_FALSE(rt.is_rematerializable(w));
    CHECK(read(rt, w) == std::vector<std::uint8_t>{255, 255, 255, 255});
    // g still depends on the old w, which therefore survives until g goes.
    CHECK(rt.storage_count() == 3);
    g.reset();
    CHECK(rt.storage_count() == 1);
    CHECK(rt.resident_bytes() == 4);
    rt.check_invariants();
}

TEST_CASE("constant updates can stay recomputable (the simulator's semantics)") {
    host_rt rt({.budget = 1 << 20, .constant_updates = dtr::constant_update::rematerializable});
    tensor w = rt.constant(4, fill_with(1));
    rt.mutate([](host_context& ctx) { ctx.inout(0).data()[0] = std::byte{42}; }, {w}, {0}, 1.0);
    CHECK(rt.is_rematerializable(w));
    CHECK(rt.storage_count() == 2); // the old version stays for the new one's recipe
    REQUIRE(rt.evict(w));
    CHECK(read(rt, w) == std::vector<std::uint8_t>{42, 2, 3, 4});
    w.reset();
    CHECK(rt.storage_count() == 0);
}

TEST_CASE("eager eviction on release keeps dependents recomputable") {
    host_rt rt({.budget = 1 << 20, .dealloc = dtr::dealloc_policy::eager_evict});
    tensor x = rt.constant(4, fill_with(0));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor b = rt.call(add_op{1}, {a}, {.cost = 1});
    a.reset();
    CHECK(rt.stats().eager_evictions == 1);
    CHECK(rt.storage_count() == 3); // a's record stays for b
    REQUIRE(rt.evict(b));
    CHECK(read(rt, b) == pattern(0, 4, 2));
    CHECK(rt.stats().rematerializations == 2);
    b.reset();
    CHECK(rt.storage_count() == 1);
    CHECK(rt.operator_count() == 0);
    x.reset();
    CHECK(rt.storage_count() == 0);
    CHECK(rt.backend().used_bytes() == 0);
}

TEST_CASE("keep_resident leaves a released storage to the policy, and can be switched") {
    host_rt rt({.budget = 1 << 20, .dealloc = dtr::dealloc_policy::keep_resident});
    tensor x = rt.constant(4, fill_with(0));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor b = rt.call(add_op{1}, {a}, {.cost = 1});
    const std::size_t resident = rt.resident_bytes();
    a.reset(); // b's record reads a: kept, resident, evictable
    CHECK(rt.stats().eager_evictions == 0);
    CHECK(rt.resident_bytes() == resident);
    CHECK(rt.storage_count() == 3);
    rt.check_invariants();
    // Recomputing b reads the kept a: no recomputation of a.
    REQUIRE(rt.evict(b));
    CHECK(read(rt, b) == pattern(0, 4, 2));
    CHECK(rt.stats().rematerializations == 1);
    // Under pressure the policy may take a like any storage; b's recipe still works.
    const std::uint64_t evictions = rt.stats().evictions;
    rt.set_budget(rt.resident_bytes() - 4);
    CHECK(rt.stats().evictions == evictions + 1);
    rt.set_budget(1 << 20);
    REQUIRE((!rt.is_resident(b) || rt.evict(b)));
    CHECK(read(rt, b) == pattern(0, 4, 2));
    // Switched to eager eviction, the next release evicts at once.
    rt.set_dealloc(dtr::dealloc_policy::eager_evict);
    tensor c = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor d = rt.call(add_op{1}, {c}, {.cost = 1});
    c.reset();
    CHECK(rt.stats().eager_evictions == 1);
    // A released storage nothing reads is freed under either policy.
    rt.set_dealloc(dtr::dealloc_policy::keep_resident);
    const std::size_t storages = rt.storage_count();
    tensor e = rt.call(add_op{1}, {x}, {.cost = 1});
    e.reset();
    CHECK(rt.storage_count() == storages);
    // b goes, then a (kept) has no dependent left: freed for good.
    b.reset();
    d.reset();
    x.reset();
    CHECK(rt.storage_count() == 0);
    CHECK(rt.backend().used_bytes() == 0);
    // banish is chosen at construction.
    CHECK(contains(logic_error_of([&] { rt.set_dealloc(dtr::dealloc_policy::banish); }),
                   "set_dealloc: only eager_evict, keep_resident and keep_once_bound"));
    host_rt banishing({.dealloc = dtr::dealloc_policy::banish});
    CHECK(
        contains(logic_error_of([&] { banishing.set_dealloc(dtr::dealloc_policy::keep_resident); }),
                 "banish is chosen at construction"));
}

namespace {

//! a (kept: released, b's record reads it) is expensive to recompute and recent, h (held)
//! cheap and stale, so the policy prefers to evict h. Under `first` the kept a goes anyway;
//! under `scored` the policy's choice, h, goes.
template <class Heuristic>
void check_kept_priority(dtr::step_learning learning = dtr::step_learning::automatic) {
    CAPTURE(std::string(Heuristic::name));
    for (const auto priority : {dtr::kept_priority::first, dtr::kept_priority::scored}) {
        CAPTURE(priority == dtr::kept_priority::first ? "first" : "scored");
        dtr::runtime<dtr::host_backend, Heuristic> rt(
            {.budget = 1 << 20,
             .dealloc = dtr::dealloc_policy::keep_resident,
             .kept = priority,
             .steps = learning});
        tensor x = rt.constant(4, fill_with(0));
        tensor h = rt.call(add_op{1}, {x}, {.cost = 1});
        tensor h2 = rt.call(add_op{1}, {h}, {.cost = 1});
        tensor a = rt.call(add_op{1}, {x}, {.cost = 1e6});
        tensor b = rt.call(add_op{1}, {a}, {.cost = 1e6});
        a.reset();
        REQUIRE(rt.storage_count() == 5);
        rt.check_invariants(); // the kept a leads a search strategy's pool
        // Make room for one 4-byte storage: one victim.
        rt.set_budget(rt.resident_bytes() - 4);
        CHECK(rt.stats().evictions == 1);
        CHECK(rt.is_resident(h) == (priority == dtr::kept_priority::first));
        // Recomputing b needs a again exactly when a was the victim.
        rt.set_budget(1 << 20);
        REQUIRE(rt.evict(b));
        const std::uint64_t remats = rt.stats().rematerializations;
        CHECK(read(rt, b) == pattern(0, 4, 2));
        CHECK(rt.stats().rematerializations - remats ==
              (priority == dtr::kept_priority::first ? 2u : 1u));
        CHECK(read(rt, h2) == pattern(0, 4, 2));
        rt.check_invariants();
    }
}

} // namespace

TEST_CASE("kept storages go before held ones under kept_priority::first, not under scored") {
    check_kept_priority<dtr::heuristics::dtr_eqclass>();
    // A search strategy chooses its own victims, but the rule is the runtime's: the same.
    check_kept_priority<dtr::search::exhaustive<dtr::heuristics::dtr_eqclass>>();
    check_kept_priority<dtr::search::indexed<dtr::heuristics::dtr_eqclass>>();
    // Without a forecast (with one, a policy that reads it orders the kept storages itself;
    // here the repeated calls would make one).
    check_kept_priority<dtr::search::indexed<dtr::heuristics::dtr_next_use>>(
        dtr::step_learning::off);
}

TEST_CASE("keep_once_bound releases eagerly until the budget first binds, then keeps") {
    host_rt rt({.budget = 1 << 20, .dealloc = dtr::dealloc_policy::keep_once_bound});
    tensor x = rt.constant(4, fill_with(0));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor b = rt.call(add_op{1}, {a}, {.cost = 1});
    CHECK_FALSE(rt.keeps_released());
    const std::size_t before = rt.resident_bytes();
    a.reset(); // b's record reads a: evicted at once, as under eager_evict
    CHECK(rt.stats().eager_evictions == 1);
    CHECK(rt.resident_bytes() == before - 4);
    // The budget binds: one victim.
    tensor c = rt.call(add_op{1}, {b}, {.cost = 1});
    rt.set_budget(rt.resident_bytes() - 4);
    CHECK(rt.stats().victim_searches == 1);
    CHECK(rt.keeps_released());
    rt.set_budget(1 << 20);
    // From now on a released storage with a dependent stays resident, until a victim is
    // chosen.
    tensor d = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor e = rt.call(add_op{1}, {d}, {.cost = 1});
    const std::size_t resident = rt.resident_bytes();
    d.reset();
    CHECK(rt.stats().eager_evictions == 1);
    CHECK(rt.resident_bytes() == resident);
    CHECK(read(rt, e) == pattern(0, 4, 2));
    rt.check_invariants();
    // Switching back at run time is allowed, and so is switching to it.
    rt.set_dealloc(dtr::dealloc_policy::eager_evict);
    CHECK_FALSE(rt.keeps_released());
    rt.set_dealloc(dtr::dealloc_policy::keep_once_bound);
    CHECK(rt.keeps_released()); // the budget has bound before
}

TEST_CASE("banishing frees for good once dependents are resident") {
    host_rt rt({.budget = 1 << 20, .dealloc = dtr::dealloc_policy::banish});
    tensor x = rt.constant(4, fill_with(0));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1});
    tensor b = rt.call(add_op{1}, {a}, {.cost = 1});
    tensor c = rt.call(add_op{1}, {a}, {.cost = 1});
    REQUIRE(rt.evict(c));
    a.reset(); // c is evicted: not safe yet
    CHECK(rt.stats().banishments == 0);
    CHECK(rt.storage_count() == 4);
    CHECK(read(rt, c) == pattern(0, 4, 2)); // recomputing c makes a's banishment safe
    CHECK(rt.stats().banishments == 1);
    CHECK(rt.storage_count() == 3);
    // b and c lost their recipe: they cannot be evicted any more.
    CHECK_FALSE(rt.is_rematerializable(b));
    CHECK_FALSE(rt.evict(c));
    CHECK(read(rt, b) == pattern(0, 4, 2));
    rt.check_invariants();
}

TEST_CASE("an impossible request throws out_of_memory and loses nothing") {
    host_rt rt({.budget = 100});
    tensor w = rt.constant(40, fill_with(1));
    tensor a = rt.call(add_op{1}, {w}, {.cost = 1}); // 80 resident
    const auto resident = rt.resident_bytes();
    const auto a_bytes = read(rt, a);
    try {
        (void)rt.call(mix_op{70}, {w, a}, {.cost = 1}); // 40 + 40 pinned + 70 > 100
        FAIL("no out_of_memory");
    } catch (const dtr::out_of_memory& e) {
        const std::string what = e.what();
        CHECK(contains(what, "cannot allocate 70 bytes"));
        CHECK(contains(what, "budget of 100 bytes"));
        CHECK(contains(what, "80 bytes resident"));
        CHECK(contains(what, "pinned: 80"));
        CHECK(e.info().requested == 70);
        CHECK(e.info().pinned == 80);
    }
    rt.check_invariants();
    CHECK(rt.resident_bytes() == resident);
    CHECK(rt.operator_count() == 1);
    // The runtime is usable: the next call succeeds (evicting a) and nothing was lost.
    tensor b = rt.call(mix_op{50}, {w}, {.cost = 1});
    CHECK(b.size() == 50);
    CHECK(read(rt, a) == a_bytes);
    CHECK(rt.stats().peak_resident_bytes <= 100);
    rt.check_invariants();
}

TEST_CASE("an operator that throws leaves no trace") {
    host_rt rt;
    tensor x = rt.constant(4, fill_with(0));
    auto bad = [](host_context& ctx) {
        ctx.output(0, 4);
        throw std::runtime_error("kernel failed");
    };
    CHECK_THROWS_WITH_AS(rt.call(bad, {x}), "kernel failed", std::runtime_error);
    CHECK(rt.storage_count() == 1);
    CHECK(rt.operator_count() == 0);
    CHECK(rt.resident_bytes() == 4);
    rt.check_invariants();
}

TEST_CASE("misuse is reported as dtr::logic_error naming the problem") {
    host_rt rt;
    tensor x = rt.constant(4, fill_with(0));
    tensor y = rt.call(add_op{1}, {x}, {.cost = 1});

    CHECK(contains(logic_error_of([&] { (void)rt.call(add_op{}, {tensor{}}); }),
                   "empty tensor handle"));
    tensor moved = y;
    tensor taken = std::move(moved);
    CHECK(contains(logic_error_of([&] { (void)rt.pin(moved); }), "empty tensor handle"));
    host_rt other;
    CHECK(contains(logic_error_of([&] { (void)other.call(add_op{}, {x}); }), "another runtime"));
    CHECK(contains(
        logic_error_of([&] { (void)rt.call([](host_context& c) { (void)c.input(2); }, {x}); }),
        "input index 2 out of range: the operator has 1 inputs"));
    CHECK(contains(
        logic_error_of([&] { (void)rt.call([](host_context& c) { c.output(1, 1); }, {x}); }),
        "output index 1 out of range"));
    CHECK(contains(logic_error_of([&] {
                       (void)rt.call(
                           [](host_context& c) {
                               c.output(0, 1);
                               c.output(0, 1);
                           },
                           {x});
                   }),
                   "output 0 produced twice"));
    CHECK(contains(logic_error_of([&] { (void)rt.call([](host_context&) {}, {x}); }),
                   "did not produce output 0"));
    CHECK(contains(logic_error_of([&] { rt.mutate([](host_context&) {}, {x}, {3}); }),
                   "mutated input index 3 out of range"));
    CHECK(contains(
        logic_error_of([&] { (void)rt.call([](host_context& c) { (void)c.inout(0); }, {x}); }),
        "not declared as mutated"));
    CHECK(contains(
        logic_error_of([&] { (void)rt.call([](host_context& c) { c.alias(0, 0, 2, 3); }, {x}); }),
        "exceeds input 0"));
    CHECK(contains(logic_error_of([&] { (void)rt.pin_for_write(y); }), "computed by an operator"));
    CHECK(contains(logic_error_of([&] { (void)rt.pin_for_write(rt.view(x, 1, 2)); }),
                   "already read by"));
    CHECK(contains(logic_error_of([&] { (void)rt.view(x, 3, 2); }), "exceeds a tensor of 4 bytes"));
    // Re-entering the runtime from an operator.
    CHECK(contains(logic_error_of([&] {
                       (void)rt.call(
                           [&](host_context& c) {
                               (void)rt.constant(1);
                               c.output(0, 1);
                           },
                           {x});
                   }),
                   "inside an operator"));
    rt.check_invariants();
    CHECK(rt.operator_count() == 1);
}

TEST_CASE("a non-deterministic operator is caught when rematerialized") {
    host_rt rt;
    tensor x = rt.constant(4, fill_with(0));
    int runs = 0;
    tensor y =
        rt.call([&runs](host_context& c) { c.output(0, static_cast<std::size_t>(4 + runs++)); },
                {x}, {.cost = 1});
    REQUIRE(rt.evict(y));
    CHECK(contains(logic_error_of([&] { (void)rt.pin(y); }), "is not deterministic"));
    rt.check_invariants();
}

TEST_CASE("handles outliving their runtime are orphans, not dangling") {
    tensor survivor;
    {
        host_rt rt;
        survivor = rt.constant(4, fill_with(0));
    }
    CHECK(survivor.valid());
    CHECK(survivor.size() == 4);
    survivor.reset(); // frees the orphaned node
    CHECK_FALSE(survivor.valid());
}

TEST_CASE("handles captured by a recipe are released when the recipe goes") {
    host_rt rt;
    tensor x = rt.constant(4, fill_with(0));
    tensor captured = rt.constant(4, fill_with(9));
    tensor y = rt.call([keep = captured](host_context& c) { c.output(0, 1); }, {x}, {.cost = 1});
    captured.reset();
    CHECK(rt.storage_count() == 3); // the recipe holds the capture
    y.reset(); // destroying the recipe drops the captured handle (deferred, then freed)
    CHECK(rt.storage_count() == 1);
    rt.check_invariants();
}

TEST_CASE("set_budget evicts down, and refuses what cannot be evicted") {
    host_rt rt;
    tensor w = rt.constant(10, fill_with(0));
    std::vector<tensor> ys;
    for (int i = 0; i < 5; ++i) ys.push_back(rt.call(add_op{i}, {w}, {.cost = 1}));
    CHECK(rt.resident_bytes() == 60);
    rt.set_budget(30);
    CHECK(rt.resident_bytes() <= 30);
    CHECK_THROWS_AS(rt.set_budget(5), dtr::out_of_memory);
    CHECK(rt.budget() == 30);
    for (int i = 0; i < 5; ++i)
        CHECK(read(rt, ys[static_cast<std::size_t>(i)]) == pattern(0, 10, i));
    rt.check_invariants();
}

TEST_CASE("measured costs come from the backend clock") {
    host_rt rt;
    tensor x = rt.constant(1 << 16, fill_with(0));
    tensor y = rt.call(add_op{1}, {x});
    CHECK(rt.stats().compute_cost > 0);
    CHECK(rt.clock() == rt.stats().compute_cost);
}

namespace {

//! Host memory whose execute() returns whatever cost the test sets: a broken backend.
struct bogus_cost_backend : dtr::host_backend {
    bogus_cost_backend() = default;
    dtr::cost_t next = 0;
    template <class Body>
    dtr::cost_t execute(Body&& body) {
        (void)host_backend::execute(std::forward<Body>(body));
        return next;
    }
};

} // namespace

TEST_CASE("a measured cost that is not a finite number >= 0 fails its call, changing nothing") {
    for (const dtr::cost_t bogus : {std::numeric_limits<double>::quiet_NaN(), -5.0,
                                    std::numeric_limits<double>::infinity()}) {
        CAPTURE(bogus);
        dtr::runtime<bogus_cost_backend, dtr::heuristics::lru> rt({.budget = 64});
        tensor x = rt.constant(16, fill_with(0));
        tensor y = rt.call(add_op{1}, {x}, {.cost = 7});
        rt.backend().next = bogus;
        const std::size_t storages = rt.storage_count();
        const std::string what = logic_error_of([&] { (void)rt.call(add_op{2}, {x}); });
        CHECK(contains(what, "execute() returned a cost of"));
        CHECK(contains(what, "finite number of ns >= 0"));
        CHECK(rt.clock() == 7);
        CHECK(rt.stats().compute_cost == 7);
        CHECK(rt.storage_count() == storages);
        rt.check_invariants();
        // A supplied cost does not read the measurement.
        tensor z = rt.call(add_op{3}, {x}, {.cost = 2});
        CHECK(rt.clock() == 9);
        // Nor is a recomputation of a supplied cost measured.
        tensor w = rt.call(add_op{4}, {x}, {.cost = 1});
        REQUIRE(rt.evict(y));
        CHECK(read(rt, y) == pattern(0, 16, 1));
        CHECK(rt.stats().remat_cost == 7);
        rt.check_invariants();
        // A measured recomputation is checked like a first run.
        rt.backend().next = 3;
        tensor v = rt.call(add_op{5}, {x});
        REQUIRE(rt.evict(v));
        rt.backend().next = bogus;
        CHECK(contains(logic_error_of([&] { (void)read(rt, v); }), "execute() returned a cost of"));
        CHECK(rt.stats().remat_cost == 7);
        CHECK(std::isfinite(rt.clock()));
        rt.check_invariants();
    }
}

TEST_CASE("remat_limit must be a number >= 0 at construction, as set_remat_limit requires") {
    for (const dtr::cost_t limit : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
        CAPTURE(limit);
        CHECK(contains(logic_error_of([&] { host_rt rt({.remat_limit = limit}); }),
                       "remat_limit must be a number of ns >= 0"));
    }
    host_rt unlimited({.remat_limit = std::numeric_limits<double>::infinity()});
    host_rt zero({.remat_limit = 0});
    CHECK(zero.options().remat_limit == 0);
}

TEST_CASE("zero-byte tensors are ordinary") {
    host_rt rt({.budget = 16});
    tensor e = rt.constant(0);
    tensor f = rt.call(mix_op{0}, {e}, {.cost = 1});
    CHECK(f.size() == 0);
    REQUIRE(rt.evict(f));
    CHECK(read(rt, f).empty());
}

TEST_CASE("heuristics choose their victims") {
    auto run = [](auto heuristic) {
        dtr::runtime<dtr::host_backend, decltype(heuristic)> rt({.budget = 1 << 20});
        tensor x = rt.constant(1, fill_with(0));
        // a: small, expensive, old; b: big, cheap; c: small, cheap, recent.
        tensor a = rt.call(mix_op{10}, {x}, {.cost = 1000});
        tensor b = rt.call(mix_op{40}, {x}, {.cost = 10});
        tensor c = rt.call(mix_op{10}, {x}, {.cost = 10});
        tensor d = rt.call(mix_op{1}, {c}, {.cost = 100}); // touches c
        rt.set_budget(rt.resident_bytes() - 1);            // exactly one eviction
        return std::array{rt.is_resident(a), rt.is_resident(b), rt.is_resident(c)};
    };
    CHECK(run(dtr::heuristics::lru{}) == std::array{false, true, true});     // a is oldest
    CHECK(run(dtr::heuristics::largest{}) == std::array{true, false, true}); // b is largest
    // dtr_local at clock 1120: a = 1000/(10*120), b = 10/(40*110), c = 10/(10*100): b.
    CHECK(run(dtr::heuristics::dtr_local{}) == std::array{true, false, true});
}
