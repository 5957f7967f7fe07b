// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Geometric buckets over a nonnegative key, with exact lower bounds: the layout of
//! dtr::search::indexed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dtr::search::detail {

//! @brief Maps a key a >= 0 to one of `count` buckets whose lower bounds are exact doubles:
//! 8 buckets per binade over [2^-64, 2^64) (the binade's mantissa cut in eighths), one
//! bucket below (lower bound 0), one above (2^64), one for +infinity and NaN.
//!
//! Within a finite bucket b, lower(b) <= a < lower(b) x (1 + 1/8): the bucket ratio bounds how
//! far apart two keys of a bucket can be. Computing the bucket reads the key's bits: no
//! logarithm, O(1).
struct key_buckets {
    static constexpr std::uint32_t per_binade = 8;
    static constexpr int min_exponent = -64, max_exponent = 64; // [2^-64, 2^64)
    static constexpr std::uint32_t below = 0;
    static constexpr std::uint32_t finite_count =
        2 + static_cast<std::uint32_t>(max_exponent - min_exponent) * per_binade;
    static constexpr std::uint32_t above = finite_count - 1;
    static constexpr std::uint32_t infinite = finite_count;
    static constexpr std::uint32_t count = finite_count + 1;
    //! The most two keys of one finite bucket can differ by, as a ratio.
    static constexpr double ratio = 1.0 + 1.0 / per_binade;

    //! @brief The bucket of key `a`.
    static std::uint32_t of(double a) noexcept {
        if (!(a < std::numeric_limits<double>::infinity())) return infinite; // inf, NaN
        if (a < 0x1p-64) return below;
        if (a >= 0x1p64) return above;
        const auto bits = std::bit_cast<std::uint64_t>(a);
        const int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
        const auto eighth = static_cast<std::uint32_t>((bits >> 49) & 7);
        return 1 + static_cast<std::uint32_t>(exponent - min_exponent) * per_binade + eighth;
    }

    //! @brief The largest double <= every key of bucket b.
    static double lower(std::uint32_t b) noexcept {
        if (b == below) return 0.0;
        if (b == above) return 0x1p64;
        if (b == infinite) return std::numeric_limits<double>::infinity();
        const std::uint32_t i = b - 1;
        const int exponent = static_cast<int>(i / per_binade) + min_exponent;
        const double mantissa = 1.0 + static_cast<double>(i % per_binade) / per_binade;
        return std::ldexp(mantissa, exponent);
    }
};

} // namespace dtr::search::detail
