// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief h_DTR^eq: h_DTR with the evicted neighbourhood approximated by union-find classes.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/cost/eqclass.hpp>

namespace dtr::heuristics {

//! @brief h_DTR^eq(t) = (c(t) + sum over distinct classes K of t's evicted neighbours of
//! c(K)) / (m(t) x (now - last_access(t))).
//!
//! Classes are undirected union-find sets of evicted storages; a class's cost is the summed
//! cost of its members evicted now. Rematerializing a member subtracts its cost without
//! splitting the class (phantom dependencies: see cost::eqclass). Matches the published
//! simulator's `DTREqClass`.
//!
//! The runtime's default scores by it wherever the program does not repeat a recorded step
//! (dtr_next_use, next_use.hpp): near-constant maintenance per event, scores close to
//! h_DTR's, and dtr::search::indexed makes its victim search sub-linear. Choose it alone for
//! a program without repeated steps.
struct dtr_eqclass : ablation<cost::eqclass, true, true> {
    static constexpr const char* name = "dtr_eqclass";
};
static_assert(heuristic<dtr_eqclass>);

} // namespace dtr::heuristics
