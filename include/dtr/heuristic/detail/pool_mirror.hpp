// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A random-access copy of the evictable pool, kept by the pool hooks, for policies
//! that draw storages at random.
#pragma once

#include <cstdint>
#include <vector>

namespace dtr::heuristics::detail {

//! @brief The pool's members in a vector (the runtime's pool is a linked list). Each member
//! remembers its slot in a field of its metadata that `slot(storage)` returns, so insertion
//! and removal are O(1) (removal moves the last member into the hole). The order is a
//! deterministic function of the pool's history, which is what seeded draws need to be
//! reproducible.
class pool_mirror {
public:
    template <class Storage, class Slot>
    void insert(Storage& s, Slot slot) {
        slot(s) = static_cast<std::uint32_t>(members_.size());
        members_.push_back(&s);
    }
    template <class Storage, class Slot>
    void erase(Storage& s, Slot slot) noexcept {
        const std::uint32_t at = slot(s);
        auto* last = static_cast<Storage*>(members_.back());
        members_[at] = last;
        slot(*last) = at;
        members_.pop_back();
    }
    template <class Storage>
    [[nodiscard]] Storage& at(std::size_t i) const noexcept {
        return *static_cast<Storage*>(members_[i]);
    }
    [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }

private:
    std::vector<void*> members_;
};

} // namespace dtr::heuristics::detail
