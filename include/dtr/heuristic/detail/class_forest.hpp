// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Union-find over eviction classes with summed compute cost, reclaiming nodes no
//! storage can reach any more.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/detail/dependent_list.hpp>

#include <cstdint>
#include <vector>

namespace dtr::heuristics::detail {

//! @brief Disjoint sets of evicted storages ("equivalence classes"), each root carrying the
//! summed compute cost of its members and, when an indexed search asks for it, the list of
//! candidates whose cached score counted the class.
//!
//! Nodes are reference counted: one reference from the storage that owns the node (dropped
//! when that storage is rematerialized or destroyed) and one from each child node. A node
//! nobody references is recycled, so memory stays proportional to the evicted storages
//! alive rather than to the evictions ever made. Union by rank and path compression keep
//! finds near-constant; every node visited is one metadata access.
class class_forest {
public:
    //! @brief A new singleton class of value `value` (of which `held` is held), referenced
    //! once (by its storage).
    std::uint32_t make(double value, double held = 0) {
        std::uint32_t x;
        if (free_ != npos) {
            x = free_;
            free_ = nodes_[x].parent;
            --free_count_;
        } else {
            nodes_.push_back({});
            x = static_cast<std::uint32_t>(nodes_.size() - 1);
        }
        nodes_[x] = node{x, 1, value, held, 0, npos, 0};
        return x;
    }

    //! @brief The root of x's class. Compresses the path (keeping reference counts right).
    //! Complexity: amortized near-constant; one access per node visited.
    std::uint32_t find(std::uint32_t x, const heuristic_context& ctx) {
        std::uint32_t root = x;
        ctx.count_access();
        while (nodes_[root].parent != root) {
            root = nodes_[root].parent;
            ctx.count_access();
        }
        path_.clear();
        for (std::uint32_t y = x; y != root && nodes_[y].parent != root; y = nodes_[y].parent)
            path_.push_back(y);
        // Top-down: the node a step releases already points at the root, so a release
        // cascade stops there and never frees a node still on the path.
        for (std::size_t i = path_.size(); i-- > 0;) {
            const std::uint32_t y = path_[i];
            const std::uint32_t old = nodes_[y].parent;
            nodes_[y].parent = root;
            ++nodes_[root].refs;
            release(old);
        }
        return root;
    }

    //! @brief Merges the classes of roots `a` and `b` (a no-op when equal): the sum of their
    //! values, and their registries concatenated. Returns: the new root.
    std::uint32_t unite(std::uint32_t a, std::uint32_t b) noexcept {
        if (a == b) return a;
        if (nodes_[a].rank < nodes_[b].rank) std::swap(a, b);
        node& ra = nodes_[a];
        node& rb = nodes_[b];
        rb.parent = a;
        ++ra.refs;
        ra.value += rb.value;
        ra.held += rb.held;
        if (ra.rank == rb.rank) ++ra.rank;
        if (rb.dependents != npos) {
            if (ra.dependents == npos) {
                ra.dependents = rb.dependents; // adopt the list whole
            } else {
                deps_.splice(rb.dependents, ra.dependents);
                deps_.free_list(rb.dependents);
            }
            rb.dependents = npos;
        }
        return a;
    }

    //! @brief Drops one reference to x, recycling it (and ancestors left unreferenced).
    void release(std::uint32_t x) noexcept {
        for (;;) {
            node& n = nodes_[x];
            if (--n.refs != 0) return;
            const std::uint32_t parent = n.parent;
            if (n.dependents != npos) { // empty by construction: drained before the last release
                deps_.free_list(n.dependents);
                n.dependents = npos;
            }
            n.parent = free_;
            free_ = x;
            ++free_count_;
            if (parent == x) return;
            x = parent;
        }
    }

    //! @brief Value (summed cost) of the class whose root is `root`.
    [[nodiscard]] double value(std::uint32_t root) const noexcept { return nodes_[root].value; }
    void add_value(std::uint32_t root, double delta) noexcept { nodes_[root].value += delta; }
    //! @brief The part of value() whose storages the program still holds.
    [[nodiscard]] double held(std::uint32_t root) const noexcept { return nodes_[root].held; }
    void add_held(std::uint32_t root, double delta) noexcept { nodes_[root].held += delta; }

    //! @brief Marks `root` with `epoch`; false when it already carried it (dedupe in sums).
    bool mark(std::uint32_t root, std::uint64_t epoch) noexcept {
        if (nodes_[root].mark == epoch) return false;
        nodes_[root].mark = epoch;
        return true;
    }

    //! @brief Registers `candidate` as having counted the class of root `root`.
    void register_dependent(std::uint32_t root, void* candidate, std::uint32_t& own) {
        if (nodes_[root].dependents == npos) nodes_[root].dependents = deps_.make_list();
        deps_.add(nodes_[root].dependents, candidate, own);
    }
    //! @brief Withdraws every registration on a candidate's own list.
    std::uint32_t unregister(std::uint32_t& own) noexcept { return deps_.release_own(own); }
    //! @brief Calls f(candidate) for each registered dependent of `root`, emptying its list.
    template <class F>
    void drain_dependents(std::uint32_t root, F&& f) {
        if (nodes_[root].dependents != npos) deps_.drain(nodes_[root].dependents, f);
    }

    //! @brief Nodes alive (tests: memory is reclaimed).
    [[nodiscard]] std::size_t live_nodes() const noexcept { return nodes_.size() - free_count_; }
    //! @brief Registry entries alive, sentinels included.
    [[nodiscard]] std::size_t live_registrations() const noexcept { return deps_.live(); }

private:
    struct node {
        std::uint32_t parent;     //!< itself for a root; free-list link once recycled
        std::uint32_t refs;       //!< owning storage + child nodes
        double value;             //!< summed cost (meaningful at roots)
        double held;              //!< summed cost of the members with a handle
        std::uint64_t mark;       //!< epoch of the last sum that counted this root
        std::uint32_t dependents; //!< registry sentinel, or npos
        std::uint8_t rank;
    };

    std::vector<node> nodes_;
    std::vector<std::uint32_t> path_;
    dependent_list deps_;
    std::uint32_t free_ = npos;
    std::size_t free_count_ = 0;
};

} // namespace dtr::heuristics::detail
