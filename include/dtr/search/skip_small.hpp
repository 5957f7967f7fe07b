// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Scan that skips small storages (under 1% of the average evictable size).
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/search/detail/forwarding.hpp>

#include <cstdint>

namespace dtr::search {

//! @brief Scans the pool but scores only storages of at least 1% of the average evictable
//! size (the DTR PyTorch prototype's "ignore small tensors" optimization): evicting a tiny
//! storage frees little, and they are often the most numerous. Among those scored, the last
//! lowest wins and 0 stops, as in the exhaustive scan.
//!
//! Deterministic (no randomness). Can differ from the exhaustive choice when the best score
//! belongs to a small storage; the victim is the exhaustive choice restricted to storages of
//! at least 1% of the average size. Reading a size is one metadata access.
//!
//! Complexity: O(n) size reads and at most n scores per decision; O(1) per pool event.
template <class H>
class skip_small : public detail::forwarding<H> {
    static_assert(scoring_heuristic<H>,
                  "dtr::search::skip_small<H>: H does not score storages "
                  "(dtr::scoring_heuristic); a policy with its own choose() "
                  "cannot be searched");
    using base = detail::forwarding<H>;

public:
    using storage_data = typename H::storage_data;
    //! The strategy alone, as on command lines.
    static constexpr char strategy_name[] = "skip_small";
    //! "skip_small:<H::name>".
    static constexpr const char* name = detail::joined_name<strategy_name, H>::value;

    using base::base;

    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const heuristic_context& ctx) {
        using storage = typename Pool::value_type;
        if (pool.empty()) return nullptr;
        const double threshold =
            static_cast<double>(total_bytes_) / (100.0 * static_cast<double>(pool.size()));
        detail::last_lowest<storage> pick;
        for (storage& s : pool) {
            ctx.count_access();
            if (static_cast<double>(s.size()) < threshold) continue;
            ctx.count_evaluation();
            if (!pick.offer(s, score_against(this->inner_, s, ctx, pick.best_score()))) break;
        }
        return pick.best() != nullptr ? pick.best() : &pool.back();
    }

    template <class Storage>
    void on_pool_insert(Storage& s, const heuristic_context& ctx) {
        base::on_pool_insert(s, ctx);
        total_bytes_ += s.size();
    }
    template <class Storage>
    void on_pool_erase(Storage& s, const heuristic_context& ctx) {
        base::on_pool_erase(s, ctx);
        total_bytes_ -= s.size();
    }

    //! @brief Total bytes of the evictable pool (the average's numerator).
    [[nodiscard]] std::uint64_t pool_bytes() const noexcept { return total_bytes_; }

private:
    std::uint64_t total_bytes_ = 0;
};

} // namespace dtr::search
