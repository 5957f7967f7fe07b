// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Least recently used: evict the storage whose last use is oldest.
#pragma once

#include <dtr/concepts.hpp>

namespace dtr::heuristics {

//! @brief Evicts the storage used longest ago (score = last access time on the runtime
//! clock). Ignores cost and size; the classic baseline of the DTR paper's evaluation.
//!
//! Checked against the published simulator's `LRU` (heuristic/etc.py): it scores
//! `last_access_int`, the clock at the storage's last use as an operator input,
//! rematerializations included, or at its creation; that is exactly
//! storage::last_access() (the runtime also counts a pin() as a use). Ties and a score of
//! 0 follow the runtime's scan (last lowest wins, 0 stops the scan), as in the simulator.
struct lru {
    struct storage_data {};
    static constexpr const char* name = "lru";

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) const noexcept {
        ctx.count_access();
        return static_cast<double>(s.last_access());
    }
};

static_assert(heuristic<lru>);

} // namespace dtr::heuristics
