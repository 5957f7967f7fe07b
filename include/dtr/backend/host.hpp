// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief host_backend: aligned host memory with a fixed capacity, timed on steady_clock.
#pragma once

#include <dtr/backend/wall_clock.hpp>
#include <dtr/concepts.hpp>
#include <dtr/cost_clock.hpp>
#include <dtr/error.hpp>
#include <dtr/offload.hpp>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <utility>

namespace dtr {

//! @brief Host memory for dtr::runtime. Each allocation is a separate aligned block from the
//! global allocator; `capacity` caps the bytes outstanding (the runtime's budget is the
//! policy, the capacity models a device's physical limit).
//!
//! Operators run synchronously on the calling thread; their cost is the wall time of the
//! body on std::chrono::steady_clock.
//!
//! With enable_host_tier() it also has a second tier (dtr::offloading_backend): host copies
//! are real blocks filled by memcpy, so tests can check that offloaded storages come back bit
//! for bit; the transfers are charged on the runtime clock by the tier's model, as on
//! sim_backend (the memcpy's own wall time is not an operator's).
class host_backend : public host_tier_holder {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;

    //! Alignment of every block: a cache line, enough for any scalar or SIMD type.
    static constexpr std::size_t alignment = 64;

    //! @brief A backend that hands out at most `capacity` bytes at once (default: no limit),
    //! without a host tier.
    explicit host_backend(std::size_t capacity = static_cast<std::size_t>(-1)) noexcept
        : capacity_(capacity) {}

    //! @brief Effects: takes over `other`'s accounting (blocks stay valid; `other` counts none).
    host_backend(host_backend&& other) noexcept
        : host_tier_holder(other),
          capacity_(other.capacity_),
          used_(other.used_),
          peak_(other.peak_) {
        other.used_ = 0;
    }
    host_backend& operator=(host_backend&&) = delete;
    host_backend(const host_backend&) = delete;
    host_backend& operator=(const host_backend&) = delete;

    //! @brief A new block.
    //!
    //! Returns: `bytes` bytes aligned to `alignment` (a distinct valid block for zero bytes),
    //! or nullptr when they would exceed the capacity.
    //! Throws: std::bad_alloc when the system allocator itself fails.
    //! Complexity: one call to the global aligned operator new.
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        if (bytes > capacity_ - used_) return nullptr;
        auto* p = static_cast<pointer>(
            ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{alignment}));
        used_ += bytes;
        if (used_ > peak_) peak_ = used_;
        return p;
    }

    //! @brief Effects: gives back a block obtained from allocate(bytes).
    void deallocate(pointer p, std::size_t bytes) noexcept {
        ::operator delete (p, std::align_val_t{alignment});
        used_ -= bytes;
    }

    //! @brief Effects: copies `bytes` bytes from `src` to `dst` (host blocks, not overlapping).
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        if (bytes != 0) std::memcpy(dst, src, bytes);
    }

    //! @brief Effects: runs `body` on the calling thread.
    //! Returns: its wall time in nanoseconds.
    //! Throws: what `body` throws.
    template <class Body>
    cost_t execute(Body&& body) {
        return wall_time_of(std::forward<Body>(body));
    }
    //! @brief Returns: the clock execute() measures with (dtr::cost_clock).
    [[nodiscard]] cost_t cost_clock() const noexcept { return wall_clock_now(); }

    //! @brief Returns: the most bytes outstanding at once.
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    //! @brief Returns: the bytes outstanding now.
    [[nodiscard]] std::size_t used_bytes() const noexcept { return used_; }
    //! @brief Returns: the highest used_bytes() so far.
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }

    // ---- dtr::offloading_backend: a host tier of real copies ---------------------------------
    //! A host copy: its block and when its out-copy finishes on the modelled copy stream.
    struct host_copy {
        std::byte* bytes = nullptr;
        cost_t written_at = 0;
    };
    //! @brief Gives this backend a host tier (none by default: the runtime never offloads).
    //! Returns: *this.
    host_backend& enable_host_tier(host_tier_options options) noexcept {
        tier_ = host_tier(options);
        return *this;
    }
    //! @brief Copies a device block out to a new host block.
    //!
    //! Returns: the copy, and when the device block may be reused (the modelled transfer's
    //! end, issued at `now` on the tier's copy stream).
    //! Throws: dtr::out_of_memory when the tier has no room; std::bad_alloc when the system
    //! allocator fails.
    [[nodiscard]] copy_out_result<host_copy> copy_out(const_pointer src, std::size_t bytes,
                                                      cost_t now) {
        if (!tier_.room(bytes)) throw out_of_memory("dtr: host_backend: the host tier is full", {});
        auto* p = static_cast<std::byte*>(
            ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{alignment}));
        if (bytes != 0) std::memcpy(p, src, bytes);
        tier_.hold(bytes);
        const cost_t done = tier_.issue(bytes, now);
        return {host_copy{p, done}, done};
    }
    //! @brief Effects: copies a host copy back into the device block `dst`.
    //! Returns: when the bytes have landed on the modelled copy stream (not before the copy's
    //! own out-copy finished).
    cost_t copy_in(pointer dst, const host_copy& copy, std::size_t bytes, cost_t now) noexcept {
        if (bytes != 0) std::memcpy(dst, copy.bytes, bytes);
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
    //! @brief Effects: frees a host copy and its room in the tier.
    void free_host(host_copy& copy, std::size_t bytes) noexcept {
        ::operator delete (copy.bytes, std::align_val_t{alignment});
        copy.bytes = nullptr;
        tier_.release(bytes);
    }

private:
    std::size_t capacity_;
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
};

static_assert(backend<host_backend>);
static_assert(offloading_backend<host_backend>);
static_assert(cost_clock<host_backend>);

} // namespace dtr
