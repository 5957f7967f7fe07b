// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief wall_time_of: the cost a synchronous backend reports for an operator, the wall time
//! of its body on the calling thread; wall_clock_now: that clock's reading.
#pragma once

#include <dtr/options.hpp>

#include <chrono>

namespace dtr {

//! @brief Effects: runs `body` on the calling thread.
//! Returns: its wall time in nanoseconds, on std::chrono::steady_clock (monotonic, so a
//! clock adjustment during the run cannot make a cost negative).
//! Throws: what `body` throws; no time is reported then.
//! Complexity: two reads of the clock around one call of `body`.
template <class Body>
cost_t wall_time_of(Body&& body) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const auto stop = std::chrono::steady_clock::now();
    return static_cast<cost_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count());
}

//! @brief Returns: the clock wall_time_of() measures with, in nanoseconds since an arbitrary
//! epoch (what a synchronous backend's cost_clock() reports, dtr::cost_clock).
inline cost_t wall_clock_now() noexcept {
    return static_cast<cost_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

} // namespace dtr
