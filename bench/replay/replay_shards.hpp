// SPDX-License-Identifier: Apache-2.0
// dtr-replay's replays, compiled in shards. Each policy and search strategy instantiates its
// own dtr::runtime<sim_backend, S>; with every one in dtr_replay.cpp, that one translation
// unit took 7 minutes to compile and no build could spread it over cores. replay_shard.cpp is
// compiled once per shard (bench/replay/meson.build), each copy instantiating the policies
// whose name hashes to it; dtr_replay.cpp asks every shard in turn.
#pragma once

#include <dtr_tools/replay/replay.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dtr_bench {

//! Shards of replay_shard.cpp; bench/replay/meson.build compiles that many copies (a shard it
//! does not build leaves replay_in_shard<k> undefined at link time, never a policy missing).
inline constexpr std::size_t replay_shard_count = 4;

//! The shard that compiles the replays of the policy named `name`: by a hash of the name
//! (FNV-1a), so that adding a policy moves no other one.
constexpr std::size_t replay_shard_of(std::string_view name) noexcept {
    std::uint64_t h = 14695981039346656037ull;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return static_cast<std::size_t>(h % replay_shard_count);
}

//! Replays `t` under the policy `heuristic` and strategy `search` into `out` when that policy
//! belongs to shard `Shard`; returns whether it did. `seed`: as detail::make_policy
//! (heuristic_registry.hpp). Defined in replay_shard.cpp, instantiated there for one shard
//! per compilation.
template <std::size_t Shard>
bool replay_in_shard(const std::string& heuristic, const std::string& search,
                     const dtr::replay::trace& t, const dtr::replay::replay_options& options,
                     std::optional<std::uint64_t> seed, dtr::replay::replay_result& out);

namespace detail {
template <std::size_t... Shard>
bool replay_in_some_shard(std::index_sequence<Shard...>, const std::string& heuristic,
                          const std::string& search, const dtr::replay::trace& t,
                          const dtr::replay::replay_options& options,
                          std::optional<std::uint64_t> seed, dtr::replay::replay_result& out) {
    return (replay_in_shard<Shard>(heuristic, search, t, options, seed, out) || ...);
}
} // namespace detail

//! Replays `t` with the named policy and search strategy, whichever shard compiled it. The
//! caller has checked the combination (dtr_bench::supported); an unknown one returns a
//! default result.
inline dtr::replay::replay_result replay_sharded(const std::string& heuristic,
                                                 const std::string& search,
                                                 const dtr::replay::trace& t,
                                                 const dtr::replay::replay_options& options,
                                                 std::optional<std::uint64_t> seed) {
    dtr::replay::replay_result r;
    detail::replay_in_some_shard(std::make_index_sequence<replay_shard_count>{}, heuristic, search,
                                 t, options, seed, r);
    return r;
}

} // namespace dtr_bench
