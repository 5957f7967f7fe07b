// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A small seeded generator whose stream is the same on every compiler and standard
//! library, for the randomized policies (random, sampled search).
#pragma once

#include <cstdint>

namespace dtr::heuristics::detail {

//! @brief xoshiro256** seeded through splitmix64, with an unbiased bounded draw.
//!
//! std::mt19937_64 would do, but std::uniform_int_distribution is implementation-defined:
//! the same seed would pick different victims under libstdc++ and libc++. Replays and the
//! tests' expected victims need the same stream everywhere.
class rng {
public:
    //! @brief A generator whose whole stream is determined by `seed`.
    explicit rng(std::uint64_t seed = 0) noexcept {
        for (auto& word : state_) word = splitmix(seed);
    }

    //! @brief The next 64 random bits.
    std::uint64_t next() noexcept {
        const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const std::uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    //! @brief A uniform integer in [0, n); n must be positive.
    //! Complexity: expected O(1) (draws below 2^64 mod n are rejected: rare).
    std::uint64_t below(std::uint64_t n) noexcept {
        const std::uint64_t reject_below = (0 - n) % n; // 2^64 mod n
        for (;;) {
            const std::uint64_t x = next();
            if (x >= reject_below) return x % n;
        }
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) noexcept {
        return (x << k) | (x >> (64 - k));
    }
    static std::uint64_t splitmix(std::uint64_t& x) noexcept {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    std::uint64_t state_[4];
};

} // namespace dtr::heuristics::detail
