// SPDX-License-Identifier: Apache-2.0
// Measured operator costs leave out the runtime's own work inside the operator (dtr::cost_clock):
// a backend on a manual clock whose deallocations take time, so that the evictions an output
// allocation makes are visible on the clock execute() measures with. With cost_clock() the
// recorded cost is the body's alone, first runs and recomputations alike; without it the
// evictions stay in, as before; supplied costs are untouched either way.
#include "support/byte_ops.hpp"

#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using dtr::tensor;
using namespace dtr_test;

namespace {

constexpr dtr::cost_t eviction_ns = 1000; //!< what freeing one block takes on the clock

//! Host memory on a manual clock: operator bodies advance it by what they say, and every
//! deallocation by eviction_ns. `Readable`: whether the backend offers cost_clock().
template <bool Readable>
class manual_clock_backend {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;

    pointer allocate(std::size_t bytes) { return memory_.allocate(bytes); }
    void deallocate(pointer p, std::size_t bytes) noexcept {
        memory_.deallocate(p, bytes);
        now_ += eviction_ns;
    }
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        memory_.copy(dst, src, bytes);
    }
    template <class Body>
    dtr::cost_t execute(Body&& body) {
        const dtr::cost_t start = now_;
        body();
        return now_ - start;
    }
    [[nodiscard]] dtr::cost_t cost_clock() const noexcept requires Readable { return now_; }

    void advance(dtr::cost_t ns) noexcept { now_ += ns; }

private:
    dtr::host_backend memory_;
    dtr::cost_t now_ = 0;
};

static_assert(dtr::cost_clock<manual_clock_backend<true>>);
static_assert(!dtr::cost_clock<manual_clock_backend<false>>);
static_assert(dtr::backend<manual_clock_backend<false>>);

//! out = in + 1, taking `ns` on the backend's clock before it allocates its output.
template <bool Readable>
struct ticking_add {
    manual_clock_backend<Readable>* backend;
    dtr::cost_t ns;
    void operator()(dtr::op_context<manual_clock_backend<Readable>>& ctx) const {
        backend->advance(ns);
        add_op{1}(ctx);
    }
};

//! Evicts the cheapest storage (ties: the last scanned).
struct cheapest {
    struct storage_data {};
    template <class S>
    double score(const S& s, const dtr::heuristic_context&) const noexcept {
        return static_cast<double>(s.cost());
    }
};

} // namespace

TEST_CASE_TEMPLATE("an operator's measured cost leaves out the evictions its output made", B,
                   manual_clock_backend<true>, manual_clock_backend<false>) {
    constexpr bool readable = dtr::cost_clock<B>;
    CAPTURE(readable);
    // Measured costs as measured: to the step tracker these calls are one operator (one
    // callable type, one input size) repeating, whose later calls would otherwise record the
    // lowest cost seen (runtime_options::repeat_costs; tested below).
    dtr::runtime<B, cheapest> rt(dtr::runtime_options{.repeat_costs = dtr::repeat_cost::measured});
    B& backend = rt.backend();
    tensor x = rt.constant(64, fill_with(0));
    tensor a = rt.call(ticking_add<readable>{&backend, 10}, {x});
    tensor b = rt.call(ticking_add<readable>{&backend, 20}, {a});
    CHECK(rt.stats().compute_cost == 30);
    // Room for x and two more: c's output evicts a (the cheaper) inside c's body.
    rt.set_budget(3 * 64);
    tensor c = rt.call(ticking_add<readable>{&backend, 40}, {b});
    REQUIRE_FALSE(rt.is_resident(a));
    CHECK(rt.stats().compute_cost == (readable ? 70 : 70 + eviction_ns));
    CHECK(rt.stats().runtime_work_in_operators == (readable ? eviction_ns : 0));
    // Recomputing a (10) evicts b (20, the cheapest) inside a's own output allocation.
    std::vector<std::uint8_t> expected(64);
    for (std::size_t i = 0; i < expected.size(); ++i)
        expected[i] = static_cast<std::uint8_t>(i + 1);
    CHECK(read(rt, a) == expected);
    CHECK(rt.stats().rematerializations == 1);
    CHECK_FALSE(rt.is_resident(b));
    CHECK(rt.stats().remat_cost == (readable ? 10 : 10 + eviction_ns));
    CHECK(rt.stats().runtime_work_in_operators == (readable ? 2 * eviction_ns : 0));
    // A supplied cost is recorded as supplied, evictions or not.
    const dtr::cost_t before = rt.stats().compute_cost;
    tensor d = rt.call(ticking_add<readable>{&backend, 80}, {x}, {.cost = 5});
    CHECK(rt.stats().compute_cost == before + 5);
    CHECK(rt.stats().runtime_work_in_operators == (readable ? 3 * eviction_ns : 0));
    rt.check_invariants();
}

// runtime_options::repeat_costs: a call that follows the recorded step records the lowest cost
// measured at its place so far; a call outside the step, and every call under `measured`, its
// own measurement; a supplied cost is recorded as supplied.
TEST_CASE("a call repeating the recorded step records the lowest cost measured at its place") {
    using B = manual_clock_backend<true>;
    for (const dtr::repeat_cost policy : {dtr::repeat_cost::lowest, dtr::repeat_cost::measured}) {
        const bool lowest = policy == dtr::repeat_cost::lowest;
        CAPTURE(lowest);
        dtr::runtime<B, cheapest> rt(dtr::runtime_options{.repeat_costs = policy});
        B& backend = rt.backend();
        const tensor x = rt.constant(64, fill_with(0));
        // What each of the step's three calls takes on the clock, step by step.
        const std::vector<std::vector<dtr::cost_t>> measured = {
            {50, 30, 70}, {40, 35, 70}, {45, 20, 90}, {60, 60, 60}};
        const std::vector<std::vector<dtr::cost_t>> lowest_so_far = {
            {50, 30, 70}, {40, 30, 70}, {40, 20, 70}, {40, 20, 60}};
        auto recorded = [&](auto&& call) {
            const dtr::cost_t before = rt.stats().compute_cost;
            call();
            return rt.stats().compute_cost - before;
        };
        for (std::size_t step = 0; step < measured.size(); ++step) {
            CAPTURE(step);
            rt.begin_step();
            tensor t = x;
            for (std::size_t k = 0; k < 3; ++k) {
                CAPTURE(k);
                const dtr::cost_t got = recorded([&] {
                    t = rt.call(ticking_add<true>{&backend, measured[step][k]}, {t});
                });
                CHECK(got == (lowest ? lowest_so_far[step][k] : measured[step][k]));
            }
            CHECK(rt.step_state().following == (step > 0));
        }
        // A step whose calls are not the recording's (another input size): each is skipped
        // over as an insertion, without the recording's costs, and records what it measured,
        // lower or not.
        rt.begin_step();
        const tensor y = rt.constant(128, fill_with(0));
        tensor t = y;
        for (std::size_t k = 0; k < 3; ++k)
            CHECK(recorded([&] { t = rt.call(ticking_add<true>{&backend, 100}, {t}); }) == 100);
        CHECK(rt.stats().step_insertions == 3);
        // Supplied costs are recorded as supplied in a followed step too.
        rt.begin_step(); // the step ended early: the 128-byte step is now the recording
        t = y;
        CHECK(recorded([&] {
                  t = rt.call(ticking_add<true>{&backend, 100}, {t}, {.cost = 500});
              }) == 500);
        CHECK(rt.step_state().following);
        CHECK(recorded([&] {
                  t = rt.call(ticking_add<true>{&backend, 150}, {t});
              }) == (lowest ? 100 : 150));
        rt.check_invariants();
    }
}
