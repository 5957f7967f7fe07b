// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model "eqclass": the evicted neighbourhood approximated by undirected
//! union-find classes carrying summed compute cost (the paper's h_DTR^eq), and its variant
//! "eqclass_held" that charges the classes below a storage only for what the program holds.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/cost/decrease_listener.hpp>
#include <dtr/heuristic/detail/class_forest.hpp>

#include <cstdint>
#include <type_traits>

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
//!
//! HeldBelow (cost::eqclass_held): each class also sums the cost of its members that the
//! program still holds (a handle at eviction, until on_release), and the classes of t's
//! evicted children are charged that part only; those of its parents, and a class reached
//! both ways, in full. dtr_held's split (evicted ancestors all, evicted descendants only
//! where held) on undirected classes: what evicting t costs the program's own tensors, not
//! its released history. A release of an evicted storage costs one find and counts as a
//! decrease for the indexed search.
template <bool HeldBelow>
class basic_eqclass {
    static constexpr char plain_tag[] = "eqclass";
    static constexpr char held_tag[] = "eqclass_held";
    struct no_held_part {};
    struct held_part {
        double eq_held = 0; //!< of eq_contributed, the part counted as held
    };

public:
    struct storage_data : std::conditional_t<HeldBelow, held_part, no_held_part> {
        std::uint32_t eq_node = heuristics::detail::npos;          //!< class node while evicted
        std::uint32_t eq_registrations = heuristics::detail::npos; //!< own registry list
        double eq_contributed = 0; //!< cost added to the class at eviction
    };
    static constexpr const char* tag = HeldBelow ? held_tag : plain_tag;

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
        double held = 0;
        if constexpr (HeldBelow) held = d.eq_held = s.handle_count() > 0 ? d.eq_contributed : 0.0;
        d.eq_node = forest_.make(d.eq_contributed, held);
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
    //! @brief HeldBelow: an evicted storage that loses its last handle stops counting as held.
    template <class Storage, class Listener = ignore_decrease>
    void on_release([[maybe_unused]] Storage& s, [[maybe_unused]] const heuristic_context& ctx,
                    [[maybe_unused]] Listener&& listener = {}) {
        if constexpr (HeldBelow) {
            storage_data& d = s.meta();
            if (d.eq_node == heuristics::detail::npos || d.eq_held == 0) return;
            const std::uint32_t root = forest_.find(d.eq_node, ctx);
            forest_.add_held(root, -d.eq_held);
            d.eq_held = 0;
            report_decrease<Storage>(root, listener);
        }
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
        bool below = false;
        auto add = [&](const auto& u) {
            ctx.count_access();
            const std::uint32_t node = u.meta().eq_node;
            if (u.resident() || node == heuristics::detail::npos || &u == &s) return;
            const std::uint32_t root = forest_.find(node, ctx);
            if (!forest_.mark(root, epoch)) return; // this class is already counted
            // Below t (HeldBelow): only what the program holds; a class met above first is
            // counted whole.
            total += HeldBelow && below ? forest_.held(root) : forest_.value(root);
            if (track != nullptr)
                forest_.register_dependent(root, track,
                                           static_cast<Storage*>(track)->meta().eq_registrations);
        };
        s.for_each_parent(add);
        below = true;
        s.for_each_child(add);
        return total;
    }

    template <class Storage, class Listener>
    void leave(Storage& s, const heuristic_context& ctx, Listener&& listener) {
        storage_data& d = s.meta();
        if (d.eq_node == heuristics::detail::npos) return;
        const std::uint32_t root = forest_.find(d.eq_node, ctx);
        forest_.add_value(root, -d.eq_contributed);
        if constexpr (HeldBelow) {
            forest_.add_held(root, -d.eq_held);
            d.eq_held = 0;
        }
        report_decrease<Storage>(root, listener);
        forest_.release(d.eq_node);
        d.eq_node = heuristics::detail::npos;
        d.eq_contributed = 0;
    }

    //! Hands the storages registered with the class of `root` (their numerators may have
    //! dropped) to the listener, emptying its registry.
    template <class Storage, class Listener>
    void report_decrease(std::uint32_t root, Listener&& listener) {
        forest_.drain_dependents(
            root, [&](void* candidate) { listener(*static_cast<Storage*>(candidate)); });
    }

    heuristics::detail::class_forest forest_;
    std::uint64_t epoch_ = 0;
};

using eqclass = basic_eqclass<false>;
//! @brief eqclass whose classes reached through t's evicted children count only the members
//! the program still holds (an approximation of dtr_held's downward half).
using eqclass_held = basic_eqclass<true>;

} // namespace dtr::heuristics::cost
