// SPDX-License-Identifier: Apache-2.0
// Heuristics and search strategies by their command-line names, for the bench programs.
#pragma once

#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/replay/replay.hpp>

#include <string>
#include <vector>

namespace dtr_bench {

//! Calls f.template operator()<H>() with the heuristic type named `name`; false if unknown.
template <class F>
bool visit_heuristic(const std::string& name, F&& f) {
    if (name == "dtr_local") return f.template operator()<dtr::heuristics::dtr_local>(), true;
    if (name == "lru") return f.template operator()<dtr::heuristics::lru>(), true;
    if (name == "largest") return f.template operator()<dtr::heuristics::largest>(), true;
    return false;
}

inline std::vector<std::string> all_heuristics() { return {"dtr_local", "lru", "largest"}; }

inline bool known_heuristic(const std::string& name) {
    return visit_heuristic(name, []<class>() {});
}

inline std::string heuristic_names() {
    std::string s;
    for (const auto& h : all_heuristics()) s += (s.empty() ? "" : ", ") + h;
    return s;
}

inline bool known_search(const std::string& name) { return name == "exhaustive"; }
inline std::string search_names() { return "exhaustive"; }

//! Replays `t` with the named heuristic and search strategy.
inline dtr::replay::replay_result replay_with(const std::string& heuristic, const std::string& /*search*/,
                                              const dtr::replay::trace& t,
                                              const dtr::replay::replay_options& options) {
    dtr::replay::replay_result r;
    visit_heuristic(heuristic, [&]<class H>() { r = dtr::replay::run_replay<H>(t, options); });
    return r;
}

} // namespace dtr_bench
