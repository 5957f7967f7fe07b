// SPDX-License-Identifier: Apache-2.0
// The runtime's side of lazy cost measurement (dtr::deferred_costs), without a GPU: a host
// backend whose execute() returns a provisional cost and whose true costs "finish" when the
// test says so, as CUDA events would. Checks the pairing of measurements with executions
// (supplied costs, discarded runs, destroyed records in between), the corrections to clock,
// counters and storage costs, and that victim choice sees every finished measurement
// without waiting for the others.
#include "support/byte_ops.hpp"
#include "support/expect.hpp"

#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

using dtr::tensor;
using namespace dtr_test;

namespace {

//! Host memory, synchronous execution, but costs known only "later".
class deferred_host_backend {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;
    static constexpr dtr::cost_t provisional = 1;

    pointer allocate(std::size_t bytes) { return memory_.allocate(bytes); }
    void deallocate(pointer p, std::size_t bytes) noexcept { memory_.deallocate(p, bytes); }
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        memory_.copy(dst, src, bytes);
    }

    template <class Body>
    dtr::cost_t execute(Body&& body) {
        body(); // a throwing body starts no measurement
        const dtr::cost_t actual = planned_.empty() ? provisional : planned_.front();
        if (!planned_.empty()) planned_.pop_front();
        in_flight_.push_back(actual);
        return provisional;
    }

    template <class Sink>
    std::size_t collect_costs(Sink&& sink, dtr::cost_collection mode) {
        ++calls_[static_cast<int>(mode)];
        if (mode == dtr::cost_collection::wait) finished_ = in_flight_.size();
        std::size_t handed = 0;
        while (finished_ > 0 && !in_flight_.empty()) {
            sink(in_flight_.front());
            in_flight_.pop_front();
            --finished_;
            ++handed;
        }
        return handed;
    }

    //! The true cost of the next execute() calls, in order.
    void plan(std::initializer_list<dtr::cost_t> costs) { planned_.insert(planned_.end(), costs); }
    //! The `n` oldest measurements in flight finish (a later collection hands them over).
    void finish(std::size_t n) { finished_ += n; }
    [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_.size(); }
    [[nodiscard]] int calls(dtr::cost_collection mode) const noexcept {
        return calls_[static_cast<int>(mode)];
    }

private:
    dtr::host_backend memory_;
    std::deque<dtr::cost_t> planned_;
    std::deque<dtr::cost_t> in_flight_;
    std::size_t finished_ = 0;
    int calls_[3] = {0, 0, 0};
};

static_assert(dtr::backend<deferred_host_backend>);
static_assert(dtr::deferred_costs<deferred_host_backend>);
static_assert(!dtr::deferred_costs<dtr::host_backend>);

using ctx_t = dtr::op_context<deferred_host_backend>;

//! Evicts the cheapest storage first (ties: the last one scanned), and counts the pool
//! hooks it sees.
struct cheapest {
    struct storage_data {};
    int pool_inserts = 0;
    int pool_erases = 0;
    template <class S>
    double score(const S& s, const dtr::heuristic_context&) const noexcept {
        return static_cast<double>(s.cost());
    }
    template <class S>
    void on_pool_insert(S&, const dtr::heuristic_context&) noexcept {
        ++pool_inserts;
    }
    template <class S>
    void on_pool_erase(S&, const dtr::heuristic_context&) noexcept {
        ++pool_erases;
    }
};

using rt_t = dtr::runtime<deferred_host_backend, cheapest>;

} // namespace

TEST_CASE("provisional costs now, true costs once measured") {
    rt_t rt;
    rt.backend().plan({100, 200});
    tensor x = rt.constant(8, fill_with(0));
    tensor a = rt.call(add_op{1}, {x});
    tensor b = rt.call(add_op{1}, {a});
    CHECK(rt.clock() == 2 * deferred_host_backend::provisional);
    CHECK(rt.backend().in_flight() == 2);
    rt.settle_costs();
    CHECK(rt.backend().in_flight() == 0);
    CHECK(rt.clock() == 300);
    CHECK(rt.stats().compute_cost == 300);
    CHECK(rt.backend().calls(dtr::cost_collection::wait) == 1);
    // One routine collection before each operator run.
    CHECK(rt.backend().calls(dtr::cost_collection::routine) == 2);
    rt.check_invariants();
}

TEST_CASE("victim choice folds in finished measurements and does not wait for the rest") {
    for (const bool finished : {true, false}) {
        CAPTURE(finished);
        rt_t rt;
        tensor x = rt.constant(8, fill_with(0));
        rt.settle_costs();
        // a turns out cheap, b expensive. Provisionally both cost the same, and the scan's
        // tie rule (the last lowest) would pick b.
        rt.backend().plan({5, 500});
        tensor a = rt.call(add_op{1}, {x});
        tensor b = rt.call(add_op{2}, {x});
        if (finished) rt.backend().finish(2);
        const auto ready_calls = rt.backend().calls(dtr::cost_collection::ready);
        rt.set_budget(rt.resident_bytes() - 1); // one eviction
        CHECK(rt.backend().calls(dtr::cost_collection::ready) == ready_calls + 1);
        CHECK(rt.is_resident(a) != finished);
        CHECK(rt.is_resident(b) == finished);
        CHECK(rt.clock() == (finished ? 505 : 2 * deferred_host_backend::provisional));
        CHECK(rt.backend().in_flight() == (finished ? 0 : 2));
        CHECK(read(rt, a) == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
        rt.check_invariants();
    }
}

TEST_CASE("a cost correction reaches heuristics as the storage leaving and rejoining the pool") {
    rt_t rt;
    tensor x = rt.constant(8, fill_with(0));
    rt.backend().plan({50});
    tensor a = rt.call(add_op{1}, {x});
    const int inserts = rt.heuristic().pool_inserts, erases = rt.heuristic().pool_erases;
    rt.settle_costs();
    CHECK(rt.heuristic().pool_inserts == inserts + 1);
    CHECK(rt.heuristic().pool_erases == erases + 1);
    rt.check_invariants();
}

TEST_CASE("supplied costs stay as supplied, and measurements stay paired with their runs") {
    rt_t rt;
    tensor x = rt.constant(8, fill_with(0));
    // measured (100), supplied 7 (its measurement, 1000, is ignored), measured (10).
    rt.backend().plan({100, 1000, 10});
    tensor a = rt.call(add_op{1}, {x});
    tensor b = rt.call(add_op{1}, {x}, {.cost = 7});
    tensor c = rt.call(add_op{1}, {x});
    rt.settle_costs();
    CHECK(rt.clock() == 117);
    CHECK(rt.stats().compute_cost == 117);
}

TEST_CASE("discarded runs keep the pairing: throwing bodies and missing outputs") {
    rt_t rt;
    tensor x = rt.constant(8, fill_with(0));
    rt.backend().plan({100, 1000, 10});
    tensor a = rt.call(add_op{1}, {x});
    // execute() returns normally, then the runtime rejects the run: its measurement (1000)
    // arrives and must not be paired with the next operator.
    CHECK_THROWS_AS(rt.call([](ctx_t&) {}, {x}), dtr::logic_error);
    // A body that throws starts no measurement at all.
    CHECK_THROWS_AS(rt.call(
                        [](ctx_t& c) {
                            c.output(0, 8);
                            throw std::runtime_error("kernel failed");
                        },
                        {x}),
                    std::runtime_error);
    tensor c = rt.call(add_op{1}, {x});
    rt.settle_costs();
    CHECK(rt.clock() == 110);
    CHECK(rt.stats().compute_cost == 110);
    rt.check_invariants();
}

TEST_CASE("a measurement that is not a finite number >= 0 is refused; the clock keeps its course") {
    for (const dtr::cost_t bogus : {std::numeric_limits<double>::quiet_NaN(), -50.0,
                                    std::numeric_limits<double>::infinity()}) {
        CAPTURE(bogus);
        rt_t rt;
        rt.backend().plan({100, bogus, 10});
        tensor x = rt.constant(8, fill_with(0));
        tensor a = rt.call(add_op{1}, {x});
        tensor b = rt.call(add_op{1}, {a});
        tensor c = rt.call(add_op{1}, {b});
        std::string what;
        try {
            rt.settle_costs();
        } catch (const dtr::logic_error& e) {
            what = e.what();
        }
        CHECK(what.find("collect_costs() handed over a cost of") != std::string::npos);
        // The bad measurement leaves b's provisional cost; the others are folded in.
        CHECK(rt.clock() == 100 + deferred_host_backend::provisional + 10);
        CHECK(rt.stats().compute_cost == 100 + deferred_host_backend::provisional + 10);
        CHECK(rt.backend().in_flight() == 0);
        rt.check_invariants();
        // The runtime goes on.
        tensor d = rt.call(add_op{1}, {c});
        rt.settle_costs();
        CHECK(rt.clock() == 111 + deferred_host_backend::provisional);
        CHECK(read(rt, d) == pattern(0, 8, 4));
    }
}

TEST_CASE("rematerializations are measured and corrected too") {
    rt_t rt;
    tensor x = rt.constant(8, fill_with(0));
    rt.backend().plan({40, 60});
    tensor a = rt.call(add_op{3}, {x});
    REQUIRE(rt.evict(a));
    CHECK(read(rt, a) == std::vector<std::uint8_t>{3, 4, 5, 6, 7, 8, 9, 10});
    rt.settle_costs();
    CHECK(rt.stats().compute_cost == 40);
    CHECK(rt.stats().remat_cost == 60);
    CHECK(rt.clock() == 100);
}

TEST_CASE("records destroyed before their measurement arrives are not touched") {
    rt_t rt;
    tensor w = rt.constant(8, fill_with(0));
    rt.backend().plan({10, 20, 30, 40});
    tensor a = rt.call(add_op{1}, {w});
    tensor b = rt.call(add_op{1}, {a});
    a.reset();
    b.reset(); // both records go (no handle, no dependent)
    CHECK(rt.operator_count() == 0);
    // A record dropped at once: updating a constant leaves nothing to recompute.
    rt.mutate([](ctx_t& c) { c.inout(0).data()[0] = std::byte{9}; }, {w}, {0});
    CHECK(rt.operator_count() == 0);
    tensor c = rt.call(add_op{1}, {w});
    rt.settle_costs(); // under ASan, touching a freed record would be caught here
    CHECK(rt.clock() == 100);
    CHECK(read(rt, c)[0] == 10);
    rt.check_invariants();
}

TEST_CASE("many measurements in flight, handed over piecemeal") {
    rt_t rt;
    tensor x = rt.constant(8, fill_with(0));
    std::vector<tensor> keep;
    double expected = 0;
    for (int i = 0; i < 1000; ++i) {
        const double cost = 1 + i % 7;
        rt.backend().plan({cost});
        expected += cost;
        keep.push_back(rt.call(add_op{i}, {x}));
        if (i % 3 == 0) rt.backend().finish(2);
        if (i % 100 == 0) rt.set_budget(rt.resident_bytes() + 64); // victim searches collect
        if (keep.size() > 50) keep.erase(keep.begin());
    }
    rt.settle_costs();
    CHECK(rt.stats().compute_cost == doctest::Approx(expected));
    CHECK(rt.clock() == doctest::Approx(expected));
    rt.check_invariants();
}
