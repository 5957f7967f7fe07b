// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Policies by the names they carry in code and on command lines.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/eqclass.hpp>
#include <dtr/heuristic/cost/estar.hpp>
#include <dtr/heuristic/cost/local.hpp>
#include <dtr/heuristic/cost/none.hpp>
#include <dtr/heuristic/dtr.hpp>
#include <dtr/heuristic/dtr_ancestors.hpp>
#include <dtr/heuristic/dtr_ancestors_soft.hpp>
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_eqclass_held.hpp>
#include <dtr/heuristic/dtr_held.hpp>
#include <dtr/heuristic/dtr_held_bounded.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/heuristic/msps.hpp>
#include <dtr/heuristic/next_use.hpp>
#include <dtr/heuristic/random.hpp>

#include <string_view>
#include <type_traits>

namespace dtr::heuristics {

//! @brief Every policy type with a command-line name, as a type list.
template <class... H>
struct policy_list {};

//! The Appendix D ablations of one cost model (the none/none combination is `random`).
template <class Cost>
using ablations_of = policy_list<ablation<Cost, true, true>, ablation<Cost, true, false>,
                                 ablation<Cost, false, true>, ablation<Cost, false, false>>;

using named_policies =
    policy_list<dtr, dtr_eqclass, dtr_local, msps, lru, largest, random, dtr_ancestors,
                dtr_ancestors_soft, dtr_held, dtr_held_bounded, dtr_next_use, dtr_held_next_use,
                dtr_eqclass_held, dtr_eqclass_held_next_use>;

namespace detail {
template <class F, class... H>
bool find_policy(std::string_view name, F& f, policy_list<H...>) {
    return ((name == H::name ? (f(std::type_identity<H>{}), true) : false) || ...);
}
} // namespace detail

//! @brief Calls f(std::type_identity<H>{}) for the policy H named `name` ("dtr",
//! "dtr_eqclass", "dtr_local", "msps", "lru", "largest", "random", or an ablation such as
//! "ablation-estar-size-nostale"). Returns: false when no policy has that name.
template <class F>
bool with_heuristic(std::string_view name, F&& f) {
    return detail::find_policy(name, f, named_policies{}) ||
           detail::find_policy(name, f, ablations_of<cost::estar<>>{}) ||
           detail::find_policy(name, f, ablations_of<cost::eqclass>{}) ||
           detail::find_policy(name, f, ablations_of<cost::local>{}) ||
           detail::find_policy(
               name, f,
               policy_list<ablation<cost::none, true, true>, ablation<cost::none, true, false>,
                           ablation<cost::none, false, true>>{});
}

} // namespace dtr::heuristics
