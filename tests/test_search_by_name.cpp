// SPDX-License-Identifier: Apache-2.0
// The search strategies by name (dtr/search/by_name.hpp): which policy each one takes. Asked
// the way the bench tools ask it, over every named policy from a generic lambda, with the
// runtime's pool type looked up first: in that order GCC 12 once judged
// dtr::search::indexable<dtr_next_use> false (its memoized constraint), so dtr-replay refused
// `--search indexed --heuristic dtr_next_use` while the bridge, instantiating it directly,
// took it. Keep this file free of other uses of search::indexed: the order is what it tests.
#include <dtr/backend/sim.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/by_name.hpp>

#include <doctest/doctest.h>

#include <string>
#include <type_traits>

namespace {

//! A policy with its own choose and no scores: no strategy can search for it.
template <class H>
concept chooses_itself =
    dtr::choosing_heuristic<H, typename dtr::runtime<dtr::sim_backend, H>::pool_type> &&
    !dtr::scoring_heuristic<H>;

//! Whether the named policy runs under the named strategy (as dtr-replay's registry asks).
bool supported(const std::string& heuristic, const std::string& search) {
    bool ok = false;
    dtr::heuristics::with_heuristic(heuristic, [&]<class H>(std::type_identity<H>) {
        if constexpr (!chooses_itself<H>) ok = dtr::search::with_strategy<H>(search, [](auto) {});
    });
    return ok;
}

} // namespace

TEST_CASE("the strategies by name take the policies they can search") {
    for (const char* search : {"exhaustive", "sampled", "skip_small", "indexed"}) {
        CAPTURE(search);
        CHECK(supported("dtr_eqclass", search));
        CHECK(supported("dtr_next_use", search));
        CHECK(supported("dtr", search));
    }
    // The index needs a score of the skeleton (or a forecast reader over one).
    CHECK_FALSE(supported("dtr_held", "indexed"));
    CHECK_FALSE(supported("dtr_held_next_use", "indexed"));
    CHECK(supported("dtr_held", "sampled"));
    // random chooses itself; an unknown strategy is refused.
    CHECK_FALSE(supported("random", "exhaustive"));
    CHECK_FALSE(supported("dtr_eqclass", "heap"));
}
