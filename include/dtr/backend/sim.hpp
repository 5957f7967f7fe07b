// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief sim_backend: sizes without memory, costs without work — the simulator.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/concepts.hpp>
#include <dtr/error.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/offload.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace dtr {

//! @brief A backend with no memory behind its addresses. Allocations hand out distinct
//! fake addresses and track bytes; operators do no work and cost nothing on its clock, so
//! callers supply each operator's cost (call_options::cost). Replaying a trace through
//! `runtime<sim_backend, H>` therefore measures exactly the decisions the real runtime
//! would make, at the speed of its bookkeeping.
//!
//! Two address spaces:
//! - by default (`sim_backend(capacity)`), an endless one: every allocation gets fresh
//!   addresses and only the byte count is limited, so there is no fragmentation;
//! - with an arena (`sim_backend::with_arena(capacity)`), a fixed region laid out by
//!   dtr::arena exactly as the CUDA backend lays out device memory: an address is
//!   `alignment + offset` in the region (so that 0 still means "none"), allocations can be
//!   refused for want of a contiguous block, and memory_info() reports the layout. Replaying
//!   a trace this way shows what fragmentation would do to it on a device.
//!
//! Either can have a simulated host tier (enable_host_tier: dtr::offloading_backend): host
//! copies that hold no bytes, a capacity, and one copy stream whose transfers cost
//! `latency + bytes / bandwidth` on the runtime clock and, with `overlap`, run concurrently
//! with compute (the runtime's clock waits only for a copy-back an operator reads before it
//! landed, and for the block an out-copy frees).
//!
//! Operators run under a simulation still declare their outputs through the op_context
//! (sizes and aliases); buffers they get must not be dereferenced.
class sim_backend : public host_tier_holder {
public:
    //! An address in the simulated space; 0 means none.
    using pointer = std::uintptr_t;
    using const_pointer = std::uintptr_t;

    //! @brief The endless address space, with at most `capacity` bytes outstanding.
    explicit sim_backend(std::size_t capacity = static_cast<std::size_t>(-1)) noexcept
        : capacity_(capacity) {}

    //! @brief A simulated fixed region of `capacity` bytes (rounded down to `alignment`,
    //! a power of two; 256 models CUDA) laid out by dtr::arena.
    //! Throws: dtr::logic_error when `alignment` is not a power of two.
    [[nodiscard]] static sim_backend with_arena(std::size_t capacity,
                                                std::size_t alignment = arena::default_alignment) {
        sim_backend b;
        b.arena_.emplace(capacity, alignment);
        b.capacity_ = b.arena_->capacity();
        return b;
    }

    //! @brief Effects: takes over the address space (or arena) and its accounting.
    sim_backend(sim_backend&&) noexcept = default;
    sim_backend& operator=(sim_backend&&) noexcept = default;
    sim_backend(const sim_backend&) = delete; // an arena is not shared between runtimes
    sim_backend& operator=(const sim_backend&) = delete;

    //! @brief A new simulated block.
    //!
    //! Returns: a fresh fake address for `bytes` bytes, or 0 when beyond capacity (or, with an
    //! arena, when no free block is large enough; counted in refusals()).
    //! Complexity: O(1); O(log blocks) with an arena.
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        if (arena_) {
            const std::optional<std::size_t> offset = arena_->allocate(bytes);
            if (!offset) {
                ++refusals_;
                return 0;
            }
            return arena_->alignment() + *offset;
        }
        if (bytes > capacity_ - used_) {
            ++refusals_;
            return 0;
        }
        used_ += bytes;
        if (used_ > peak_) peak_ = used_;
        const pointer p = next_;
        // Distinct, 256-aligned addresses (like device allocations), zero-byte blocks too.
        next_ += (bytes + 256) & ~static_cast<pointer>(255);
        return p;
    }
    //! @brief Effects: gives back a block obtained from allocate(bytes).
    void deallocate(pointer p, std::size_t bytes) noexcept {
        if (arena_)
            arena_->deallocate(p - arena_->alignment());
        else
            used_ -= bytes;
    }
    //! @brief Effects: none (simulated blocks hold no bytes).
    void copy(pointer, const_pointer, std::size_t) noexcept {}

    //! @brief Effects: runs the operator body, which only declares outputs.
    //! Returns: 0 (costs are supplied by the caller: call_options::cost).
    //! Throws: what `body` throws.
    template <class Body>
    cost_t execute(Body&& body) {
        body();
        return 0;
    }

    //! @brief Returns: the region's layout with an arena; std::nullopt for the endless
    //! address space.
    [[nodiscard]] std::optional<memory_report> memory_info() const noexcept {
        if (!arena_) return std::nullopt;
        return memory_report_of(*arena_, refusals_);
    }

    //! @brief Returns: the most bytes outstanding at once (with an arena, its region).
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    //! @brief Returns: the bytes outstanding (with an arena: the region's bytes in live
    //! blocks, requests rounded up to the alignment).
    [[nodiscard]] std::size_t used_bytes() const noexcept {
        return arena_ ? arena_->used_bytes() : used_;
    }
    //! @brief Returns: the highest used_bytes() so far.
    [[nodiscard]] std::size_t peak_bytes() const noexcept {
        return arena_ ? arena_->peak_used_bytes() : peak_;
    }
    //! @brief Returns: the number of allocate() calls answered with 0 so far.
    [[nodiscard]] std::uint64_t refusals() const noexcept { return refusals_; }
    //! @brief Returns: the arena, or nullptr for the endless address space.
    [[nodiscard]] const arena* layout() const noexcept { return arena_ ? &*arena_ : nullptr; }

    //! @brief As allocate(bytes), placed as `where` says (runtime_options::placement);
    //! without an arena the placement means nothing and is ignored.
    [[nodiscard]] pointer allocate(std::size_t bytes, arena::placement where) {
        if (!arena_) return allocate(bytes);
        const std::optional<std::size_t> offset = arena_->allocate(bytes, where);
        if (!offset) {
            ++refusals_;
            return 0;
        }
        return arena_->alignment() + *offset;
    }

    // ---- dtr::reports_layout: the region's blocks, for fragmentation-aware eviction --------
    //! @brief Returns: true with an arena. The endless address space has no layout (and
    //! never refuses for fragmentation), so the runtime's window search is never used on it.
    [[nodiscard]] bool has_layout() const noexcept { return arena_.has_value(); }
    //! @brief Returns: the arena's alignment (1 without an arena).
    [[nodiscard]] std::size_t layout_alignment() const noexcept {
        return arena_ ? arena_->alignment() : 1;
    }
    //! @brief Returns: the region offset of the block allocate() returned as `p` (arena only).
    [[nodiscard]] std::size_t region_offset(const_pointer p) const noexcept {
        return arena_ ? static_cast<std::size_t>(p - arena_->alignment()) : 0;
    }
    //! @brief Effects: calls `fn(offset, size, is_free)` for every block of the region in
    //! address order; nothing without an arena. Complexity: O(blocks).
    template <class Fn>
    void for_each_block(Fn&& fn) const {
        if (arena_) arena_->for_each_block(fn);
    }

    // ---- dtr::offloading_backend: the simulated host tier ----------------------------------
    //! A host copy: no bytes, only when its out-copy finishes (a copy-back starts after it).
    struct host_copy {
        cost_t written_at = 0;
    };
    //! @brief Gives this backend a host tier (none by default: the runtime never offloads).
    //! Returns: *this.
    sim_backend& enable_host_tier(host_tier_options options) noexcept {
        tier_ = host_tier(options);
        return *this;
    }
    //! @brief Effects: queues the out-copy on the tier's copy stream at `now`.
    //! Returns: the copy, and when the device block is reusable (the transfer's end).
    //! Throws: dtr::out_of_memory when the tier has no room (the runtime checks first).
    [[nodiscard]] copy_out_result<host_copy> copy_out(const_pointer, std::size_t bytes,
                                                      cost_t now) {
        if (!tier_.room(bytes)) throw out_of_memory("dtr: sim_backend: the host tier is full", {});
        tier_.hold(bytes);
        const cost_t done = tier_.issue(bytes, now);
        return {host_copy{done}, done};
    }
    //! @brief Effects: queues the copy-back (after the copy's own out-copy).
    //! Returns: when it lands.
    cost_t copy_in(pointer, const host_copy& copy, std::size_t bytes, cost_t now) noexcept {
        return tier_.issue(bytes, now, copy.written_at);
    }
    //! @brief An out-copy ahead of eviction (runtime_options::offload_ahead): the same
    //! transfer on the modelled copy stream; `reusable_at` (its end) is when it has read the
    //! block, which the runtime's clock waits for before the block is reused.
    [[nodiscard]] copy_out_result<host_copy> copy_out_ahead(const_pointer src, std::size_t bytes,
                                                            cost_t now) {
        return copy_out(src, bytes, now);
    }
    //! @brief Nothing to order: the runtime's clock waits for `reusable_at`.
    void fence_host_copy(const host_copy&) noexcept {}
    //! @brief Effects: frees a host copy's room in the tier.
    void free_host(host_copy&, std::size_t bytes) noexcept { tier_.release(bytes); }

private:
    std::size_t capacity_;
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
    pointer next_ = 256;
    std::uint64_t refusals_ = 0;
    std::optional<arena> arena_;
};

static_assert(backend<sim_backend>);
static_assert(reports_memory<sim_backend>);
static_assert(reports_layout<sim_backend>);
static_assert(offloading_backend<sim_backend>);

} // namespace dtr
