// SPDX-License-Identifier: Apache-2.0
// Eviction policies and search strategies: each policy's score on hand-built graphs (with
// the values worked out by hand in the comments), e* and union-find neighbourhoods after
// evictions and rematerializations, the ablation switches, seeded strategies, and the
// indexed search against the exhaustive scan on random workloads.
#include "support/random_program.hpp"

#include <dtr/heuristic/by_name.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/by_name.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace h = dtr::heuristics;
namespace search = dtr::search;
using dtr::tensor;
using sim_ctx = dtr::op_context<dtr::sim_backend>;

//! A policy that also records every storage it sees created, by id (= creation order), so
//! that tests can score and inspect storages behind tensors.
template <class H>
struct recorder : H {
    using H::H;
    std::vector<void*> created;
    std::vector<std::uint64_t> victims; //!< ids evicted under pressure or explicitly, in order

    template <class S>
    void on_create(S& s, const dtr::heuristic_context& c) {
        if constexpr (requires(H & p) { p.on_create(s, c); }) H::on_create(s, c);
        if (created.size() <= s.id()) created.resize(s.id() + 1, nullptr);
        created[s.id()] = &s;
    }
    template <class S>
    void on_destroy(S& s, const dtr::heuristic_context& c) {
        if constexpr (requires(H & p) { p.on_destroy(s, c); }) H::on_destroy(s, c);
        created[s.id()] = nullptr;
    }
    template <class S>
    void on_evict(S& s, const dtr::heuristic_context& c) {
        if constexpr (requires(H & p) { p.on_evict(s, c); }) H::on_evict(s, c);
        victims.push_back(s.id());
    }
};

template <class H>
using sim_rt = dtr::runtime<dtr::sim_backend, recorder<H>>;

template <class Runtime>
auto& storage(Runtime& rt, std::uint64_t id) {
    REQUIRE(id < rt.heuristic().created.size());
    REQUIRE(rt.heuristic().created[id] != nullptr);
    return *static_cast<typename Runtime::storage_type*>(rt.heuristic().created[id]);
}
template <class Runtime>
std::uint64_t last_id(Runtime& rt) {
    return rt.heuristic().created.size() - 1;
}
template <class Runtime>
dtr::heuristic_context now_of(Runtime& rt) {
    return {rt.clock(), nullptr, nullptr};
}

auto out(std::size_t bytes) {
    return [bytes](sim_ctx& ctx) { ctx.output(0, bytes); };
}

//! Runs an operator on x whose output is dropped at once: the clock moves by `cost`, and
//! nothing but the constant x is touched.
template <class Runtime>
void tick(Runtime& rt, const tensor& x, double cost) {
    (void)rt.call(out(8), {x}, {.cost = cost});
}

//! The id of the storage evicted when the budget drops by `bytes` (one eviction).
template <class Runtime>
std::uint64_t victim_of_squeeze(Runtime& rt, std::size_t bytes) {
    const auto before = rt.heuristic().victims.size();
    rt.set_budget(rt.resident_bytes() - bytes);
    REQUIRE(rt.heuristic().victims.size() == before + 1);
    return rt.heuristic().victims.back();
}

// ---- G1: x -> a -> b -> c -> d, with b and c evicted -------------------------------------
//
// costs a=2, b=3 (16 bytes), c=5, d=7, all others 8 bytes; then a tick of cost 100.
// Clock: a made at 2; b at 5 (a last used at 2); c at 10 (b used at 5); d at 17 (c used at
// 10); tick -> now = 117. Evicting b and c leaves a (last access 2, staleness 115) and d
// (last access 17, staleness 100) resident and evictable.
// e*(a) = {b, c} (downwards, stopping at d) = 3 + 5 = 8; e*(d) = {c, b} (upwards, stopping
// at a) = 8. Eqclass: b alone, then c merged with b: one class of value 8.
struct g1 {
    std::uint64_t a, b, c, d;
    tensor x, ta, tb, tc, td;
};

template <class Runtime>
g1 build_g1(Runtime& rt) {
    g1 g;
    g.x = rt.constant(8);
    g.ta = rt.call(out(8), {g.x}, {.cost = 2});
    g.a = last_id(rt);
    g.tb = rt.call(out(16), {g.ta}, {.cost = 3});
    g.b = last_id(rt);
    g.tc = rt.call(out(8), {g.tb}, {.cost = 5});
    g.c = last_id(rt);
    g.td = rt.call(out(8), {g.tc}, {.cost = 7});
    g.d = last_id(rt);
    tick(rt, g.x, 100);
    REQUIRE(rt.clock() == 117);
    REQUIRE(rt.evict(g.tb));
    REQUIRE(rt.evict(g.tc));
    return g;
}

template <class H>
std::pair<double, double> g1_scores() {
    sim_rt<H> rt;
    g1 g = build_g1(rt);
    const auto ctx = now_of(rt);
    auto& policy = static_cast<H&>(rt.heuristic());
    return {policy.score(storage(rt, g.a), ctx), policy.score(storage(rt, g.d), ctx)};
}

} // namespace

TEST_CASE("policies are named in code and on command lines") {
    CHECK(std::string(h::dtr::name) == "dtr");
    CHECK(std::string(h::dtr_eqclass::name) == "dtr_eqclass");
    CHECK(std::string(h::dtr_local::name) == "dtr_local");
    CHECK(std::string(h::msps::name) == "msps");
    CHECK(std::string(h::lru::name) == "lru");
    CHECK(std::string(h::largest::name) == "largest");
    CHECK(std::string(h::random::name) == "random");
    CHECK(std::string(h::dtr_ancestors::name) == "dtr_ancestors");
    CHECK(std::string(h::dtr_ancestors_soft::name) == "dtr_ancestors_soft");
    CHECK(std::string(h::dtr_held::name) == "dtr_held");
    CHECK(std::string(h::dtr_reduced::name) == "ablation-estar-size-nostale");
    CHECK(std::string(h::ablation<h::cost::eqclass, false, true>::name) ==
          "ablation-eqclass-nosize-stale");
    CHECK(std::string(h::ablation<h::cost::none, true, false>::name) ==
          "ablation-none-size-nostale");
    CHECK(std::string(search::indexed<h::dtr_eqclass>::name) == "indexed:dtr_eqclass");
    CHECK(std::string(search::sampled<h::dtr>::name) == "sampled:dtr");
    CHECK(std::string(search::skip_small<h::lru>::name) == "skip_small:lru");
    CHECK(std::string(search::exhaustive<h::msps>::name) == "exhaustive:msps");

    for (const char* name : {"dtr", "dtr_eqclass", "dtr_local", "msps", "lru", "largest", "random",
                             "dtr_ancestors", "dtr_ancestors_soft", "dtr_held", "dtr_held_bounded",
                             "ablation-estar-size-nostale", "ablation-eqclass-size-stale",
                             "ablation-local-nosize-nostale", "ablation-none-nosize-stale"}) {
        std::string found;
        CHECK(h::with_heuristic(name, [&](auto t) { found = decltype(t)::type::name; }));
        CHECK(found == name);
    }
    CHECK_FALSE(h::with_heuristic("ablation-none-nosize-nostale", [](auto) {}));
    CHECK_FALSE(h::with_heuristic("belady", [](auto) {}));
    CHECK(search::with_strategy<h::dtr_eqclass>("indexed", [](auto) {}));
    CHECK_FALSE(search::with_strategy<h::lru>("indexed", [](auto) {})); // not factored
    CHECK_FALSE(
        search::with_strategy<h::dtr_ancestors_soft>("indexed", [](auto) {})); // exponent != 1
    CHECK_FALSE(search::with_strategy<h::dtr_held>("indexed", [](auto) {}));   // not factored
    CHECK_FALSE(search::with_strategy<h::dtr_held_bounded>("indexed", [](auto) {}));
    CHECK(search::with_strategy<h::dtr_ancestors>("indexed", [](auto) {}));
    CHECK(search::with_strategy<h::lru>("sampled", [](auto) {}));
}

TEST_CASE("each policy's score on a chain with an evicted segment (G1)") {
    // score = numerator / (size x staleness); see build_g1 for the numbers.
    {
        auto [a, d] = g1_scores<h::dtr_local>();
        CHECK(a == 2.0 / (8 * 115));
        CHECK(d == 7.0 / (8 * 100));
    }
    {
        auto [a, d] = g1_scores<h::dtr>();
        CHECK(a == (2.0 + 8) / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
    }
    {
        auto [a, d] = g1_scores<h::dtr_eqclass>();
        CHECK(a == (2.0 + 8) / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
    }
    {
        // MSPS: evicted ancestors only, no staleness: a has none, d has {c, b}.
        auto [a, d] = g1_scores<h::msps>();
        CHECK(a == 2.0 / 8);
        CHECK(d == (7.0 + 8) / 8);
    }
    {
        // dtr_ancestors: MSPS's numerator, h_DTR's denominator. a's evicted neighbours
        // (b, c) are descendants: not counted.
        auto [a, d] = g1_scores<h::dtr_ancestors>();
        CHECK(a == 2.0 / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
    }
    {
        // dtr_ancestors_soft: the same numerators, staleness to the power 0.7.
        auto [a, d] = g1_scores<h::dtr_ancestors_soft>();
        CHECK(a == 2.0 / (8 * std::pow(115.0, 0.7)));
        CHECK(d == (7.0 + 8) / (8 * std::pow(100.0, 0.7)));
        CHECK(a < 2.0 / 8); // staleness still counts
        CHECK(a > 2.0 / (8 * 115));
    }
    {
        // dtr_held: b and c still have handles, so a is charged for them as under dtr.
        auto [a, d] = g1_scores<h::dtr_held>();
        CHECK(a == (2.0 + 8) / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
    }
    {
        // dtr_held once the program releases b and c (kept as metadata for d's recipe): a
        // is no longer charged for them; d still is (they are its ancestors).
        sim_rt<h::dtr_held> rt;
        g1 g = build_g1(rt);
        g.tb.reset();
        g.tc.reset();
        const auto ctx = now_of(rt);
        auto& policy = static_cast<h::dtr_held&>(rt.heuristic());
        CHECK(policy.score(storage(rt, g.a), ctx) == 2.0 / (8 * 115));
        CHECK(policy.score(storage(rt, g.d), ctx) == (7.0 + 8) / (8 * 100));
        auto [ra, rd] = g1_scores<h::dtr>();
        (void)rd;
        CHECK(ra == (2.0 + 8) / (8 * 115)); // dtr charges a for them regardless
    }
    {
        // dtr_held_bounded: both neighbourhoods fit in the bound, so dtr_held's scores, with
        // and without the handles on b and c.
        auto [a, d] = g1_scores<h::dtr_held_bounded>();
        CHECK(a == (2.0 + 8) / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
        sim_rt<h::dtr_held_bounded> rt;
        g1 g = build_g1(rt);
        g.tb.reset();
        g.tc.reset();
        const auto ctx = now_of(rt);
        auto& policy = static_cast<h::dtr_held_bounded&>(rt.heuristic());
        CHECK(policy.score(storage(rt, g.a), ctx) == 2.0 / (8 * 115));
        CHECK(policy.score(storage(rt, g.d), ctx) == (7.0 + 8) / (8 * 100));
    }
    {
        // dtr_eqclass_held: the class {b, c} is a's child class, so a is charged only for its
        // members with a handle: both at first, none once the program releases them (the
        // release lowers the class's held part: on_release). d reaches it as its parent
        // class, charged whole either way. Releasing c alone leaves b's 3.
        auto [a, d] = g1_scores<h::dtr_eqclass_held>();
        CHECK(a == (2.0 + 8) / (8 * 115));
        CHECK(d == (7.0 + 8) / (8 * 100));
        sim_rt<h::dtr_eqclass_held> rt;
        g1 g = build_g1(rt);
        const auto ctx = now_of(rt);
        auto& policy = static_cast<h::dtr_eqclass_held&>(rt.heuristic());
        g.tc.reset();
        CHECK(policy.score(storage(rt, g.a), ctx) == (2.0 + 3) / (8 * 115));
        g.tb.reset();
        CHECK(policy.score(storage(rt, g.a), ctx) == 2.0 / (8 * 115));
        CHECK(policy.score(storage(rt, g.d), ctx) == (7.0 + 8) / (8 * 100));
        CHECK(policy.model().class_value(storage(rt, g.b)) == 8);
    }
    {
        // With a bound of one visit per walk, d's upward walk stops at c (cost 5): b is past
        // the bound. a's downward walk reaches b (3) alone.
        sim_rt<h::dtr_held_bounded> rt({}, dtr::sim_backend{}, recorder<h::dtr_held_bounded>(1));
        REQUIRE(rt.heuristic().walk_limit() == 1);
        g1 g = build_g1(rt);
        const auto ctx = now_of(rt);
        auto& policy = static_cast<h::dtr_held_bounded&>(rt.heuristic());
        CHECK(policy.score(storage(rt, g.a), ctx) == (2.0 + 3) / (8 * 115));
        CHECK(policy.score(storage(rt, g.d), ctx) == (7.0 + 5) / (8 * 100));
    }
    {
        auto [a, d] = g1_scores<h::lru>();
        CHECK(a == 2);
        CHECK(d == 17);
    }
    {
        auto [a, d] = g1_scores<h::largest>();
        CHECK(a == 1.0 / 8);
        CHECK(d == 1.0 / 8);
    }
}

TEST_CASE("dtr_held_bounded: a score costs at most 2K + 1 accesses on a long evicted chain") {
    // x -> s_1 -> ... -> s_n, every s_i evicted but s_1 and s_n: each of them has n - 2
    // evicted neighbours, and dtr_held would walk them all at every score.
    sim_rt<h::dtr_held_bounded> rt;
    constexpr int n = 2000;
    tensor x = rt.constant(8);
    std::vector<tensor> s;
    s.push_back(rt.call(out(8), {x}, {.cost = 1}));
    const auto first = last_id(rt);
    for (int i = 1; i < n; ++i) s.push_back(rt.call(out(8), {s.back()}, {.cost = 1}));
    const auto final_id = last_id(rt);
    for (int i = 1; i + 1 < n; ++i) REQUIRE(rt.evict(s[static_cast<std::size_t>(i)]));
    std::uint64_t accesses = 0;
    const dtr::heuristic_context ctx{rt.clock(), &accesses, nullptr};
    auto& policy = static_cast<h::dtr_held_bounded&>(rt.heuristic());
    const auto k = h::dtr_held_bounded::default_walk_limit;
    // Downwards from s_1: the first K storages of the held evicted chain, one unit each.
    CHECK(policy.score(storage(rt, first), ctx) > 0);
    CHECK(accesses <= 2 * k + 1);
    CHECK(policy.walk_cost<false>(storage(rt, first), ctx) == static_cast<double>(k));
    accesses = 0;
    CHECK(policy.score(storage(rt, final_id), ctx) > 0);
    CHECK(accesses <= 2 * k + 1);
    CHECK(policy.walk_cost<true>(storage(rt, final_id), ctx) == static_cast<double>(k));
}

TEST_CASE("ablation switches (the paper's Appendix D)") {
    // e* (and eqclass, equal here) numerators: a = 10, d = 15; local: a = 2, d = 7; none: 1.
    auto check = [](auto tag, double a, double d) {
        using H = typename decltype(tag)::type;
        auto [sa, sd] = g1_scores<H>();
        INFO(H::name);
        CHECK(sa == doctest::Approx(a).epsilon(1e-15));
        CHECK(sd == doctest::Approx(d).epsilon(1e-15));
    };
    using std::type_identity;
    check(type_identity<h::ablation<h::cost::estar<>, true, true>>{}, 10.0 / (8 * 115),
          15.0 / (8 * 100));
    check(type_identity<h::dtr_reduced>{}, 10.0 / 8, 15.0 / 8); // Theorem 3.1's reduced heuristic
    check(type_identity<h::ablation<h::cost::estar<>, false, true>>{}, 10.0 / 115, 15.0 / 100);
    check(type_identity<h::ablation<h::cost::estar<>, false, false>>{}, 10.0, 15.0);
    check(type_identity<h::ablation<h::cost::eqclass, true, false>>{}, 10.0 / 8, 15.0 / 8);
    check(type_identity<h::ablation<h::cost::eqclass, false, true>>{}, 10.0 / 115, 15.0 / 100);
    check(type_identity<h::ablation<h::cost::eqclass, false, false>>{}, 10.0, 15.0);
    check(type_identity<h::ablation<h::cost::local, true, false>>{}, 2.0 / 8, 7.0 / 8);
    check(type_identity<h::ablation<h::cost::local, false, true>>{}, 2.0 / 115, 7.0 / 100);
    check(type_identity<h::ablation<h::cost::local, false, false>>{}, 2.0, 7.0);
    check(type_identity<h::ablation<h::cost::none, true, true>>{}, 1.0 / (8 * 115),
          1.0 / (8 * 100));
    check(type_identity<h::ablation<h::cost::none, true, false>>{}, 1.0 / 8, 1.0 / 8);
    check(type_identity<h::ablation<h::cost::none, false, true>>{}, 1.0 / 115, 1.0 / 100);
}

namespace {

// ---- G2: the phantom dependency -----------------------------------------------------------
//
//   x -> z (cost 24)              z: an unrelated storage
//   x -> a (1) -> c (2) -> b (4) -> e (16)
//                      \-> d (8)
// All 8 bytes. Clock: z at 24; a at 25; c at 27 (a used at 25); b at 31 (c used at 27);
// d at 39 (c used at 31); e at 55 (b used at 39).
// Evict b, then d: classes {b} = 4 and {d} = 8 (not adjacent). Evict c: c is adjacent to
// both, so one class {b, c, d} = 14.
// Rematerialize c (pin it; its parent a is resident, so only c runs: clock 57): the class
// loses c's 2 but does not split: {b, d} = 12, although b and d are no longer connected
// through evicted storages. e's evicted neighbourhood is {b} (4) for e*, but eqclass charges
// e the whole class, 12: d's 8 is the phantom.
struct g2 {
    std::uint64_t z, a, c, b, d, e;
    tensor x, tz, ta, tc, tb, td, te;
};

template <class Runtime>
g2 build_g2(Runtime& rt) {
    g2 g;
    g.x = rt.constant(8);
    g.tz = rt.call(out(8), {g.x}, {.cost = 24});
    g.z = last_id(rt);
    g.ta = rt.call(out(8), {g.x}, {.cost = 1});
    g.a = last_id(rt);
    g.tc = rt.call(out(8), {g.ta}, {.cost = 2});
    g.c = last_id(rt);
    g.tb = rt.call(out(8), {g.tc}, {.cost = 4});
    g.b = last_id(rt);
    g.td = rt.call(out(8), {g.tc}, {.cost = 8});
    g.d = last_id(rt);
    g.te = rt.call(out(8), {g.tb}, {.cost = 16});
    g.e = last_id(rt);
    REQUIRE(rt.clock() == 55);
    REQUIRE(rt.evict(g.tb));
    REQUIRE(rt.evict(g.td));
    return g;
}

} // namespace

TEST_CASE("eqclass classes merge on eviction and keep phantom members after a split") {
    sim_rt<h::dtr_eqclass> rt;
    g2 g = build_g2(rt);
    auto& model = rt.heuristic().model();
    auto& policy = static_cast<h::dtr_eqclass&>(rt.heuristic());
    const auto ctx = now_of(rt);
    CHECK_FALSE(model.same_class(storage(rt, g.b), storage(rt, g.d)));
    CHECK(model.class_value(storage(rt, g.b)) == 4);
    CHECK(model.class_value(storage(rt, g.d)) == 8);
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 4 + 8); // two distinct classes
    REQUIRE(rt.evict(g.tc));
    CHECK(model.same_class(storage(rt, g.b), storage(rt, g.d)));
    CHECK(model.class_value(storage(rt, g.b)) == 14);
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16 + 14);
    CHECK(policy.numerator(storage(rt, g.a), ctx) == 1 + 14);
    CHECK(model.forest().live_nodes() == 3);

    { auto pin = rt.pin(g.tc); } // rematerializes c alone
    CHECK(rt.stats().rematerializations == 1);
    CHECK(rt.clock() == 57);
    CHECK(model.same_class(storage(rt, g.b), storage(rt, g.d))); // phantom: not split
    CHECK(model.class_value(storage(rt, g.b)) == 12);
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16 + 12);
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 12); // both children, one class: once
    CHECK(policy.numerator(storage(rt, g.a), ctx) == 1);

    { auto pin = rt.pin(g.tb); } // b back: only d's 8 is left in the class
    CHECK(model.class_value(storage(rt, g.d)) == 8);
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16);
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 8);

    // Dropping d (evicted, nothing depends on it) destroys it: it leaves its class, and
    // nodes nobody can reach are recycled.
    g.td.reset();
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2);
    CHECK(model.forest().live_nodes() == 0);
    rt.check_invariants();
}

TEST_CASE("e* follows directed evicted paths after evictions and rematerializations") {
    sim_rt<h::dtr> rt;
    g2 g = build_g2(rt);
    auto& policy = static_cast<h::dtr&>(rt.heuristic());
    const auto ctx = now_of(rt);
    // b and d evicted: c's neighbourhood is downwards {b, d}; e's is upwards {b} (c resident).
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 4 + 8);
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16 + 4);
    CHECK(policy.numerator(storage(rt, g.a), ctx) == 1);
    REQUIRE(rt.evict(g.tc));
    // e: {b, c} upwards, stopping at a; a: {c, b, d} downwards, stopping at e.
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16 + 4 + 2);
    CHECK(policy.numerator(storage(rt, g.a), ctx) == 1 + 2 + 4 + 8);
    { auto pin = rt.pin(g.tc); }
    // No phantom: e's neighbourhood is {b} again, c's is {b, d}.
    CHECK(policy.numerator(storage(rt, g.e), ctx) == 16 + 4);
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 4 + 8);
    CHECK(policy.numerator(storage(rt, g.a), ctx) == 1);
    g.td.reset(); // d destroyed: c's neighbourhood loses it
    CHECK(policy.numerator(storage(rt, g.c), ctx) == 2 + 4);
    rt.check_invariants();
}

namespace {

// G2 after c's rematerialization, then a tick of 10000 with a and c pinned: the evictable
// storages are z (cost 24, last used at 24) and e (cost 16, last used at 55); now = 10057.
//   dtr:         z: 24 / (8 x 10033) = 2.990e-4   e: (16 + 4)  / (8 x 10002) = 2.500e-4  -> e
//   dtr_eqclass: z: 24 / (8 x 10033) = 2.990e-4   e: (16 + 12) / (8 x 10002) = 3.499e-4  -> z
//   dtr_local:   z: 2.990e-4                       e: 16 / (8 x 10002) = 2.000e-4         -> e
//   msps:        z: 24 / 8 = 3                     e: (16 + 4) / 8 = 2.5                  -> e
//   lru:         z: 24                             e: 55                                  -> z
template <class H>
std::uint64_t g2_victim() {
    sim_rt<H> rt;
    g2 g = build_g2(rt);
    REQUIRE(rt.evict(g.tc));
    { auto pin = rt.pin(g.tc); }
    auto pin_a = rt.pin(g.ta);
    auto pin_c = rt.pin(g.tc);
    tick(rt, g.x, 10000);
    REQUIRE(rt.clock() == 10057);
    REQUIRE(rt.evictable_count() == 2);
    const std::uint64_t victim = victim_of_squeeze(rt, 8);
    CHECK((victim == g.z || victim == g.e));
    return victim == g.z ? 0 : 1; // 0: z, 1: e
}

} // namespace

TEST_CASE("the phantom dependency changes the victim: dtr evicts e, dtr_eqclass evicts z") {
    CHECK(g2_victim<h::dtr>() == 1);
    CHECK(g2_victim<h::dtr_eqclass>() == 0);
    CHECK(g2_victim<h::dtr_local>() == 1);
    CHECK(g2_victim<h::msps>() == 1);
    CHECK(g2_victim<h::lru>() == 0);
    // Every strategy finds the same victim here (no ties, nothing small).
    CHECK(g2_victim<search::exhaustive<h::dtr>>() == 1);
    CHECK(g2_victim<search::indexed<h::dtr>>() == 1);
    CHECK(g2_victim<search::indexed<h::dtr_eqclass>>() == 0);
    CHECK(g2_victim<search::indexed<h::msps>>() == 1);
    CHECK(g2_victim<search::skip_small<h::dtr_eqclass>>() == 0);
    CHECK(g2_victim<search::sampled<h::dtr_eqclass>>() <= 1);
}

TEST_CASE("skip_small ignores storages under 1% of the average evictable size") {
    // Three evictable storages: two of 1000 bytes, one of 5 bytes that is the cheapest and
    // stalest (the exhaustive choice). Average 2005 / 3 = 668.3; 1% = 6.68 > 5: skipped.
    // Clock: tiny made at 1, big1 at 501, big2 at 1101, then a tick: now = 1201.
    auto build = [](auto& rt) {
        tensor x = rt.constant(8);
        tensor tiny = rt.call(out(5), {x}, {.cost = 1});
        tensor big1 = rt.call(out(1000), {x}, {.cost = 500});
        tensor big2 = rt.call(out(1000), {x}, {.cost = 600});
        tick(rt, x, 100);
        return std::vector<tensor>{x, tiny, big1, big2};
    };
    {
        sim_rt<search::exhaustive<h::dtr_local>> rt;
        auto keep = build(rt);
        // tiny: 1 / (5 x 1200) = 1.7e-4; big1: 500 / (1000 x 700) = 7.1e-4; big2: 6e-3.
        CHECK(victim_of_squeeze(rt, 1) == 1);
    }
    {
        sim_rt<search::skip_small<h::dtr_local>> rt;
        auto keep = build(rt);
        CHECK(rt.heuristic().pool_bytes() == 2005);
        // Among the big ones: big1 (id 2).
        CHECK(victim_of_squeeze(rt, 1) == 2);
    }
}

namespace {

//! A churning random program on the simulated backend: many storages, accesses, evictions
//! and rematerializations.
template <class Runtime>
void step_once(Runtime& rt, std::vector<tensor>& live, const std::vector<tensor>& in,
               std::size_t bytes, double cost, bool multi, bool two, bool read,
               std::size_t read_at);

template <class Runtime>
void churn(Runtime& rt, std::uint64_t seed, std::size_t steps, std::size_t live_target) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    std::vector<tensor> live{rt.constant(16)};
    for (std::size_t step = 0; step < steps; ++step) {
        // Iterations: every 300 steps the program drops everything but its constant, as a
        // training loop drops a batch's activations.
        if (step % 300 == 299) live.resize(1);
        const std::size_t arity = 1 + pick(3);
        std::vector<tensor> in;
        for (std::size_t i = 0; i < arity; ++i) {
            // Recent tensors, like a network's layers and skip connections; reaching far
            // back into an evicted history would make any policy thrash.
            const std::size_t n = live.size();
            in.push_back(live[n - 1 - pick(std::min<std::size_t>(n, pick(4) != 0 ? 8 : 64))]);
        }
        const std::size_t bytes = 1 + pick(64);
        const double cost = static_cast<double>(1 + pick(100));
        const bool multi = pick(6) == 0;
        const bool two = pick(2) == 0;
        const bool read = pick(8) == 0;
        const std::size_t read_at = live.size() - 1 - pick(std::min<std::size_t>(live.size(), 64));
        try {
            step_once(rt, live, in, bytes, cost, multi, two, read, read_at);
        } catch (const dtr::out_of_memory&) {
            // A long rematerialization pinned more than the budget: grow it by half and
            // go on (deterministically), as a framework would retry with more memory.
            rt.set_budget(rt.budget() + rt.budget() / 2);
            step_once(rt, live, in, bytes, cost, multi, two, read, read_at);
        }
        // Release among the oldest (the constant at 0 stays).
        while (live.size() > live_target)
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(
                                          1 + pick(std::min<std::size_t>(live.size() - 1, 64))));
    }
}

template <class Runtime>
void step_once(Runtime& rt, std::vector<tensor>& live, const std::vector<tensor>& in,
               std::size_t bytes, double cost, bool multi, bool two, bool read,
               std::size_t read_at) {
    {
        if (multi) {
            auto outs = rt.template call<2>(
                [bytes](sim_ctx& ctx) {
                    ctx.output(0, bytes);
                    ctx.output(1, bytes / 2 + 1);
                },
                in, {.cost = cost});
            live.push_back(outs[0]);
            if (two) live.push_back(outs[1]);
        } else {
            live.push_back(rt.call(out(bytes), in, {.cost = cost}));
        }
        if (read) {
            auto pin = rt.pin(live[read_at]);
        }
    }
}

//! A strategy that, at every decision, also runs the exhaustive scan on the same state and
//! records how far the strategy's victim is from it.
template <class Strategy>
struct agreement_probe : Strategy {
    using Strategy::Strategy;
    struct tally {
        std::uint64_t decisions = 0, victim_differs = 0, score_differs = 0, evaluations = 0,
                      pool = 0;
        std::uint64_t decrease_rekeys = 0; //!< re-keys after a reported decrease (the risky path)
        double max_gap = 0;                //!< max (score(victim) - min score) / min score
    } stats;

    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const dtr::heuristic_context& ctx) {
        using S = typename Pool::value_type;
        std::uint64_t evals = 0;
        const dtr::heuristic_context counted{ctx.now, ctx.metadata_accesses, &evals};
        S* mine = Strategy::choose(pool, counted);
        if (ctx.evaluations != nullptr) *ctx.evaluations += evals;
        const dtr::heuristic_context quiet{ctx.now, nullptr, nullptr};
        search::detail::last_lowest<S> scan;
        for (S& s : pool)
            if (!scan.offer(s, this->inner().score(s, quiet))) break;
        const double best = scan.best_score();
        const double got = this->inner().score(*mine, quiet);
        ++stats.decisions;
        stats.evaluations += evals;
        stats.pool += pool.size();
        if (mine != scan.best()) ++stats.victim_differs;
        if (got != best) {
            ++stats.score_differs;
            const double gap = best > 0 && std::isfinite(best) ? (got - best) / best
                               : got == best                   ? 0.0
                                             : std::numeric_limits<double>::infinity();
            stats.max_gap = std::max(stats.max_gap, gap);
        }
        return mine;
    }
};

template <class Strategy>
typename agreement_probe<Strategy>::tally agreement_on_churn(double tolerance,
                                                             std::size_t programs) {
    typename agreement_probe<Strategy>::tally sum;
    for (std::uint64_t p = 0; p < programs; ++p) {
        using H = typename Strategy::inner_type;
        dtr::runtime<dtr::sim_backend, agreement_probe<Strategy>> rt(
            {.budget = 4000 + 1000 * (p % 4)}, dtr::sim_backend{},
            agreement_probe<Strategy>(H{}, tolerance));
        churn(rt, 1000 + p, 3000, 400);
        rt.check_invariants();
        const auto& t = rt.heuristic().stats;
        sum.decisions += t.decisions;
        sum.victim_differs += t.victim_differs;
        sum.score_differs += t.score_differs;
        sum.evaluations += t.evaluations;
        sum.pool += t.pool;
        sum.max_gap = std::max(sum.max_gap, t.max_gap);
        sum.decrease_rekeys += rt.heuristic().decrease_rekeys();
    }
    return sum;
}

template <class H>
void check_indexed_agreement() {
    INFO(H::name);
    const auto exact = agreement_on_churn<search::indexed<H>>(0.0, 6);
    const auto approx = agreement_on_churn<search::indexed<H>>(0.125, 6);
    std::printf(
        "indexed:%-28s exact: %llu decisions, victim differs %llu (%.2f%%), score differs %llu, "
        "max gap %.3g, %.1f evaluations/decision (pool %.0f), %llu re-keys after decreases | "
        "tolerance 1/8: victim differs "
        "%.2f%%, max gap %.3g, %.1f evaluations/decision\n",
        H::name, static_cast<unsigned long long>(exact.decisions),
        static_cast<unsigned long long>(exact.victim_differs),
        100.0 * static_cast<double>(exact.victim_differs) / static_cast<double>(exact.decisions),
        static_cast<unsigned long long>(exact.score_differs), exact.max_gap,
        static_cast<double>(exact.evaluations) / static_cast<double>(exact.decisions),
        static_cast<double>(exact.pool) / static_cast<double>(exact.decisions),
        static_cast<unsigned long long>(exact.decrease_rekeys),
        100.0 * static_cast<double>(approx.victim_differs) / static_cast<double>(approx.decisions),
        approx.max_gap,
        static_cast<double>(approx.evaluations) / static_cast<double>(approx.decisions));
    CHECK(exact.decisions > 1000);
    if constexpr (!std::is_same_v<typename H::cost_model, h::cost::local>)
        CHECK(exact.decrease_rekeys > 0); // the decrease notifications were exercised
    CHECK(exact.score_differs == 0);      // exact mode: the minimum score, bit for bit
    CHECK(exact.max_gap == 0);
    CHECK(approx.max_gap <= 0.125 * (1 + 1e-9));
    // The point of the index: far fewer scores than storages.
    CHECK(static_cast<double>(exact.evaluations) < 0.25 * static_cast<double>(exact.pool));
}

} // namespace

TEST_CASE("indexed search finds the exhaustive minimum on random workloads") {
    check_indexed_agreement<h::dtr_eqclass>();
    check_indexed_agreement<h::dtr>();
    check_indexed_agreement<h::dtr_local>();
    check_indexed_agreement<h::msps>();
    check_indexed_agreement<h::dtr_ancestors>();
    check_indexed_agreement<h::dtr_reduced>();
    check_indexed_agreement<h::ablation<h::cost::eqclass, false, true>>();
    check_indexed_agreement<h::dtr_eqclass_held>(); // decreases on release, too
}

TEST_CASE("indexed search agrees on the property test's random programs") {
    std::uint64_t decisions = 0, differs = 0;
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
        dtr::runtime<dtr::host_backend, h::dtr_local> reference;
        const auto ref = dtr_test::program_runner<decltype(reference)>(reference, seed, 150).run();
        const std::size_t lo = std::min(ref.floor, ref.peak_resident);
        const std::size_t budget = lo + (ref.peak_resident - lo) * (1 + seed % 5) / 6;
        auto run = [&](auto tag) {
            using S = agreement_probe<search::indexed<typename decltype(tag)::type>>;
            dtr::runtime<dtr::host_backend, S> rt({.budget = budget});
            const auto t = dtr_test::program_runner<decltype(rt)>(rt, seed, 150).run();
            CHECK(t.reads == ref.reads);
            const auto& tally = rt.heuristic().stats;
            CHECK(tally.score_differs == 0);
            decisions += tally.decisions;
            differs += tally.victim_differs;
        };
        run(std::type_identity<h::dtr_eqclass>{});
        run(std::type_identity<h::dtr>{});
        run(std::type_identity<h::msps>{});
        run(std::type_identity<h::dtr_ancestors>{});
    }
    std::printf("indexed on property programs: %llu decisions, %llu victims differ (ties)\n",
                static_cast<unsigned long long>(decisions),
                static_cast<unsigned long long>(differs));
    CHECK(decisions > 500);
}

namespace {

//! Checks, at each decision, every evictable storage's cached e* against a fresh traversal.
template <class H>
struct estar_probe : H {
    std::uint64_t checked = 0, mismatches = 0;
    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const dtr::heuristic_context& ctx) {
        using S = typename Pool::value_type;
        const dtr::heuristic_context quiet{ctx.now, nullptr, nullptr};
        search::detail::last_lowest<S> scan;
        for (S& s : pool) {
            const double cached = this->numerator(s, quiet);
            const double fresh =
                static_cast<double>(s.cost()) + this->model().neighbourhood_cost(s, quiet);
            ++checked;
            if (cached != fresh) ++mismatches;
            scan.offer(s, this->score(s, quiet));
        }
        return scan.best();
    }
};

//! Checks that every class's value is the summed cost its evicted members contributed.
template <class H>
struct eqclass_probe : recorder<H> {
    std::uint64_t checked = 0, mismatches = 0;
    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const dtr::heuristic_context& ctx) {
        using S = typename Pool::value_type;
        const dtr::heuristic_context quiet{ctx.now, nullptr, nullptr};
        std::vector<std::pair<S*, double>> members;
        for (void* p : this->created) {
            if (p == nullptr) continue;
            auto& s = *static_cast<S*>(p);
            if (s.resident() || s.meta().eq_node == h::detail::npos) continue;
            members.push_back({&s, s.meta().eq_contributed});
        }
        // Group by class: same_class against a representative per class.
        std::vector<std::pair<S*, double>> classes;
        for (auto [s, c] : members) {
            bool placed = false;
            for (auto& [rep, sum] : classes)
                if (this->model().same_class(*rep, *s, quiet)) {
                    sum += c;
                    placed = true;
                    break;
                }
            if (!placed) classes.push_back({s, c});
        }
        for (auto& [rep, sum] : classes) {
            ++checked;
            if (std::abs(this->model().class_value(*rep, quiet) - sum) > 1e-9) ++mismatches;
        }
        search::detail::last_lowest<S> scan;
        for (S& s : pool)
            if (!scan.offer(s, this->score(s, quiet))) break;
        return scan.best();
    }
};

//! A policy scanned twice at every decision, once with exact scores and once against the
//! best score so far (dtr::score_against, as the runtime's scan does): the two victims, and
//! every bounded score against its contract (the exact score when it is at most the bound,
//! else a value in (bound, exact score]). Evicts the exact scan's victim. The forecast in
//! force (dtr_next_use) goes to both scans.
template <class Policy>
struct bounded_scan_probe : Policy {
    using Policy::Policy;
    std::uint64_t decisions = 0, victims_differ = 0, scores = 0, cut = 0, contract_broken = 0;
    std::uint64_t exact_accesses = 0, bounded_accesses = 0, forecast_decisions = 0;
    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const dtr::heuristic_context& ctx) {
        using S = typename Pool::value_type;
        const dtr::heuristic_context quiet{ctx.now, nullptr, nullptr, ctx.forecast};
        const dtr::heuristic_context exact_ctx{ctx.now, &exact_accesses, nullptr, ctx.forecast};
        const dtr::heuristic_context bounded_ctx{ctx.now, &bounded_accesses, nullptr, ctx.forecast};
        auto& self = static_cast<Policy&>(*this);
        search::detail::last_lowest<S> exact, bounded;
        for (S& s : pool)
            if (!exact.offer(s, self.score(s, exact_ctx))) break;
        for (S& s : pool) {
            const double bound = bounded.best_score();
            const double got = dtr::score_against(self, s, bounded_ctx, bound);
            const double want = self.score(s, quiet);
            ++scores;
            if (got != want) ++cut;
            if (want <= bound ? got != want : !(bound < got && got <= want)) ++contract_broken;
            if (!bounded.offer(s, got)) break;
        }
        ++decisions;
        if (ctx.forecast != nullptr) ++forecast_decisions;
        if (exact.best() != bounded.best()) ++victims_differ;
        return exact.best();
    }
};

//! What the bounded_scan_probe runs of a test found, summed; each run's victims and scores
//! checked as it is added.
struct bounded_scan_totals {
    std::uint64_t decisions = 0, with_forecast = 0, scores = 0, cut = 0, exact = 0, bounded = 0;
    template <class Probe>
    void add(const Probe& p) {
        CHECK(p.victims_differ == 0);
        CHECK(p.contract_broken == 0);
        decisions += p.decisions;
        with_forecast += p.forecast_decisions;
        scores += p.scores;
        cut += p.cut;
        exact += p.exact_accesses;
        bounded += p.bounded_accesses;
    }
    void print(const char* policy) const {
        std::printf(
            "%s against the best so far: %llu decisions (%llu with the forecast), %llu "
            "scores, %llu cut, %.1f%% of the exact scan's accesses\n",
            policy, static_cast<unsigned long long>(decisions),
            static_cast<unsigned long long>(with_forecast), static_cast<unsigned long long>(scores),
            static_cast<unsigned long long>(cut),
            100.0 * static_cast<double>(bounded) / static_cast<double>(exact));
    }
};

} // namespace

TEST_CASE("the cached e* always equals a fresh traversal") {
    std::uint64_t checked = 0;
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
        {
            dtr::runtime<dtr::sim_backend, estar_probe<h::dtr>> rt({.budget = 5000});
            churn(rt, seed, 2000, 200);
            CHECK(rt.heuristic().mismatches == 0);
            checked += rt.heuristic().checked;
        }
        {
            dtr::runtime<dtr::sim_backend, estar_probe<h::msps>> rt(
                {.budget = 5000, .dealloc = dtr::dealloc_policy::banish});
            churn(rt, seed + 10, 2000, 200);
            CHECK(rt.heuristic().mismatches == 0);
            checked += rt.heuristic().checked;
        }
    }
    CHECK(checked > 10000);
}

TEST_CASE("dtr_held_bounded: scoring against the best so far keeps the scan's choice") {
    static_assert(dtr::bounded_scoring_heuristic<h::dtr_held_bounded>);
    static_assert(!dtr::bounded_scoring_heuristic<h::dtr_held>);
    static_assert(dtr::bounded_scoring_heuristic<search::exhaustive<h::dtr_held_bounded>>);
    using probe = bounded_scan_probe<h::dtr_held_bounded>;
    bounded_scan_totals totals;
    // Churning programs (released history kept as evicted metadata), with K = 256 and with a
    // bound small enough for walks to end at it.
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
        dtr::runtime<dtr::sim_backend, probe> rt(
            {.budget = 4000 + 1000 * seed}, dtr::sim_backend{},
            probe(seed % 2 == 0 ? h::dtr_held_bounded::default_walk_limit : 8));
        churn(rt, 40 + seed, 2000, 300);
        rt.check_invariants();
        totals.add(rt.heuristic());
    }
    // The evicted chain of the runtime test, restored from its end.
    {
        dtr::runtime<dtr::sim_backend, probe> rt({.budget = 64});
        tensor last = rt.constant(8);
        for (int i = 0; i < 3000; ++i) last = rt.call(out(8), {last}, {.cost = 1});
        REQUIRE(rt.evict(last));
        { auto pin = rt.pin(last); }
        totals.add(rt.heuristic());
    }
    totals.print("dtr_held_bounded");
    CHECK(totals.decisions > 1000);
    CHECK(totals.cut > 0);
    CHECK(totals.bounded < totals.exact);
}

TEST_CASE("dtr_next_use: scoring against the best so far keeps the scan's choice") {
    // With the forecast, a storage whose lowest possible score (used never) is above the
    // bound is cut before its walks; without one, dtr_eqclass's score.
    static_assert(dtr::bounded_scoring_heuristic<h::dtr_next_use>);
    using probe = bounded_scan_probe<h::dtr_next_use>;
    bounded_scan_totals totals;
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
        dtr::runtime<dtr::sim_backend, probe> rt({.budget = 3000 + 1000 * seed});
        for (int step = 0; step < 3; ++step) { // the same program each step: forecasts
            rt.begin_step();
            churn(rt, 60 + seed, 600, 200);
        }
        rt.check_invariants();
        totals.add(rt.heuristic());
    }
    totals.print("dtr_next_use");
    CHECK(totals.with_forecast > 100);
    CHECK(totals.cut > 0);
    CHECK(totals.bounded < totals.exact);
}

TEST_CASE("eqclass values are the summed cost of their evicted members; nodes are recycled") {
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
        dtr::runtime<dtr::sim_backend, eqclass_probe<h::dtr_eqclass>> rt({.budget = 1500});
        churn(rt, seed, 600, 100);
        CHECK(rt.heuristic().checked > 100);
        CHECK(rt.heuristic().mismatches == 0);
        // Live union-find nodes never exceed the evicted storages that could own them by
        // much: each evicted storage owns one, and intermediate nodes stay only while a
        // descendant needs them.
        CHECK(rt.heuristic().model().forest().live_nodes() <= 2 * rt.storage_count());
    }
    // Everything released: nothing reachable, nothing kept.
    dtr::runtime<dtr::sim_backend, search::indexed<h::dtr_eqclass>> rt({.budget = 1500});
    churn(rt, 7, 600, 100);
    CHECK(rt.stats().evictions > 0);
    CHECK(rt.storage_count() == 0);
    CHECK(rt.heuristic().size() == 0);
    CHECK(rt.heuristic().inner().model().forest().live_nodes() == 0);
    CHECK(rt.heuristic().inner().model().forest().live_registrations() == 0);
}

TEST_CASE("the index is built at the first decision, then follows the pool") {
    static_assert(
        std::is_same_v<dtr::runtime<dtr::sim_backend>::heuristic_type, dtr::default_heuristic>);
    // A chain of 40 storages of 10 bytes, all held, each from the one before.
    auto grow = [](auto& rt) {
        std::vector<tensor> chain{rt.constant(10)};
        for (int i = 0; i < 40; ++i) chain.push_back(rt.call(out(10), {chain.back()}, {.cost = 5}));
        return chain;
    };
    // A budget that never binds: no decision, so the index files nothing.
    dtr::runtime<dtr::sim_backend> roomy({.budget = 1000});
    const auto roomy_chain = grow(roomy);
    CHECK(roomy.stats().evictions == 0);
    CHECK(roomy.evictable_count() == 40);
    CHECK_FALSE(roomy.heuristic().built());
    CHECK(roomy.heuristic().size() == 0);
    // A budget that binds, the runtime learning no step: from the first victim on, every
    // evictable storage is indexed, and the victims are those of the policy's own scan.
    const dtr::runtime_options online{.budget = 200, .steps = dtr::step_learning::off};
    dtr::runtime<dtr::sim_backend> tight(online);
    dtr::runtime<dtr::sim_backend, h::dtr_next_use> scan(online);
    const auto tight_chain = grow(tight);
    const auto scan_chain = grow(scan);
    CHECK(tight.stats().evictions > 0);
    CHECK(tight.heuristic().built());
    CHECK(tight.heuristic().size() == tight.evictable_count());
    for (std::size_t i = 0; i < tight_chain.size(); ++i)
        CHECK(tight.is_resident(tight_chain[i]) == scan.is_resident(scan_chain[i]));
    tight.check_invariants();
    // The chain repeats one call, which the runtime learns as its step at once: every
    // decision has the forecast, the scan decides, and the index is never built.
    dtr::runtime<dtr::sim_backend> informed({.budget = 200});
    const auto informed_chain = grow(informed);
    CHECK(informed.stats().evictions > 0);
    CHECK(informed.stats().forecast_calls > 0);
    CHECK_FALSE(informed.heuristic().built());
}

TEST_CASE("random, sampled and skip_small are reproducible") {
    auto victims = [](auto tag, std::uint64_t seed) {
        using S = typename decltype(tag)::type;
        auto make = [&] {
            if constexpr (std::is_same_v<S, h::random>)
                return recorder<S>(seed);
            else
                return recorder<S>(typename S::inner_type{}, seed);
        };
        sim_rt<S> rt({.budget = 5000}, dtr::sim_backend{}, make());
        churn(rt, 99, 1500, 150);
        return rt.heuristic().victims;
    };
    using std::type_identity;
    const auto r1 = victims(type_identity<h::random>{}, 1),
               r1b = victims(type_identity<h::random>{}, 1);
    const auto r2 = victims(type_identity<h::random>{}, 2);
    CHECK(r1.size() > 100);
    CHECK(r1 == r1b);
    CHECK(r1 != r2);
    const auto s1 = victims(type_identity<search::sampled<h::dtr_eqclass>>{}, 1);
    const auto s1b = victims(type_identity<search::sampled<h::dtr_eqclass>>{}, 1);
    const auto s2 = victims(type_identity<search::sampled<h::dtr_eqclass>>{}, 2);
    CHECK(s1.size() > 100);
    CHECK(s1 == s1b);
    CHECK(s1 != s2);
    // skip_small has no seed: two runs agree.
    sim_rt<search::skip_small<h::dtr>> a({.budget = 5000}), b({.budget = 5000});
    churn(a, 5, 1500, 150);
    churn(b, 5, 1500, 150);
    CHECK(a.heuristic().victims == b.heuristic().victims);
}

TEST_CASE("sampled search scores about sqrt(n) storages per decision") {
    auto per_decision = [](auto tag) {
        using S = typename decltype(tag)::type;
        dtr::runtime<dtr::sim_backend, S> rt({.budget = 6000});
        churn(rt, 3, 3000, 400);
        const auto& st = rt.stats();
        REQUIRE(st.victim_searches > 100);
        return static_cast<double>(st.heuristic_evaluations) /
               static_cast<double>(st.victim_searches);
    };
    const double scan = per_decision(std::type_identity<search::exhaustive<h::dtr_eqclass>>{});
    const double sample = per_decision(std::type_identity<search::sampled<h::dtr_eqclass>>{});
    std::printf("sampled: %.1f scores per decision; exhaustive: %.1f\n", sample, scan);
    CHECK(scan > 100);
    CHECK(sample <= 1.5 * std::sqrt(scan) + 1);
    CHECK(sample >= 0.5 * std::sqrt(scan));
}

TEST_CASE("metadata accesses are counted by evaluation and maintenance") {
    auto accesses = [](auto tag) {
        using H = typename decltype(tag)::type;
        dtr::runtime<dtr::sim_backend, H> rt({.budget = 5000});
        churn(rt, 11, 1000, 150);
        return std::pair{rt.stats().metadata_accesses, rt.stats().heuristic_evaluations};
    };
    using std::type_identity;
    const auto [local_acc, local_eval] = accesses(type_identity<h::dtr_local>{});
    const auto [eq_acc, eq_eval] = accesses(type_identity<h::dtr_eqclass>{});
    const auto [dtr_acc, dtr_eval] = accesses(type_identity<h::dtr>{});
    const auto [ix_acc, ix_eval] = accesses(type_identity<search::indexed<h::dtr_eqclass>>{});
    const auto [rnd_acc, rnd_eval] = accesses(type_identity<h::random>{});
    CHECK(local_acc == local_eval); // one record per score, nothing to maintain
    CHECK(eq_acc > eq_eval);        // neighbours and class nodes
    CHECK(dtr_acc > dtr_eval);
    CHECK(ix_eval > 0); // counted by the strategy's own choose()
    CHECK(ix_acc > ix_eval);
    CHECK(rnd_acc == rnd_eval); // one draw, one access
}
