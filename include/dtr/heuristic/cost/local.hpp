// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model "local": a storage's own compute cost, its evicted neighbourhood ignored.
#pragma once

#include <dtr/concepts.hpp>

namespace dtr::heuristics::cost {

//! @brief c(t): the cost of recomputing the storage alone (its operator, plus operators that
//! made views of it). O(1), no metadata of its own, nothing to maintain.
struct local {
    struct storage_data {};
    static constexpr char tag[] = "local";

    //! @brief The storage's own cost. Reads only the storage's own record, which the score
    //! counts as its one metadata access.
    template <class Storage>
    double numerator(const Storage& s, const heuristic_context&) const noexcept {
        return static_cast<double>(s.cost());
    }
};

} // namespace dtr::heuristics::cost
