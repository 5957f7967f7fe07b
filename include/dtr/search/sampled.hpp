// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Sampled search: score a random sample of about sqrt(n) evictable storages.
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/heuristic/detail/pool_mirror.hpp>
#include <dtr/heuristic/detail/rng.hpp>
#include <dtr/search/detail/forwarding.hpp>

#include <cmath>
#include <cstdint>

namespace dtr::search {

//! @brief Scores ceil(sqrt(n)) storages drawn uniformly, with replacement, from the n
//! evictable ones and evicts the best of them (last lowest, 0 stops): the DTR PyTorch
//! prototype's sampling optimization.
//!
//! Seeded and reproducible (detail::rng): the same seed and program make the same choices
//! on every compiler. No bound on the score gap to the exhaustive choice; in expectation the
//! victim ranks in the best n / (sqrt(n) + 1) ~ sqrt(n) storages.
//!
//! Complexity: O(sqrt(n)) scores per decision; O(1) per pool insertion or removal.
template <class H>
class sampled : public detail::forwarding<H> {
    static_assert(scoring_heuristic<H>,
                  "dtr::search::sampled<H>: H does not score storages "
                  "(dtr::scoring_heuristic); a policy with its own choose() "
                  "cannot be searched");
    using base = detail::forwarding<H>;

public:
    struct storage_data : H::storage_data {
        std::uint32_t sm_slot = 0; //!< position in the pool mirror
    };
    //! The strategy alone, as on command lines.
    static constexpr char strategy_name[] = "sampled";
    //! "sampled:<H::name>".
    static constexpr const char* name = detail::joined_name<strategy_name, H>::value;

    //! @brief Wraps `inner`, drawing with a generator seeded by `seed`.
    explicit sampled(H inner = H{}, std::uint64_t seed = 0x5a4d)
        : base(std::move(inner)), rng_(seed) {}

    template <class Pool>
    typename Pool::value_type* choose(Pool&, const heuristic_context& ctx) {
        using storage = typename Pool::value_type;
        const std::size_t n = mirror_.size();
        if (n == 0) return nullptr;
        const auto k = static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
        detail::last_lowest<storage> pick;
        for (std::size_t i = 0; i < k; ++i) {
            storage& s = mirror_.template at<storage>(rng_.below(n));
            ctx.count_evaluation();
            if (!pick.offer(s, score_against(this->inner_, s, ctx, pick.best_score()))) break;
        }
        return pick.best();
    }

    template <class Storage>
    void on_pool_insert(Storage& s, const heuristic_context& ctx) {
        base::on_pool_insert(s, ctx);
        mirror_.insert(s, slot);
    }
    template <class Storage>
    void on_pool_erase(Storage& s, const heuristic_context& ctx) {
        base::on_pool_erase(s, ctx);
        mirror_.erase(s, slot);
    }

private:
    static constexpr auto slot = [](auto& s) -> std::uint32_t& { return s.meta().sm_slot; };
    heuristics::detail::pool_mirror mirror_;
    heuristics::detail::rng rng_;
};

} // namespace dtr::search
