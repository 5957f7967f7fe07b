// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_DTR^eq whose classes below a storage count only what the program still holds.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/eqclass.hpp>
#include <dtr/heuristic/next_use.hpp>

namespace dtr::heuristics {

//! @brief dtr_eqclass, with the classes reached through t's evicted children charged only
//! for their members that still have a handle (cost::eqclass_held): dtr_held's downward
//! half, on union-find classes, so with dtr_eqclass's near-constant upkeep.
struct dtr_eqclass_held : ablation<cost::eqclass_held, true, true> {
    static constexpr const char* name = "dtr_eqclass_held";
};
static_assert(heuristic<dtr_eqclass_held>);

//! @brief dtr_eqclass_held with the forecast (next_use_aware).
struct dtr_eqclass_held_next_use : next_use_aware<dtr_eqclass_held> {
    static constexpr const char* name = "dtr_eqclass_held_next_use";
    using next_use_aware<dtr_eqclass_held>::next_use_aware;
};
static_assert(heuristic<dtr_eqclass_held_next_use>);

} // namespace dtr::heuristics
