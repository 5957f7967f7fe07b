// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Random eviction, seeded and reproducible.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/detail/pool_mirror.hpp>
#include <dtr/heuristic/detail/rng.hpp>

#include <cstdint>

namespace dtr::heuristics {

//! @brief Evicts an evictable storage drawn uniformly at random: the published simulator's
//! `RandomStorage`, and the paper's "no cost, no size, no staleness" ablation.
//!
//! The draw is reproducible: the same seed and the same program pick the same victims, on
//! any compiler (see detail::rng). Each choice is one evaluation and one metadata access, as
//! in the simulator. Keeping the pool in a vector costs O(1) per pool insertion or removal.
class random {
public:
    struct storage_data {
        std::uint32_t pm_slot = 0;
    };
    static constexpr const char* name = "random";

    //! @brief A policy whose draws are determined by `seed`.
    explicit random(std::uint64_t seed = 0x5eed) noexcept : rng_(seed) {}

    //! @brief A uniformly drawn member of the pool, or nullptr when it is empty.
    template <class Pool>
    typename Pool::value_type* choose(Pool&, const heuristic_context& ctx) {
        using storage = typename Pool::value_type;
        if (mirror_.size() == 0) return nullptr;
        ctx.count_evaluation();
        ctx.count_access();
        return &mirror_.at<storage>(rng_.below(mirror_.size()));
    }

    template <class Storage>
    void on_pool_insert(Storage& s, const heuristic_context&) {
        mirror_.insert(s, slot);
    }
    template <class Storage>
    void on_pool_erase(Storage& s, const heuristic_context&) noexcept {
        mirror_.erase(s, slot);
    }

private:
    static constexpr auto slot = [](auto& s) -> std::uint32_t& { return s.meta().pm_slot; };
    detail::pool_mirror mirror_;
    detail::rng rng_;
};

static_assert(heuristic<random>);

} // namespace dtr::heuristics
