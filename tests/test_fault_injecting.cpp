// SPDX-License-Identifier: Apache-2.0
// Unit tests of dtr::fault_injecting_backend: it models dtr::backend (and the optional
// capabilities) around every backend, injects what it is told, reproducibly, counts it, keeps
// the deferred-cost protocol whole, and the runtime survives it: refused allocations are
// evicted around or reported as out_of_memory, thrown executions leave no trace.
#include "support/byte_ops.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/backend/host_arena.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using dtr::tensor;
using namespace dtr_test;

namespace {

using faulty_host = dtr::fault_injecting_backend<dtr::host_backend>;

//! What fill_with(first) then `delta` applications of add_op{1} hold.
std::vector<std::uint8_t> pattern_of(std::uint8_t first, std::size_t n, int delta) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::uint8_t>(first + i + static_cast<std::size_t>(delta));
    return v;
}

//! Host memory whose costs arrive "later" (dtr::deferred_costs), each execute() i costing
//! 10 * (i + 1), finishing only on collection with cost_collection::wait.
class deferred_host_backend {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;
    pointer allocate(std::size_t bytes) { return memory_.allocate(bytes); }
    void deallocate(pointer p, std::size_t bytes) noexcept { memory_.deallocate(p, bytes); }
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        memory_.copy(dst, src, bytes);
    }
    template <class Body>
    dtr::cost_t execute(Body&& body) {
        body();
        in_flight_.push_back(10.0 * static_cast<double>(++started_));
        return 1;
    }
    template <class Sink>
    std::size_t collect_costs(Sink&& sink, dtr::cost_collection mode) {
        if (mode != dtr::cost_collection::wait) return 0;
        const std::size_t n = in_flight_.size();
        for (dtr::cost_t c : in_flight_) sink(c);
        in_flight_.clear();
        return n;
    }
    [[nodiscard]] std::size_t used_bytes() const noexcept { return memory_.used_bytes(); }

private:
    dtr::host_backend memory_;
    std::deque<dtr::cost_t> in_flight_;
    std::uint64_t started_ = 0;
};

static_assert(dtr::backend<faulty_host>);
static_assert(dtr::backend<dtr::fault_injecting_backend<dtr::host_arena_backend>>);
static_assert(dtr::reports_memory<dtr::fault_injecting_backend<dtr::host_arena_backend>>);
static_assert(dtr::backend<dtr::fault_injecting_backend<dtr::sim_backend>>);
static_assert(dtr::backend<dtr::fault_injecting_backend<deferred_host_backend>>);
static_assert(dtr::deferred_costs<dtr::fault_injecting_backend<deferred_host_backend>>);
static_assert(!dtr::deferred_costs<faulty_host>);
static_assert(!dtr::reports_memory<faulty_host>);
// An adaptor of an adaptor is still a backend.
static_assert(dtr::backend<dtr::fault_injecting_backend<faulty_host>>);

//! Which of the first `n` allocations of a fresh backend with these options fail.
std::vector<bool> allocation_pattern(dtr::fault_options options, int n) {
    faulty_host b(options);
    std::vector<bool> failed;
    for (int i = 0; i < n; ++i) {
        std::byte* p = b.allocate(8);
        failed.push_back(p == nullptr);
        if (p != nullptr) b.deallocate(p, 8);
    }
    return failed;
}

//! Which of the first `n` executions fail: 0 ran, 1 failed before the body, 2 after it.
std::vector<int> execution_pattern(dtr::fault_options options, int n) {
    faulty_host b(options);
    std::vector<int> what;
    for (int i = 0; i < n; ++i) {
        bool ran = false;
        try {
            (void)b.execute([&] { ran = true; });
            what.push_back(0);
        } catch (const dtr::injected_fault& e) {
            CHECK(e.execution() == static_cast<std::uint64_t>(i));
            CHECK(ran == (e.site() == dtr::fault_site::after_body));
            what.push_back(e.site() == dtr::fault_site::before_body ? 1 : 2);
        }
    }
    return what;
}

} // namespace

TEST_CASE("without faults the adaptor is the wrapped backend") {
    dtr::runtime<faulty_host> rt({.budget = 64});
    tensor x = rt.constant(16, fill_with(1));
    std::vector<tensor> chain{x};
    for (int i = 0; i < 8; ++i) chain.push_back(rt.call(add_op{1}, {chain.back()}, {.cost = 1}));
    for (int i = 8; i >= 0; --i)
        CHECK(read(rt, chain[static_cast<std::size_t>(i)]) ==
              read(rt, rt.call(add_op{i}, {x}, {.cost = 1})));
    CHECK(rt.backend().faults().total() == 0);
    CHECK(rt.backend().faults().allocations == rt.stats().allocations);
    CHECK(rt.backend().faults().executions ==
          rt.stats().operators_run + rt.stats().rematerializations);
    CHECK(rt.backend().peak_bytes() <= 64);
    chain.clear();
    x.reset();
    CHECK(rt.backend().used_bytes() == 0);
    CHECK(rt.backend().upstream().used_bytes() == 0);
}

TEST_CASE("faults come at the configured rates, reproducibly from the seed") {
    const std::vector<bool> a =
        allocation_pattern({.seed = 7, .allocation_fault_rate = 0.25}, 4000);
    CHECK(a == allocation_pattern({.seed = 7, .allocation_fault_rate = 0.25}, 4000));
    CHECK(a != allocation_pattern({.seed = 8, .allocation_fault_rate = 0.25}, 4000));
    const auto failures = static_cast<double>(std::count(a.begin(), a.end(), true));
    CHECK(failures / 4000 > 0.22);
    CHECK(failures / 4000 < 0.28);
    // A lower rate with the same seed fails a subset of the same calls.
    const std::vector<bool> low =
        allocation_pattern({.seed = 7, .allocation_fault_rate = 0.1}, 4000);
    for (std::size_t i = 0; i < low.size(); ++i)
        if (low[i]) CHECK(a[i]);
    CHECK(std::count(low.begin(), low.end(), true) < std::count(a.begin(), a.end(), true));
    CHECK(std::count(low.begin(), low.end(), true) > 0);

    const std::vector<int> e =
        execution_pattern({.seed = 3, .execution_fault_rate = 0.5, .after_body_share = 0.5}, 4000);
    CHECK(e == execution_pattern({.seed = 3, .execution_fault_rate = 0.5, .after_body_share = 0.5},
                                 4000));
    const auto before = static_cast<double>(std::count(e.begin(), e.end(), 1));
    const auto after = static_cast<double>(std::count(e.begin(), e.end(), 2));
    CHECK((before + after) / 4000 > 0.46);
    CHECK((before + after) / 4000 < 0.54);
    CHECK(before / (before + after) > 0.45);
    CHECK(before / (before + after) < 0.55);
    // Allocations and executions draw from separate streams: executions do not shift which
    // allocations fail.
    faulty_host b({.seed = 7, .allocation_fault_rate = 0.25, .execution_fault_rate = 0.5});
    std::vector<bool> mixed;
    for (int i = 0; i < 200; ++i) {
        try {
            (void)b.execute([] {});
        } catch (const dtr::injected_fault&) {}
        std::byte* p = b.allocate(1);
        mixed.push_back(p == nullptr);
        if (p != nullptr) b.deallocate(p, 1);
    }
    CHECK(mixed == std::vector<bool>(a.begin(), a.begin() + 200));
}

TEST_CASE("rates 0 and 1, the site share, counters, disabling and bad options") {
    CHECK(allocation_pattern({.allocation_fault_rate = 1}, 50) == std::vector<bool>(50, true));
    CHECK(allocation_pattern({.allocation_fault_rate = 0}, 50) == std::vector<bool>(50, false));
    CHECK(execution_pattern({.execution_fault_rate = 1, .after_body_share = 0}, 50) ==
          std::vector<int>(50, 1));
    CHECK(execution_pattern({.execution_fault_rate = 1, .after_body_share = 1}, 50) ==
          std::vector<int>(50, 2));

    faulty_host b(
        {.seed = 1, .allocation_fault_rate = 1, .execution_fault_rate = 1, .after_body_share = 1});
    CHECK(b.allocate(4) == nullptr);
    CHECK_THROWS_AS((void)b.execute([] {}), dtr::injected_fault);
    b.set_enabled(false);
    CHECK_FALSE(b.enabled());
    std::byte* p = b.allocate(4);
    CHECK(p != nullptr);
    CHECK(b.used_bytes() == 4);
    b.deallocate(p, 4);
    CHECK_NOTHROW((void)b.execute([] {}));
    b.set_enabled(true);
    CHECK(b.allocate(4) == nullptr);
    const dtr::fault_counters& c = b.faults();
    CHECK(c.allocations == 3);
    CHECK(c.allocation_faults == 2);
    CHECK(c.executions == 2);
    CHECK(c.faults_after_body == 1);
    CHECK(c.faults_before_body == 0);
    CHECK(c.total() == 3);

    CHECK_THROWS_AS(faulty_host({.allocation_fault_rate = 1.5}), dtr::logic_error);
    CHECK_THROWS_AS(b.set_options({.execution_fault_rate = -0.1}), dtr::logic_error);
    CHECK_THROWS_AS(b.set_options({.after_body_share = std::numeric_limits<double>::quiet_NaN()}),
                    dtr::logic_error);
    CHECK(b.options().allocation_fault_rate == 1); // unchanged by the rejected options
    try {
        (void)faulty_host({.allocation_fault_rate = 2});
    } catch (const dtr::logic_error& e) {
        CHECK(std::string(e.what()).find("allocation_fault_rate must be in [0, 1]") !=
              std::string::npos);
    }
}

TEST_CASE(
    "the runtime evicts around refused allocations and reports out_of_memory when it cannot") {
    dtr::runtime<faulty_host> rt({.budget = 256},
                                 faulty_host({.seed = 11, .allocation_fault_rate = 0.3}));
    rt.backend().set_enabled(false);
    tensor x = rt.constant(16, fill_with(3));
    rt.backend().set_enabled(true);
    std::vector<tensor> chain{x};
    std::uint64_t ooms = 0;
    for (int i = 0; i < 60; ++i) {
        for (;;) {
            try {
                chain.push_back(rt.call(add_op{1}, {chain.back()}, {.cost = 1}));
                break;
            } catch (const dtr::out_of_memory& e) {
                // Nothing was evictable when the backend refused: the message says so.
                CHECK(std::string(e.what()).find("the backend has no block") != std::string::npos);
                ++ooms;
                rt.check_invariants();
            }
        }
        rt.check_invariants();
    }
    CHECK(rt.stats().allocation_retries > 0);
    CHECK(rt.backend().faults().allocation_faults > 0);
    CHECK(rt.backend().faults().allocation_faults >= rt.stats().allocation_retries);
    CHECK(rt.resident_bytes() <= 256);
    rt.backend().set_enabled(false);
    for (int i = 60; i >= 0; --i) {
        const auto expected = pattern_of(3, 16, i);
        CHECK(read(rt, chain[static_cast<std::size_t>(i)]) == expected);
    }
    MESSAGE(ooms, " out_of_memory recovered, ", rt.stats().allocation_retries, " retries");
    chain.clear();
    x.reset();
    CHECK(rt.storage_count() == 0);
    CHECK(rt.backend().used_bytes() == 0);
}

TEST_CASE(
    "an execution that fails before or after its body leaves no trace, also in a "
    "rematerialization") {
    for (const double share : {0.0, 1.0}) {
        CAPTURE(share);
        dtr::runtime<faulty_host> rt(
            {.budget = 64},
            faulty_host({.seed = 5, .execution_fault_rate = 0.4, .after_body_share = share}));
        rt.backend().set_enabled(false);
        tensor x = rt.constant(16, fill_with(9));
        std::vector<tensor> chain{x};
        for (int i = 0; i < 6; ++i)
            chain.push_back(rt.call(add_op{1}, {chain.back()}, {.cost = 1}));
        rt.backend().set_enabled(true);
        // Everything but the last link is evicted by now: reading the first recomputes the
        // chain up to it, with faults at random depths.
        int failures = 0;
        for (int i = 6; i >= 1; --i) {
            for (;;) {
                const std::size_t storages = rt.storage_count(), ops = rt.operator_count();
                try {
                    const std::vector<std::uint8_t> got =
                        read(rt, chain[static_cast<std::size_t>(i)]);
                    CHECK(got == pattern_of(9, 16, i));
                    break;
                } catch (const dtr::injected_fault& e) {
                    ++failures;
                    CHECK(e.site() == (share == 0 ? dtr::fault_site::before_body
                                                  : dtr::fault_site::after_body));
                    CHECK(rt.storage_count() == storages);
                    CHECK(rt.operator_count() == ops);
                    rt.check_invariants();
                }
            }
        }
        CHECK(failures > 0);
        CHECK(static_cast<std::uint64_t>(failures) == rt.backend().faults().execution_faults());
        // A failed first run adds nothing either.
        rt.backend().set_options({.seed = 5, .execution_fault_rate = 1, .after_body_share = share});
        const std::size_t storages = rt.storage_count();
        CHECK_THROWS_AS((void)rt.call(add_op{1}, {x}, {.cost = 1}), dtr::injected_fault);
        CHECK(rt.storage_count() == storages);
        rt.check_invariants();
        chain.clear();
        x.reset();
        CHECK(rt.storage_count() == 0);
        CHECK(rt.backend().used_bytes() == 0);
    }
}

TEST_CASE(
    "deferred costs: a measurement whose execution failed after its body is never handed over") {
    using faulty_deferred = dtr::fault_injecting_backend<deferred_host_backend>;
    dtr::runtime<faulty_deferred> rt(
        {}, faulty_deferred({.seed = 2, .execution_fault_rate = 0.5, .after_body_share = 1}));
    tensor x = rt.constant(8, fill_with(0));
    std::vector<tensor> kept;
    int failed = 0;
    for (int i = 0; i < 40; ++i) {
        try {
            kept.push_back(rt.call(add_op{1}, {x}));
        } catch (const dtr::injected_fault&) {
            ++failed;
        }
    }
    REQUIRE(failed > 0);
    REQUIRE(kept.size() > 0);
    rt.settle_costs();
    // The wrapped backend costs execution i (from 1) 10 * i; the failed ones must not count.
    // Recompute the expected sum from the fault pattern of the same seed.
    faulty_deferred probe({.seed = 2, .execution_fault_rate = 0.5, .after_body_share = 1});
    double expected = 0;
    for (int i = 1; i <= 40; ++i) {
        try {
            (void)probe.execute([] {});
            expected += 10.0 * i;
        } catch (const dtr::injected_fault&) {}
    }
    CHECK(rt.stats().compute_cost == doctest::Approx(expected));
    CHECK(rt.clock() == doctest::Approx(expected));
    rt.check_invariants();
}

TEST_CASE("memory_info passes through, counting injected refusals; statistics are forwarded") {
    using faulty_sim = dtr::fault_injecting_backend<dtr::sim_backend>;
    faulty_sim sim({.allocation_fault_rate = 1}, dtr::sim_backend::with_arena(4096, 256));
    REQUIRE(sim.memory_info().has_value());
    CHECK(sim.allocate(10) == 0);
    CHECK(sim.memory_info()->refusals == 1);
    CHECK(sim.refusals() == 0);
    sim.set_enabled(false);
    const auto p = sim.allocate(10);
    CHECK(p != 0);
    CHECK(sim.used_bytes() == 256);
    CHECK(sim.layout() != nullptr);
    sim.deallocate(p, 10);
    CHECK(faulty_sim().memory_info() == std::nullopt); // endless address space

    dtr::fault_injecting_backend<dtr::host_arena_backend> arena({}, dtr::host_arena_backend(1024));
    CHECK(arena.capacity() == 1024);
    std::byte* q = arena.allocate(100);
    CHECK(q == arena.base());
    CHECK(arena.memory_info()->used == 128);
    // The placed allocation and the region's layout pass through too.
    std::byte* top = arena.allocate(64, dtr::arena::placement::high);
    CHECK(arena.region_offset(top) == 1024 - 64);
    CHECK(arena.has_layout());
    CHECK(arena.layout_alignment() == 64);
    std::size_t blocks = 0;
    arena.for_each_block([&](std::size_t, std::size_t, bool) { ++blocks; });
    CHECK(blocks == 3);
    arena.deallocate(top, 64);
    arena.deallocate(q, 100);
    CHECK(arena.layout().used_bytes() == 0);
    arena.set_options({.allocation_fault_rate = 1});
    CHECK(arena.allocate(64, dtr::arena::placement::high) == nullptr);
    CHECK(arena.faults().allocation_faults == 1);
    CHECK(arena.faults().allocations == 3);
}

TEST_CASE("the wrapped backend's host tier passes through: offload, copies back and ahead") {
    static_assert(dtr::offloading_backend<faulty_host>);
    static_assert(dtr::copying_ahead_backend<faulty_host>);
    static_assert(dtr::copying_ahead_backend<dtr::fault_injecting_backend<dtr::sim_backend>>);
    static_assert(!dtr::offloading_backend<dtr::fault_injecting_backend<dtr::host_arena_backend>>);
    dtr::host_backend upstream;
    upstream.enable_host_tier({.transfer = {.bandwidth = 1e9, .latency = 50}});
    dtr::runtime<faulty_host, dtr::heuristics::lru> rt(
        {.budget = 64, .offload = dtr::offload_policy::always, .offload_ahead = 1},
        faulty_host({}, std::move(upstream)));
    CHECK(rt.backend().has_host_tier());
    tensor x = rt.constant(16, fill_with(3));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1e6});
    tensor b = rt.call(add_op{1}, {a}, {.cost = 1e6});
    // 48 of 64 bytes resident: a, older than b, got a copy ahead of eviction.
    CHECK(rt.stats().copies_ahead == 1);
    CHECK(rt.evict(a));
    CHECK(rt.is_offloaded(a));
    CHECK(rt.stats().offloads_clean == 1);
    CHECK(rt.evict(b));
    CHECK(rt.is_offloaded(b));
    CHECK(rt.stats().offloads == 1);
    CHECK(read(rt, a) == pattern_of(3, 16, 1));
    CHECK(read(rt, b) == pattern_of(3, 16, 2));
    CHECK(rt.stats().copy_backs == 2);
    CHECK(rt.stats().rematerializations == 0);
    CHECK(rt.backend().faults().transfers == 4); // one ahead, one out, two back
    CHECK(rt.backend().upstream().tier().used_bytes() == 32);
    rt.check_invariants();
    a.reset();
    b.reset();
    CHECK(rt.backend().upstream().tier().used_bytes() == 0);
}

TEST_CASE(
    "faults injected into transfers: an out-copy that fails drops its victim, a copy-back "
    "that fails fails its read; nothing is lost") {
    dtr::host_backend upstream;
    upstream.enable_host_tier({});
    dtr::runtime<faulty_host, dtr::heuristics::lru> rt(
        {.budget = 1024, .offload = dtr::offload_policy::always},
        faulty_host({.seed = 4, .transfer_fault_rate = 1}, std::move(upstream)));
    tensor x = rt.constant(16, fill_with(3));
    tensor a = rt.call(add_op{1}, {x}, {.cost = 1});
    CHECK(rt.evict(a));
    CHECK_FALSE(rt.is_offloaded(a)); // dropped: its recipe brings it back
    CHECK(rt.stats().evictions == 1);
    CHECK(rt.backend().faults().copy_out_faults == 1);
    CHECK(read(rt, a) == pattern_of(3, 16, 1));
    rt.backend().set_enabled(false);
    CHECK(rt.evict(a));
    CHECK(rt.is_offloaded(a));
    rt.backend().set_enabled(true);
    const std::size_t resident = rt.resident_bytes();
    try {
        (void)read(rt, a);
        FAIL("no injected fault");
    } catch (const dtr::injected_fault& e) {
        CHECK(e.site() == dtr::fault_site::copy_in);
        CHECK(std::string(e.what()).find("copy back from the host tier") != std::string::npos);
    }
    CHECK(rt.is_offloaded(a));
    CHECK(rt.resident_bytes() == resident); // the block taken for it was given back
    CHECK(rt.backend().faults().copy_in_faults == 1);
    CHECK(rt.backend().faults().transfer_faults() == 2);
    CHECK(rt.backend().faults().total() == 2);
    rt.check_invariants();
    rt.backend().set_enabled(false);
    CHECK(read(rt, a) == pattern_of(3, 16, 1));
    rt.check_invariants();
}

TEST_CASE("transfer faults come at their rate from their own stream") {
    const auto pattern = [](dtr::fault_options options) {
        dtr::host_backend upstream;
        upstream.enable_host_tier({});
        faulty_host b(options, std::move(upstream));
        std::byte* block = b.allocate(8);
        std::vector<bool> failed;
        for (int i = 0; i < 2000; ++i) {
            bool fault = false;
            try {
                auto r = i % 2 ? b.copy_out(block, 8, 0) : b.copy_out_ahead(block, 8, 0);
                try {
                    (void)b.copy_in(block, std::as_const(r.copy), 8, 0);
                } catch (const dtr::injected_fault& e) {
                    CHECK(e.site() == dtr::fault_site::copy_in);
                    fault = true;
                }
                b.free_host(r.copy, 8);
            } catch (const dtr::injected_fault& e) {
                CHECK(e.site() == dtr::fault_site::copy_out);
                fault = true;
            }
            failed.push_back(fault);
            // Executions do not shift the transfer stream.
            try {
                (void)b.execute([] {});
            } catch (const dtr::injected_fault&) {}
        }
        b.deallocate(block, 8);
        CHECK(b.upstream().tier().used_bytes() == 0);
        return failed;
    };
    const std::vector<bool> f = pattern({.seed = 9, .transfer_fault_rate = 0.3});
    CHECK(f == pattern({.seed = 9, .transfer_fault_rate = 0.3}));
    CHECK(f == pattern({.seed = 9, .execution_fault_rate = 0.5, .transfer_fault_rate = 0.3}));
    // Each round is two transfers, each failing with probability 0.3: 0.51 of the rounds fail.
    const auto share = static_cast<double>(std::count(f.begin(), f.end(), true)) / 2000;
    CHECK(share > 0.46);
    CHECK(share < 0.56);
    CHECK_THROWS_AS(faulty_host({.transfer_fault_rate = 1.5}), dtr::logic_error);
}
