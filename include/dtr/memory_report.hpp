// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief memory_report and dtr::reports_memory: the optional backend member through which a
//! backend that carves its allocations out of one fixed region says how that region looks
//! (free bytes, largest free block), so that an out_of_memory can tell fragmentation from
//! exhaustion.
//!
//! Why optional. The budget counts the bytes the runtime asked for; a backend whose
//! allocator fragments can refuse a request the budget allows. The runtime copes (it evicts
//! and retries) without knowing why, so the concept dtr::backend stays small; only the error
//! message, tests and tools want the physical picture.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace dtr {

//! @brief A snapshot of a backend's physical region. All sizes in bytes, as the region's
//! allocator counts them (requests rounded up to its alignment).
struct memory_report {
    std::size_t capacity = 0;     //!< bytes of the region
    std::size_t alignment = 0;    //!< every block starts and ends on a multiple of this
    std::size_t used = 0;         //!< bytes in live blocks
    std::size_t free = 0;         //!< capacity - used
    std::size_t largest_free = 0; //!< the largest request that would succeed now
    std::size_t free_blocks = 0;  //!< number of holes the free bytes are split into
    std::size_t peak_used = 0;    //!< most bytes ever in live blocks at once
    std::uint64_t refusals = 0;   //!< allocate() calls answered with "no block"

    //! @brief 1 - largest_free / free: 0 when the free bytes are one block (or none are
    //! free), close to 1 when they are scattered in small holes.
    [[nodiscard]] double fragmentation() const noexcept {
        if (free == 0) return 0.0;
        return 1.0 - static_cast<double>(largest_free) / static_cast<double>(free);
    }
};

//! @brief A backend that can describe its physical memory: `b.memory_info()` returns a
//! memory_report, or std::nullopt when this instance has no fixed region to describe (a
//! sim_backend without an arena).
//!
//! The runtime detects the member and, when present, puts the figures into the message and
//! the details of dtr::out_of_memory.
template <class B>
concept reports_memory = requires(const B& b) {
    { b.memory_info() } -> std::same_as<std::optional<memory_report>>;
};

//! @brief The report of a dtr::arena-like allocator (capacity(), alignment(), used_bytes(),
//! free_bytes(), largest_free_block(), free_block_count(), peak_used_bytes()), plus the
//! backend's count of refused allocations.
//! Complexity: O(1).
template <class Arena>
[[nodiscard]] memory_report memory_report_of(const Arena& a, std::uint64_t refusals) noexcept {
    memory_report r;
    r.capacity = a.capacity();
    r.alignment = a.alignment();
    r.used = a.used_bytes();
    r.free = a.free_bytes();
    r.largest_free = a.largest_free_block();
    r.free_blocks = a.free_block_count();
    r.peak_used = a.peak_used_bytes();
    r.refusals = refusals;
    return r;
}

namespace detail {

//! Returns: the bytes a region laid out in units of `alignment` gives a request of
//! `bytes` (what memory_report counts): rounded up to a multiple of the unit, a zero-byte
//! request taking one unit (an alignment of 0 counts as 1); the largest size_t where that
//! does not fit in one, so that it compares above every capacity.
[[nodiscard]] constexpr std::size_t region_bytes(std::size_t bytes,
                                                 std::size_t alignment) noexcept {
    const std::size_t unit = alignment == 0 ? 1 : alignment;
    if (bytes == 0) return unit;
    const std::size_t short_of = (unit - bytes % unit) % unit;
    return bytes > std::numeric_limits<std::size_t>::max() - short_of
               ? std::numeric_limits<std::size_t>::max()
               : bytes + short_of;
}

} // namespace detail

} // namespace dtr
