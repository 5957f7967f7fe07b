// SPDX-License-Identifier: Apache-2.0
// Heuristics and search strategies by their command-line names, for the bench programs: a
// thin layer over the library's own registries (dtr/heuristic/by_name.hpp,
// dtr/search/by_name.hpp), so every policy the library names is available here.
#pragma once

#include <dtr/backend/sim.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/by_name.hpp>
#include <dtr_tools/replay/replay.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace dtr_bench {

//! A policy that replaces the runtime's scan with its own choose() (random): it has no score
//! for a search strategy to use.
template <class H>
concept chooses_itself =
    dtr::choosing_heuristic<H, typename dtr::runtime<dtr::sim_backend, H>::pool_type> &&
    !dtr::scoring_heuristic<H>;

namespace detail {
template <class... H>
void append_names(std::vector<std::string>& out, dtr::heuristics::policy_list<H...>) {
    (out.emplace_back(H::name), ...);
}

template <class>
struct is_sampled : std::false_type {};
template <class H>
struct is_sampled<dtr::search::sampled<H>> : std::true_type {};

//! Builds policy S, giving it `seed` where it draws random numbers (random, sampled<H>);
//! without a seed every policy keeps its own fixed default seed.
template <class S>
S make_policy(std::optional<std::uint64_t> seed) {
    if (!seed) return S{};
    if constexpr (std::is_same_v<S, dtr::heuristics::random>)
        return S(*seed);
    else if constexpr (is_sampled<S>::value) {
        using inner = typename S::inner_type;
        if constexpr (std::is_same_v<inner, dtr::heuristics::random>)
            return S(inner(*seed), *seed);
        else
            return S(inner{}, *seed);
    } else
        return S{};
}
} // namespace detail

//! The paper's policies (the default list of dtr-replay): the simulator's six and random.
inline std::vector<std::string> all_heuristics() {
    return {"dtr", "dtr_eqclass", "dtr_local", "msps", "lru", "largest", "random"};
}

//! Every name with_heuristic knows: the library's named policies and the Appendix D ablations.
inline std::vector<std::string> every_heuristic() {
    namespace h = dtr::heuristics;
    std::vector<std::string> out;
    detail::append_names(out, h::named_policies{});
    detail::append_names(out, h::ablations_of<h::cost::estar<>>{});
    detail::append_names(out, h::ablations_of<h::cost::eqclass>{});
    detail::append_names(out, h::ablations_of<h::cost::local>{});
    detail::append_names(out, h::policy_list<h::ablation<h::cost::none, true, true>,
                                             h::ablation<h::cost::none, true, false>,
                                             h::ablation<h::cost::none, false, true>>{});
    return out;
}

inline bool known_heuristic(const std::string& name) {
    return dtr::heuristics::with_heuristic(name, [](auto) {});
}

inline std::string heuristic_names() {
    std::string s;
    for (const auto& h : every_heuristic()) s += (s.empty() ? "" : ", ") + h;
    return s;
}

inline std::vector<std::string> all_searches() {
    return {"exhaustive", "sampled", "skip_small", "indexed"};
}

inline std::string search_names() {
    return "exhaustive, sampled, skip_small, indexed (indexed: the score-skeleton policies, and "
           "dtr_next_use over dtr_eqclass's index; random takes exhaustive only)";
}

//! Calls f(std::type_identity<S>{}) with S the policy `heuristic` under strategy `search`.
//! "exhaustive" is the runtime's own scan (H unwrapped: same choices, and a policy with its
//! own choose(), random, keeps it). @return false for an unknown or unsupported combination.
template <class F>
bool visit(const std::string& heuristic, const std::string& search, F&& f) {
    bool supported = false;
    const bool known =
        dtr::heuristics::with_heuristic(heuristic, [&]<class H>(std::type_identity<H>) {
            if (search == "exhaustive") {
                f(std::type_identity<H>{});
                supported = true;
            } else if constexpr (!chooses_itself<H>) {
                supported = dtr::search::with_strategy<H>(search, f);
            }
        });
    return known && supported;
}

inline bool known_search(const std::string& name) {
    for (const auto& s : all_searches())
        if (s == name) return true;
    return false;
}

//! True when `heuristic` can run under `search`.
inline bool supported(const std::string& heuristic, const std::string& search) {
    return visit(heuristic, search, [](auto) {});
}

//! Replays `t` with the named heuristic and search strategy (seed: see make_policy).
inline dtr::replay::replay_result replay_with(const std::string& heuristic,
                                              const std::string& search,
                                              const dtr::replay::trace& t,
                                              const dtr::replay::replay_options& options,
                                              std::optional<std::uint64_t> seed = std::nullopt) {
    dtr::replay::replay_result r;
    visit(heuristic, search, [&]<class S>(std::type_identity<S>) {
        r = dtr::replay::run_replay<S>(t, options, detail::make_policy<S>(seed));
    });
    return r;
}

} // namespace dtr_bench
