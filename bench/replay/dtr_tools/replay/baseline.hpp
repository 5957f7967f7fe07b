// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A log's baseline, the unlimited run that budgets are ratios of, and how its
//! constants replay: shared by dtr-replay and dtr-log-bound, so that a ratio means the same
//! budget in both.
#pragma once

#include <dtr/heuristic/dtr_local.hpp>
#include <dtr_tools/replay/replay.hpp>

#include <cstddef>
#include <string>

namespace dtr::replay {

//! @brief How a log's constants replay. The one-step logs the simulator replays keep its
//! rules: a constant stays resident to the end, and an update of one is a version
//! recomputable from the old one (which then stays too). A log that records several steps of
//! a training loop (ANNOTATE STEP) replays as the loop runs: each step's batch is freed once
//! released, and each step's update of a parameter is a new constant, the old version freed
//! once nothing computed from it remains. (Under the simulator's rules the batches of every
//! step and every version of every parameter would stay resident.)
inline void constants_as_logged(const trace& t, replay_options& options) {
    const bool training_loop = t.logged_steps() > 1;
    options.constant_updates =
        training_loop ? constant_update::constant : constant_update::rematerializable;
    if (training_loop) options.keep_constants = false;
}

//! @brief The unlimited run of a log: its peak (the budgets' unit) and compute.
struct baseline {
    std::size_t peak = 0;
    cost_t compute = 0;
    std::string error; //!< why the unlimited run failed; empty when it did not
};

//! @brief Runs `t` without a budget. The simulator measures the baseline peak with its
//! banishing runtime, which frees a constant as soon as nothing refers to it; so does this,
//! for the same budgets. No eviction happens, so any heuristic gives the same run.
[[nodiscard]] inline baseline unlimited_baseline(const trace& t) {
    replay_options unlimited{.dealloc = dealloc_policy::banish, .thrash_limit = 0};
    constants_as_logged(t, unlimited);
    unlimited.keep_constants = false;
    const replay_result r = run_replay<heuristics::dtr_local>(t, unlimited);
    if (r.status != status::ok)
        return {.peak = 0, .compute = 0, .error = r.error.empty() ? to_string(r.status) : r.error};
    return {.peak = r.peak_resident, .compute = r.compute, .error = {}};
}

} // namespace dtr::replay
