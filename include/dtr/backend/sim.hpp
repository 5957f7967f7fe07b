// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief sim_backend: sizes without memory, costs without work — the simulator.
#pragma once

#include <dtr/concepts.hpp>

#include <cstddef>
#include <cstdint>

namespace dtr {

//! @brief A backend with no memory behind its addresses. Allocations hand out distinct
//! fake addresses and track bytes; operators do no work and cost nothing on its clock, so
//! callers supply each operator's cost (call_options::cost). Replaying a trace through
//! `runtime<sim_backend, H>` therefore measures exactly the decisions the real runtime
//! would make, at the speed of its bookkeeping.
//!
//! Operators run under a simulation still declare their outputs through the op_context
//! (sizes and aliases); buffers they get must not be dereferenced.
class sim_backend {
public:
    //! An address in the simulated space; 0 means none.
    using pointer = std::uintptr_t;
    using const_pointer = std::uintptr_t;

    explicit sim_backend(std::size_t capacity = static_cast<std::size_t>(-1)) noexcept
        : capacity_(capacity) {}

    //! @brief A fresh fake address for `bytes` bytes, or 0 when beyond capacity.
    [[nodiscard]] pointer allocate(std::size_t bytes) noexcept {
        if (bytes > capacity_ - used_) return 0;
        used_ += bytes;
        if (used_ > peak_) peak_ = used_;
        const pointer p = next_;
        // Distinct, 256-aligned addresses (like device allocations), zero-byte blocks too.
        next_ += (bytes + 256) & ~static_cast<pointer>(255);
        return p;
    }
    void deallocate(pointer, std::size_t bytes) noexcept { used_ -= bytes; }
    void copy(pointer, const_pointer, std::size_t) noexcept {}

    //! @brief Runs the operator body (which only declares outputs) and reports no cost.
    template <class Body>
    cost_t execute(Body&& body) {
        body();
        return 0;
    }

    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] std::size_t used_bytes() const noexcept { return used_; }
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }

private:
    std::size_t capacity_;
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
    pointer next_ = 256;
};

static_assert(backend<sim_backend>);

} // namespace dtr
