// SPDX-License-Identifier: Apache-2.0
// The paper's two bounds, checked on the simulated backend.
//
// Theorem 3.1: DTR with the reduced heuristic (e* without staleness) trains an N-layer
// linear feed-forward network, forward then backward, on a budget of O(sqrt(N)) with O(N)
// operator executions. We measure ops / N for N from 100 to 10,000 on a budget of
// 2 ceil(sqrt(N)) + 4 and assert a fixed bound k.
//
// Theorem 3.2: no deterministic heuristic is competitive with a static schedule: an
// adversary that watches the heuristic builds a graph on which DTR needs Omega(N / B) times
// the operations of the optimal static schedule. We build that graph and show the ratio
// growing with N / B for every deterministic policy.
#include <dtr/heuristic/by_name.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

namespace h = dtr::heuristics;
using dtr::tensor;
using sim_ctx = dtr::op_context<dtr::sim_backend>;

// Every tensor has one unit of memory and every operator one unit of cost.
void unit(sim_ctx& ctx) { ctx.output(0, 1); }

struct feed_forward_run {
    std::uint64_t operations = 0; //!< first executions + rematerializations
    std::uint64_t rematerializations = 0;
    std::size_t peak = 0;
};

//! An N-layer linear network: x_i = f_i(x_{i-1}) for i = 1..N (x_0 the input, a
//! constant), then the loss gradient g_N = l(x_N) and the backward pass
//! g_{i-1} = b_i(x_{i-1}, g_i) for i = N..1: each gradient step reads the activation its
//! layer consumed and the previous gradient. As a framework would, the program keeps every
//! activation until its backward step has used it, then releases it; a gradient is
//! released once the next one is computed.
template <class H>
feed_forward_run feed_forward(std::size_t n, std::size_t budget, dtr::dealloc_policy dealloc,
                              dtr::restore_pins pins = dtr::restore_pins::hold) {
    dtr::runtime<dtr::sim_backend, H> rt({.budget = budget, .dealloc = dealloc, .restore = pins});
    std::vector<tensor> x(n + 1);
    x[0] = rt.constant(1);
    for (std::size_t i = 1; i <= n; ++i) x[i] = rt.call(unit, {x[i - 1]}, {.cost = 1});
    tensor g = rt.call(unit, {x[n]}, {.cost = 1});
    x[n].reset();
    for (std::size_t i = n; i >= 1; --i) {
        g = rt.call(unit, {x[i - 1], g}, {.cost = 1});
        if (i > 1) x[i - 1].reset();
    }
    rt.check_invariants();
    const auto& st = rt.stats();
    return {st.operators_run + st.rematerializations, st.rematerializations,
            st.peak_resident_bytes};
}

std::size_t theorem31_budget(std::size_t n) {
    return 2 * static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n)))) + 4;
}

} // namespace

TEST_CASE(
    "Theorem 3.1: the reduced heuristic runs an N-layer network in O(N) operations on O(sqrt N) "
    "memory") {
    // Measured on this program (ties broken by the runtime's last-lowest rule): ops / N
    // stays between 2.98 and 3.78 for the 33 sizes N in [100, 10,000] below (maximum 3.784
    // at N = 5979), and below 4.2 up to N = 100,000. We assert k = 4 up to 10,000.
    constexpr double k = 4.0;
    double worst = 0;
    std::size_t worst_n = 0, points = 0;
    std::printf("Theorem 3.1 (reduced heuristic %s, budget 2 ceil(sqrt N) + 4):\n",
                h::dtr_reduced::name);
    for (std::size_t n = 100; n <= 10000; n = n * 115 / 100 + 1) {
        const std::size_t budget = theorem31_budget(n);
        // Banishing frees released storages once their dependents are resident; on this
        // program it makes exactly the same choices as eager eviction (checked below for
        // small N), without keeping the whole backward history as evicted metadata, which
        // exact e* maintenance would walk on every event (quadratic in N).
        const auto run = feed_forward<h::dtr_reduced>(n, budget, dtr::dealloc_policy::banish);
        const double ops_per_layer = static_cast<double>(run.operations) / static_cast<double>(n);
        INFO("N=", n, " budget=", budget, " ops/N=", ops_per_layer);
        CHECK(run.peak <= budget);
        CHECK(ops_per_layer <= k);
        if (n <= 1200) {
            const auto eager =
                feed_forward<h::dtr_reduced>(n, budget, dtr::dealloc_policy::eager_evict);
            CHECK(eager.operations == run.operations);
            // The runtime's default (the theorem is stated for the simulator, which holds
            // every pin) keeps the bound too.
            const auto fewer_pins = feed_forward<h::dtr_reduced>(
                n, budget, dtr::dealloc_policy::banish, dtr::restore_pins::yield_when_full);
            CHECK(fewer_pins.peak <= budget);
            CHECK(static_cast<double>(fewer_pins.operations) / static_cast<double>(n) <= k);
        }
        if (ops_per_layer > worst) {
            worst = ops_per_layer;
            worst_n = n;
        }
        ++points;
        if (points % 6 == 1)
            std::printf("  N=%6zu budget=%4zu ops/N=%.3f\n", n, budget, ops_per_layer);
    }
    std::printf("  worst ops/N = %.3f at N = %zu over %zu sizes; asserted k = %.1f\n", worst,
                worst_n, points, k);
    CHECK(points >= 30);
}

TEST_CASE(
    "Theorem 3.1 needs the evicted neighbourhood: h_DTR^local is quadratic on the same program") {
    const auto small =
        feed_forward<h::dtr_local>(300, theorem31_budget(300), dtr::dealloc_policy::eager_evict);
    const auto large =
        feed_forward<h::dtr_local>(1000, theorem31_budget(1000), dtr::dealloc_policy::eager_evict);
    const double k_small = static_cast<double>(small.operations) / 300;
    const double k_large = static_cast<double>(large.operations) / 1000;
    std::printf("h_DTR^local on the same program: ops/N = %.1f at N = 300, %.1f at N = 1000\n",
                k_small, k_large);
    CHECK(k_large > 2 * k_small);
    CHECK(k_large > 10);
}

namespace {

//! The policy plus a record of every storage by id (creation order), so that the adversary
//! can see which chain tips are evicted and how far their evicted history goes.
template <class H>
struct watched : H {
    std::vector<const void*> created;
    template <class S>
    void on_create(S& s, const dtr::heuristic_context& c) {
        if constexpr (requires(H & p) { p.on_create(s, c); }) H::on_create(s, c);
        created.push_back(&s);
    }
};

struct adversary_run {
    std::uint64_t operations = 0;       //!< DTR: first executions + rematerializations
    std::uint64_t first_executions = 0; //!< N: the graph's operators
    std::vector<std::size_t> chain_lengths;
};

//! The adversarial family (our reconstruction of the paper's argument; see
//! docs/heuristics.md). Budget B units; a constant x; K = B - 1 chains
//! c_j,0 = f(x), c_j,t+1 = f(c_j,t), unit size and cost, where the program keeps a handle
//! only on each chain's tip. x and K tips fill the budget, so every new tip forces an
//! eviction, and since released chain members are evicted, the heuristic must evict a
//! tip (or a rematerialized chain member). The adversary, watching the deterministic
//! heuristic, always extends next the chain whose tip costs the most to bring back (the
//! length of its evicted prefix), so DTR recomputes up to a whole chain, about N / B
//! operations, at nearly every step. A static schedule that knows the graph computes the
//! chains one after another: N operations and no recomputation at all (checked below).
template <class H>
adversary_run adversarial_chains(std::size_t budget, std::size_t n) {
    using policy = watched<H>;
    dtr::runtime<dtr::sim_backend, policy> rt({.budget = budget});
    using storage = typename decltype(rt)::storage_type;
    const std::size_t chains = budget - 1;
    tensor x = rt.constant(1);
    std::vector<tensor> tip(chains);
    std::vector<std::size_t> tip_id(chains);
    adversary_run result;
    result.chain_lengths.assign(chains, 1);
    for (std::size_t j = 0; j < chains; ++j) {
        tip[j] = rt.call(unit, {x}, {.cost = 1});
        tip_id[j] = rt.heuristic().created.size() - 1;
    }
    std::size_t round_robin = 0;
    for (std::size_t made = chains; made < n; ++made) {
        std::size_t next = chains, worst = 0;
        for (std::size_t j = 0; j < chains; ++j) {
            // Cost to bring tip j back: its evicted storages up to the first resident one.
            std::size_t cost = 0;
            for (const auto* s = static_cast<const storage*>(rt.heuristic().created[tip_id[j]]);
                 !s->resident();) {
                ++cost;
                const storage* parent = nullptr;
                s->for_each_parent([&](const storage& p) { parent = &p; });
                s = parent;
            }
            if (cost > worst) {
                worst = cost;
                next = j;
            }
        }
        if (next == chains) next = round_robin++ % chains; // every tip resident
        tip[next] = rt.call(unit, {tip[next]}, {.cost = 1});
        tip_id[next] = rt.heuristic().created.size() - 1;
        ++result.chain_lengths[next];
    }
    rt.check_invariants();
    result.operations = rt.stats().operators_run + rt.stats().rematerializations;
    result.first_executions = rt.stats().operators_run;
    return result;
}

//! The static schedule on the same graph and budget: chain after chain.
template <class H>
std::uint64_t chains_in_order(std::size_t budget, const std::vector<std::size_t>& lengths) {
    dtr::runtime<dtr::sim_backend, H> rt({.budget = budget});
    tensor x = rt.constant(1);
    std::vector<tensor> tips;
    for (std::size_t length : lengths) {
        tensor t = rt.call(unit, {x}, {.cost = 1});
        for (std::size_t i = 1; i < length; ++i) t = rt.call(unit, {t}, {.cost = 1});
        tips.push_back(std::move(t));
    }
    CHECK(rt.stats().rematerializations == 0);
    return rt.stats().operators_run + rt.stats().rematerializations;
}

template <class H>
void check_adversary(std::size_t budget) {
    std::printf("  %-12s B=%2zu  DTR ops / static ops at N/B =", H::name, budget);
    double previous = 0;
    for (std::size_t ratio_n_b : {8, 16, 32, 64}) {
        const std::size_t n = ratio_n_b * budget;
        const adversary_run run = adversarial_chains<H>(budget, n);
        REQUIRE(run.first_executions == n);
        const std::uint64_t static_ops = chains_in_order<H>(budget, run.chain_lengths);
        CHECK(static_ops == n); // optimal: every operator once
        const double ratio = static_cast<double>(run.operations) / static_cast<double>(static_ops);
        std::printf("  %zu: %6.2f", ratio_n_b, ratio);
        INFO(H::name, " B=", budget, " N/B=", ratio_n_b, " ratio=", ratio);
        CHECK(ratio >= static_cast<double>(ratio_n_b) / 4); // Omega(N / B), constant 1/4
        CHECK(ratio > previous * 1.5);                      // and it keeps growing
        previous = ratio;
    }
    std::printf("\n");
}

} // namespace

TEST_CASE("Theorem 3.2: an adversary forces Omega(N/B) times the static schedule's operations") {
    std::printf("Theorem 3.2 (adversarial chains; static schedule = N operations):\n");
    for (std::size_t budget : {8, 16}) {
        check_adversary<h::dtr>(budget);
        check_adversary<h::dtr_eqclass>(budget);
        check_adversary<h::dtr_local>(budget);
        check_adversary<h::msps>(budget);
        check_adversary<h::lru>(budget);
        check_adversary<h::largest>(budget);
    }
}
