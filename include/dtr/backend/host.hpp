// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief host_backend: aligned host memory with a fixed capacity, timed on steady_clock.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>

namespace dtr {

//! @brief Host memory for dtr::runtime. Each allocation is a separate aligned block from the
//! global allocator; `capacity` caps the bytes outstanding (the runtime's budget is the
//! policy, the capacity models a device's physical limit).
//!
//! Operators run synchronously on the calling thread; their cost is the wall time of the
//! body on std::chrono::steady_clock.
class host_backend {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;

    //! Alignment of every block: a cache line, enough for any scalar or SIMD type.
    static constexpr std::size_t alignment = 64;

    //! @param capacity most bytes outstanding at once (default: no limit)
    explicit host_backend(std::size_t capacity = static_cast<std::size_t>(-1)) noexcept
        : capacity_(capacity) {}

    host_backend(host_backend&& other) noexcept
        : capacity_(other.capacity_), used_(other.used_), peak_(other.peak_) {
        other.used_ = 0;
    }
    host_backend& operator=(host_backend&&) = delete;
    host_backend(const host_backend&) = delete;
    host_backend& operator=(const host_backend&) = delete;

    //! @brief A block of `bytes` bytes aligned to `alignment`, or nullptr when it would
    //! exceed the capacity. Zero-byte requests get a distinct valid block.
    //! @throws std::bad_alloc if the system allocator itself fails.
    //! @par Complexity: one call to the global aligned operator new.
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        if (bytes > capacity_ - used_) return nullptr;
        auto* p = static_cast<pointer>(::operator new(bytes == 0 ? 1 : bytes, std::align_val_t{alignment}));
        used_ += bytes;
        if (used_ > peak_) peak_ = used_;
        return p;
    }

    //! @brief Returns a block obtained from allocate(bytes).
    void deallocate(pointer p, std::size_t bytes) noexcept {
        ::operator delete(p, std::align_val_t{alignment});
        used_ -= bytes;
    }

    //! @brief memcpy between host blocks.
    void copy(pointer dst, const_pointer src, std::size_t bytes) noexcept {
        if (bytes != 0) std::memcpy(dst, src, bytes);
    }

    //! @brief Runs `body` and returns its wall time in nanoseconds.
    template <class Body>
    cost_t execute(Body&& body) {
        const auto start = std::chrono::steady_clock::now();
        body();
        const auto stop = std::chrono::steady_clock::now();
        return static_cast<cost_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count());
    }

    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    //! @brief Bytes outstanding now.
    [[nodiscard]] std::size_t used_bytes() const noexcept { return used_; }
    //! @brief Highest used_bytes() so far.
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }

private:
    std::size_t capacity_;
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
};

static_assert(backend<host_backend>);

} // namespace dtr
