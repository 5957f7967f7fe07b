// SPDX-License-Identifier: Apache-2.0
// One shard of dtr-replay's replays (replay_shards.hpp): compiled once per shard with
// DTR_REPLAY_SHARD set to its index, each copy instantiating the runtimes of the policies
// whose name hashes to that shard, under every search strategy they support.
#include "heuristic_registry.hpp"
#include "replay_shards.hpp"

#ifndef DTR_REPLAY_SHARD
#error "replay_shard.cpp is compiled with DTR_REPLAY_SHARD=<index> (bench/replay/meson.build)"
#endif
static_assert(DTR_REPLAY_SHARD < dtr_bench::replay_shard_count,
              "bench/replay/meson.build builds more shards than replay_shard_count");

namespace dtr_bench {

template <std::size_t Shard>
bool replay_in_shard(const std::string& heuristic, const std::string& search,
                     const dtr::replay::trace& t, const dtr::replay::replay_options& options,
                     std::optional<std::uint64_t> seed, dtr::replay::replay_result& out) {
    bool ran = false;
    dtr::heuristics::with_heuristic(heuristic, [&]<class H>(std::type_identity<H>) {
        if constexpr (replay_shard_of(H::name) == Shard)
            ran = visit_searches<H>(search, [&]<class S>(std::type_identity<S>) {
                out = dtr::replay::run_replay<S>(t, options, detail::make_policy<S>(seed));
            });
    });
    return ran;
}

template bool replay_in_shard<DTR_REPLAY_SHARD>(const std::string&, const std::string&,
                                                const dtr::replay::trace&,
                                                const dtr::replay::replay_options&,
                                                std::optional<std::uint64_t>,
                                                dtr::replay::replay_result&);

} // namespace dtr_bench
