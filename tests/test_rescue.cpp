// SPDX-License-Identifier: Apache-2.0
// The rescue of the forecast policies (heuristics::next_use_aware, docs/heuristics.md): an
// online run that rematerializes one storage twice turns the scores without a forecast
// into dtr_held's bounded walks. It must turn on exactly then, under the indexed search too
// (which sends the events to the online policy directly), score what the formula says, and
// leave a restore of a long chain, which recomputes each storage once, on the online scores.
#include "support/byte_ops.hpp"

#include <dtr/heuristic/next_use.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/indexed.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

namespace {

namespace h = dtr::heuristics;

//! The policy of a runtime over dtr_next_use, searched or not.
template <class Runtime>
const h::dtr_next_use& policy_of(Runtime& rt) {
    if constexpr (requires { rt.heuristic().inner(); })
        return rt.heuristic().inner();
    else
        return rt.heuristic();
}

//! Evicts `t` and reads it back `times` times; returns whether the rescue was on after each.
template <class Runtime>
std::vector<bool> recompute(Runtime& rt, const dtr::tensor& t, int times) {
    std::vector<bool> on;
    for (int i = 0; i < times; ++i) {
        REQUIRE(rt.evict(t));
        (void)rt.pin(t);
        on.push_back(policy_of(rt).rescuing());
    }
    return on;
}

template <class Runtime>
void turns_on_at_the_second_rematerialization() {
    Runtime rt({.steps = dtr::step_learning::off});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(3));
    dtr::tensor a = rt.call(dtr_test::mix_op{16}, {x}, {.cost = 1.0});
    dtr::tensor b = rt.call(dtr_test::mix_op{24}, {a}, {.cost = 2.0});
    CHECK_FALSE(policy_of(rt).rescuing());
    // Two storages recomputed once each: no single storage twice yet.
    CHECK(recompute(rt, a, 1) == std::vector<bool>{false});
    CHECK(recompute(rt, b, 1) == std::vector<bool>{false});
    // The second rematerialization of one storage turns it on, for good.
    CHECK(recompute(rt, a, 2) == std::vector<bool>{true, true});
    CHECK(rt.stats().rematerializations == 4);
}

} // namespace

TEST_CASE("the rescue turns on at a storage's second rematerialization without a forecast") {
    turns_on_at_the_second_rematerialization<dtr::runtime<dtr::host_backend, h::dtr_next_use>>();
}

TEST_CASE("the rescue turns on under the indexed search too (events go to the online policy)") {
    turns_on_at_the_second_rematerialization<
        dtr::runtime<dtr::host_backend, dtr::search::indexed<h::dtr_next_use>>>();
}

TEST_CASE("the rescue scores as dtr_held: evicted ancestors, and held evicted descendants") {
    using runtime_type = dtr::runtime<dtr::host_backend, h::dtr_next_use>;
    runtime_type rt({.steps = dtr::step_learning::off});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(3));
    // x -> a -> b -> c -> d -> e, costs 1, 2, 4, 8, 16; c is scored.
    dtr::tensor a = rt.call(dtr_test::mix_op{16}, {x}, {.cost = 1.0});
    dtr::tensor b = rt.call(dtr_test::mix_op{24}, {a}, {.cost = 2.0});
    dtr::tensor c = rt.call(dtr_test::mix_op{32}, {b}, {.cost = 4.0});
    dtr::tensor d = rt.call(dtr_test::mix_op{40}, {c}, {.cost = 8.0});
    dtr::tensor e = rt.call(dtr_test::mix_op{48}, {d}, {.cost = 16.0});
    (void)recompute(rt, a, 3);
    REQUIRE(rt.heuristic().rescuing());
    for (const dtr::tensor* t : {&a, &b, &d, &e}) REQUIRE(rt.evict(*t));
    d.reset(); // evicted and released: walked through, not charged

    const typename runtime_type::storage_type* scored = nullptr;
    rt.for_each_storage([&](const auto& s) {
        if (s.size() == 32) scored = &s;
    });
    REQUIRE(scored != nullptr);
    const dtr::heuristic_context ctx{.now = scored->last_access() + 10};
    // c itself (4), its evicted ancestors b and a (2 + 1), its held evicted descendant e
    // (16); d (8) has no handle. Over size 32 x staleness 10.
    CHECK(rt.heuristic().score(*scored, ctx) == doctest::Approx((4.0 + 2 + 1 + 16) / (32 * 10)));
    // Against a lower bound, the walks stop early; the partial score is above the bound.
    CHECK(rt.heuristic().score(*scored, ctx, 1e-9) > 1e-9);
}

TEST_CASE("restoring a long evicted chain under a tight budget leaves the rescue off") {
    using runtime_type = dtr::runtime<dtr::host_backend, dtr::search::indexed<h::dtr_next_use>>;
    constexpr int length = 2000;
    runtime_type rt({.budget = 64 * 8 + 8, .steps = dtr::step_learning::off});
    dtr::tensor x = rt.constant(8, dtr_test::fill_with(3));
    std::vector<dtr::tensor> chain;
    chain.push_back(rt.call(dtr_test::mix_op{64}, {x}, {.cost = 1.0}));
    for (int i = 1; i < length; ++i)
        chain.push_back(rt.call(dtr_test::mix_op{64}, {chain.back()}, {.cost = 1.0}));
    for (const dtr::tensor& t : chain) (void)rt.evict(t);
    const dtr::tensor end = chain.back();
    chain.clear(); // only the end is held: the chain behind it is evicted history
    (void)rt.pin(end);
    CHECK(rt.stats().rematerializations >= length - 8);
    CHECK_FALSE(rt.heuristic().inner().rescuing());
}
