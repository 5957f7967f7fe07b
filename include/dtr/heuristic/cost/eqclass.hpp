// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model "eqclass": the evicted neighbourhood approximated by undirected
//! union-find classes carrying summed compute cost (the paper's h_DTR^eq).
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/cost/decrease_listener.hpp>
#include <dtr/heuristic/detail/class_forest.hpp>

#include <cstdint>

namespace dtr::heuristics::cost {

//! @brief c(t) + the summed values of the distinct classes of t's evicted neighbours.
//!
//! Semantics of the published simulator's `DTREqClass` / `EqClassNode`:
//! - on eviction of u: u gets a fresh node worth c(u), merged with the classes of every
//!   evicted neighbour of u, parents and children alike (undirected);
//! - on rematerialization of u: c(u) is subtracted from the value of u's class and u leaves
//!   it, but the class is not split (the constant-time split approximation);
//! - score numerator of a resident t: c(t) plus, once per distinct class, the value of the
//!   classes of t's evicted parents and children.
//!
//! Phantom dependencies. Because classes never split, two evicted storages stay in one
//! class after the storage that connected them is rematerialized: a storage adjacent to one
//! of them is charged for both, although recomputing it would need only one side. The
//! class's value is still exact in one sense: it is the summed cost of its members that are
//! evicted now (each member's cost leaves on rematerialization). Only connectivity is stale.
//!
//! Beyond the simulator (which never frees a storage): an evicted storage that is destroyed
//! (no handle, no dependent) leaves its class as if rematerialized, since nothing will ever
//! recompute it.
//!
//! Maintenance: an eviction costs one find per evicted neighbour; a rematerialization one
//! find; a score one find per evicted neighbour. Finds are near-constant (union by rank,
//! path compression); each node visited and each neighbour read is one metadata access.
//! Nodes are recycled once no storage reaches them.
//!
//! For an indexed search, a score's numerator can be computed "tracked": the storage is then
//! registered with each class it counted, and when such a class loses value (a member is
//! rematerialized or destroyed) the registered storages are handed to the decrease listener.
class eqclass {
public:
    struct storage_data {
        std::uint32_t eq_node = heuristics::detail::npos;          //!< class node while evicted
        std::uint32_t eq_registrations = heuristics::detail::npos; //!< own registry list
        double eq_contributed = 0; //!< cost added to the class at eviction
    };
    static constexpr char tag[] = "eqclass";

    //! @brief c(t) + sum of the distinct classes of t's evicted neighbours.
    //! Complexity: one find per neighbour.
    template <class Storage>
    double numerator(const Storage& s, const heuristic_context& ctx) {
        return sum(s, ctx, nullptr);
    }

    //! @brief numerator(), and registers s with every class it counted (withdrawing its
    //! previous registrations first).
    template <class Storage>
    double numerator_tracked(Storage& s, const heuristic_context& ctx) {
        untrack(s);
        return sum(s, ctx, &s);
    }

    //! @brief Withdraws every registration of s.
    template <class Storage>
    void untrack(Storage& s) noexcept {
        forest_.unregister(s.meta().eq_registrations);
    }

    template <class Storage, class Listener = ignore_decrease>
    void on_evict(Storage& s, const heuristic_context& ctx, Listener&& = {}) {
        storage_data& d = s.meta();
        if (d.eq_node != heuristics::detail::npos) leave(s, ctx, ignore_decrease{}); // defensive
        d.eq_contributed = static_cast<double>(s.cost());
        d.eq_node = forest_.make(d.eq_contributed);
        ctx.count_access();
        std::uint32_t root = d.eq_node;
        auto merge = [&](const auto& u) {
            ctx.count_access();
            const std::uint32_t node = u.meta().eq_node;
            if (u.resident() || node == heuristics::detail::npos || &u == &s) return;
            root = forest_.unite(forest_.find(node, ctx), root);
        };
        s.for_each_parent(merge);
        s.for_each_child(merge);
    }
    template <class Storage, class Listener = ignore_decrease>
    void on_rematerialize(Storage& s, const heuristic_context& ctx, Listener&& listener = {}) {
        leave(s, ctx, listener);
    }
    template <class Storage, class Listener = ignore_decrease>
    void on_destroy(Storage& s, const heuristic_context& ctx, Listener&& listener = {}) {
        untrack(s);
        leave(s, ctx, listener);
    }

    // ---- introspection (tests, docs) ----------------------------------------------------

    //! @brief Value of the class of an evicted storage (0 for a resident one).
    template <class Storage>
    double class_value(const Storage& s, const heuristic_context& ctx = {}) {
        const std::uint32_t node = s.meta().eq_node;
        return node == heuristics::detail::npos ? 0.0 : forest_.value(forest_.find(node, ctx));
    }
    //! @brief True when two evicted storages share a class.
    template <class Storage>
    bool same_class(const Storage& a, const Storage& b, const heuristic_context& ctx = {}) {
        const std::uint32_t na = a.meta().eq_node, nb = b.meta().eq_node;
        if (na == heuristics::detail::npos || nb == heuristics::detail::npos) return false;
        return forest_.find(na, ctx) == forest_.find(nb, ctx);
    }
    [[nodiscard]] const heuristics::detail::class_forest& forest() const noexcept {
        return forest_;
    }

private:
    template <class Storage>
    double sum(const Storage& s, const heuristic_context& ctx, void* track) {
        const std::uint64_t epoch = ++epoch_;
        double total = static_cast<double>(s.cost());
        auto add = [&](const auto& u) {
            ctx.count_access();
            const std::uint32_t node = u.meta().eq_node;
            if (u.resident() || node == heuristics::detail::npos || &u == &s) return;
            const std::uint32_t root = forest_.find(node, ctx);
            if (!forest_.mark(root, epoch)) return; // this class is already counted
            total += forest_.value(root);
            if (track != nullptr)
                forest_.register_dependent(root, track,
                                           static_cast<Storage*>(track)->meta().eq_registrations);
        };
        s.for_each_parent(add);
        s.for_each_child(add);
        return total;
    }

    template <class Storage, class Listener>
    void leave(Storage& s, const heuristic_context& ctx, Listener&& listener) {
        storage_data& d = s.meta();
        if (d.eq_node == heuristics::detail::npos) return;
        const std::uint32_t root = forest_.find(d.eq_node, ctx);
        forest_.add_value(root, -d.eq_contributed);
        forest_.drain_dependents(
            root, [&](void* candidate) { listener(*static_cast<Storage*>(candidate)); });
        forest_.release(d.eq_node);
        d.eq_node = heuristics::detail::npos;
        d.eq_contributed = 0;
    }

    heuristics::detail::class_forest forest_;
    std::uint64_t epoch_ = 0;
};

} // namespace dtr::heuristics::cost
