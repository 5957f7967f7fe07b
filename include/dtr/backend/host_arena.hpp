// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief host_arena_backend: host memory carved out of one fixed, aligned region by
//! dtr::arena, so that fragmentation is physically real.
//!
//! Why a second host backend rather than a mode of host_backend. host_backend asks the
//! global allocator for each block: the operating system hides fragmentation, so a test on
//! it can never see the budget and the physical layout disagree. A device has one fixed
//! pool; this backend has one too, allocated once, and places every block in it with the
//! same best-fit arena the CUDA backend uses. It runs operators exactly like host_backend,
//! so every host test and operator runs unchanged on a fragmenting allocator. Keeping it a
//! separate type keeps host_backend's allocate() free of a mode branch and makes the choice
//! visible in the runtime's type.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/backend/wall_clock.hpp>
#include <dtr/concepts.hpp>
#include <dtr/cost_clock.hpp>
#include <dtr/error.hpp>
#include <dtr/memory_report.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>

namespace dtr {

//! @brief Host memory for dtr::runtime from one region of fixed size.
//!
//! The region (the capacity, rounded down to `alignment`) is allocated at construction and
//! never grows; allocate() places blocks in it best-fit (dtr::arena) and returns nullptr when
//! no free block is large enough, even if the free bytes would suffice: the runtime then
//! evicts and retries (counters::allocation_retries). Give the runtime a budget no larger
//! than the capacity and resident memory stays inside the region, physically.
//!
//! used_bytes() and peak_bytes() count the region's bytes in live blocks, requests rounded
//! up to `alignment` (a zero-byte request takes one unit), which is what the memory really
//! holds; the runtime's resident_bytes() counts the bytes requested.
//!
//! Operators run synchronously on the calling thread; their cost is the wall time of the
//! body on std::chrono::steady_clock, as for host_backend.
class host_arena_backend {
public:
    //! A host address in the region: dereferenceable (buffer_view::span() works on it).
    using pointer = std::byte*;
    using const_pointer = const std::byte*;

    //! Alignment of the region and of every block: a cache line.
    static constexpr std::size_t alignment = 64;

    //! @brief A backend whose region is `capacity` bytes rounded down to `alignment`,
    //! allocated now. Below one alignment unit the region is empty (no memory is allocated)
    //! and every allocate() returns nullptr.
    //! Throws: std::bad_alloc when the host cannot provide the region or the arena's first
    //! node.
    //! Complexity: one call to the global aligned operator new.
    explicit host_arena_backend(std::size_t capacity)
        : arena_(capacity, alignment),
          base_(arena_.capacity() == 0 ? nullptr
                                       : static_cast<pointer>(::operator new (
                                             arena_.capacity(), std::align_val_t{alignment}))) {}

    //! @brief Effects: takes over `other`'s region and blocks (their addresses stay valid);
    //! `other` is left with an empty region of capacity 0 that refuses every allocation.
    host_arena_backend(host_arena_backend&& other) noexcept
        : arena_(std::move(other.arena_)),
          base_(std::exchange(other.base_, nullptr)),
          refusals_(other.refusals_) {}
    host_arena_backend& operator=(host_arena_backend&&) = delete;
    host_arena_backend(const host_arena_backend&) = delete;
    host_arena_backend& operator=(const host_arena_backend&) = delete;
    //! @brief Effects: frees the region; every block still handed out becomes invalid.
    ~host_arena_backend() {
        if (base_ != nullptr) ::operator delete (base_, std::align_val_t{alignment});
    }

    //! @brief A new block, the best fit in the region.
    //!
    //! Returns: `bytes` bytes aligned to `alignment` (a zero-byte request gets a distinct
    //! block of one unit), or nullptr when no free block is large enough, even if the free
    //! bytes would suffice (counted in refusals()).
    //! Throws: std::bad_alloc only if the arena's bookkeeping cannot grow (nothing changed).
    //! Complexity: O(log blocks).
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        const std::optional<std::size_t> offset = arena_.allocate(bytes);
        if (!offset) {
            ++refusals_;
            return nullptr;
        }
        return base_ + *offset;
    }

    //! @brief Effects: gives back a block obtained from allocate(bytes) (`bytes` is not
    //! checked), merging it with free neighbours. A pointer that is not the start of a live
    //! block is a bug in the caller: it terminates (the arena throws in a noexcept function)
    //! rather than corrupt the region.
    //! Complexity: O(log blocks).
    void deallocate(pointer p, std::size_t /*bytes*/) noexcept {
        arena_.deallocate(static_cast<std::size_t>(p - base_));
    }

    //! @brief Effects: copies `bytes` bytes from `src` to `dst` (blocks of the region, not
    //! overlapping) with memcpy, on the calling thread.
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        if (bytes != 0) std::memcpy(dst, src, bytes);
    }

    //! @brief Effects: runs `body` on the calling thread.
    //! Returns: its wall time in nanoseconds, on std::chrono::steady_clock.
    //! Throws: what `body` throws.
    template <class Body>
    cost_t execute(Body&& body) {
        return wall_time_of(std::forward<Body>(body));
    }
    //! @brief Returns: the clock execute() measures with (dtr::cost_clock).
    [[nodiscard]] cost_t cost_clock() const noexcept { return wall_clock_now(); }

    //! @brief Returns: the region's layout now, never std::nullopt (the region is fixed);
    //! its `refusals` is refusals().
    //! Complexity: O(1).
    [[nodiscard]] std::optional<memory_report> memory_info() const noexcept {
        return memory_report_of(arena_, refusals_);
    }

    //! @brief Returns: the bytes of the region (the constructor's capacity rounded down to
    //! `alignment`).
    [[nodiscard]] std::size_t capacity() const noexcept { return arena_.capacity(); }
    //! @brief Returns: the region's bytes in live blocks now (requests rounded up to
    //! `alignment`).
    [[nodiscard]] std::size_t used_bytes() const noexcept { return arena_.used_bytes(); }
    //! @brief Returns: the highest used_bytes() so far.
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return arena_.peak_used_bytes(); }
    //! @brief Returns: the number of allocate() calls answered with nullptr so far.
    [[nodiscard]] std::uint64_t refusals() const noexcept { return refusals_; }
    //! @brief Returns: the allocator, e.g. to walk the blocks (for_each_block) in a test.
    [[nodiscard]] const arena& layout() const noexcept { return arena_; }
    //! @brief Returns: the start of the region (nullptr for an empty one); block addresses
    //! are base() + arena offset.
    [[nodiscard]] const_pointer base() const noexcept { return base_; }

    //! @brief As allocate(bytes), placed as `where` says (runtime_options::placement).
    //! Returns: the block, or nullptr when no free block is large enough (counted in
    //! refusals()).
    //! Throws: std::bad_alloc only if the arena's bookkeeping cannot grow (nothing changed).
    //! Complexity: O(log blocks) for arena::placement::best_fit; O(blocks) worst case for
    //! arena::placement::high.
    [[nodiscard]] pointer allocate(std::size_t bytes, arena::placement where) {
        const std::optional<std::size_t> offset = arena_.allocate(bytes, where);
        if (!offset) {
            ++refusals_;
            return nullptr;
        }
        return base_ + *offset;
    }

    // ---- dtr::reports_layout: the region's blocks, for fragmentation-aware eviction --------
    //! @brief Returns: true (the region is fixed, so the runtime may search it for windows).
    [[nodiscard]] bool has_layout() const noexcept { return true; }
    //! @brief Returns: `alignment`, the arena's.
    [[nodiscard]] std::size_t layout_alignment() const noexcept { return arena_.alignment(); }
    //! @brief Returns: the region offset of the block allocate() returned as `p`.
    [[nodiscard]] std::size_t region_offset(const_pointer p) const noexcept {
        return static_cast<std::size_t>(p - base_);
    }
    //! @brief Effects: calls `fn(offset, size, is_free)` for every block of the region in
    //! address order.
    //! Throws: what `fn` throws.
    //! Complexity: O(blocks).
    template <class Fn>
    void for_each_block(Fn&& fn) const {
        arena_.for_each_block(fn);
    }

private:
    arena arena_; // first: base_'s initializer reads its rounded capacity
    pointer base_;
    std::uint64_t refusals_ = 0;
};

static_assert(backend<host_arena_backend>);
static_assert(reports_memory<host_arena_backend>);
static_assert(reports_layout<host_arena_backend>);
static_assert(cost_clock<host_arena_backend>);

} // namespace dtr
