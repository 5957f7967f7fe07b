// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Lists of "who counted this class": the registry an indexed search needs to learn
//! which candidates' scores dropped when an eviction class lost a member.
#pragma once

#include <cstdint>
#include <vector>

namespace dtr::heuristics::detail {

inline constexpr std::uint32_t npos = 0xffffffffU;

//! @brief An arena of circular doubly linked lists of opaque candidate pointers.
//!
//! Each list has a sentinel entry. An entry belongs to two lists at once: its class's
//! circular list (so that whole lists splice in O(1) when classes merge) and its candidate's
//! singly linked "own" list (so that a candidate can withdraw every registration at once).
//! Indices rather than pointers: the arena grows by reallocation.
class dependent_list {
public:
    //! @brief A new, empty list; returns its sentinel. Complexity: amortized O(1).
    std::uint32_t make_list() {
        const std::uint32_t s = allocate();
        entries_[s] = {s, s, nullptr, npos};
        return s;
    }

    //! @brief Frees the sentinel of an empty list.
    void free_list(std::uint32_t sentinel) noexcept { release(sentinel); }

    [[nodiscard]] bool empty(std::uint32_t sentinel) const noexcept {
        return entries_[sentinel].next == sentinel;
    }

    //! @brief Registers `candidate` on the list `sentinel` and on the candidate's own list
    //! headed by `own`. Complexity: amortized O(1).
    void add(std::uint32_t sentinel, void* candidate, std::uint32_t& own) {
        const std::uint32_t e = allocate();
        const std::uint32_t last = entries_[sentinel].prev;
        entries_[e] = {last, sentinel, candidate, own};
        entries_[last].next = e;
        entries_[sentinel].prev = e;
        own = e;
    }

    //! @brief Moves every entry of list `from` to the end of list `to`; `from` ends empty.
    //! Complexity: O(1).
    void splice(std::uint32_t from, std::uint32_t to) noexcept {
        if (empty(from)) return;
        const std::uint32_t first = entries_[from].next, last = entries_[from].prev;
        const std::uint32_t to_last = entries_[to].prev;
        entries_[to_last].next = first;
        entries_[first].prev = to_last;
        entries_[last].next = to;
        entries_[to].prev = last;
        entries_[from].next = entries_[from].prev = from;
    }

    //! @brief Detaches every entry of list `sentinel` and calls f(candidate) for each.
    //! Detached entries stay on their candidate's own list until release_own().
    //! Complexity: linear in the list.
    template <class F>
    void drain(std::uint32_t sentinel, F&& f) {
        std::uint32_t e = entries_[sentinel].next;
        entries_[sentinel].next = entries_[sentinel].prev = sentinel;
        while (e != sentinel) {
            entry& x = entries_[e];
            const std::uint32_t next = x.next;
            x.prev = x.next = npos;
            f(x.candidate);
            e = next;
        }
    }

    //! @brief Withdraws and frees every entry on the own list `own` (which ends empty).
    //! Returns: the number of entries freed. Complexity: linear in that list.
    std::uint32_t release_own(std::uint32_t& own) noexcept {
        std::uint32_t n = 0;
        while (own != npos) {
            entry& x = entries_[own];
            const std::uint32_t next_own = x.next_own;
            if (x.prev != npos) {
                entries_[x.prev].next = x.next;
                entries_[x.next].prev = x.prev;
            }
            release(own);
            own = next_own;
            ++n;
        }
        return n;
    }

    //! @brief Entries (and sentinels) alive: memory held.
    [[nodiscard]] std::size_t live() const noexcept { return entries_.size() - free_count_; }

private:
    struct entry {
        std::uint32_t prev, next; //!< class list (npos once detached)
        void* candidate;          //!< null for sentinels
        std::uint32_t next_own;   //!< candidate's own list; free-list link once released
    };

    std::uint32_t allocate() {
        if (free_ != npos) {
            const std::uint32_t e = free_;
            free_ = entries_[e].next_own;
            --free_count_;
            return e;
        }
        entries_.push_back({});
        return static_cast<std::uint32_t>(entries_.size() - 1);
    }
    void release(std::uint32_t e) noexcept {
        entries_[e].candidate = nullptr;
        entries_[e].next_own = free_;
        free_ = e;
        ++free_count_;
    }

    std::vector<entry> entries_;
    std::uint32_t free_ = npos;
    std::size_t free_count_ = 0;
};

} // namespace dtr::heuristics::detail
