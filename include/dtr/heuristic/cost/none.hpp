// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model "none": a constant numerator, for the paper's "no cost" ablations.
#pragma once

#include <dtr/concepts.hpp>

namespace dtr::heuristics::cost {

//! @brief 1 for every storage: with size and staleness the score becomes 1/(m * s), 1/m or
//! 1/s (the simulator's AbSizeStale, AbSize = LargestStorage, AbStale).
struct none {
    struct storage_data {};
    static constexpr char tag[] = "none";

    //! @brief Always 1; reads nothing.
    template <class Storage>
    double numerator(const Storage&, const heuristic_context&) const noexcept {
        return 1.0;
    }
};

} // namespace dtr::heuristics::cost
