// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Search strategies by the names they carry on command lines.
#pragma once

#include <dtr/heuristic/ablation.hpp>
#include <dtr/search/exhaustive.hpp>
#include <dtr/search/indexed.hpp>
#include <dtr/search/sampled.hpp>
#include <dtr/search/skip_small.hpp>

#include <string_view>
#include <type_traits>

namespace dtr::search {

//! @brief Calls f(std::type_identity<S>{}) with S the strategy named `name` wrapping H:
//! "exhaustive", "sampled", "skip_small", or "indexed" (search::indexable policies only).
//! Returns: false when the name is unknown or the combination unsupported.
template <class H, class F>
bool with_strategy(std::string_view name, F&& f) {
    if (name == "exhaustive") return f(std::type_identity<exhaustive<H>>{}), true;
    if (name == "sampled") return f(std::type_identity<sampled<H>>{}), true;
    if (name == "skip_small") return f(std::type_identity<skip_small<H>>{}), true;
    if constexpr (indexable<H>)
        if (name == "indexed") return f(std::type_identity<indexed<H>>{}), true;
    return false;
}

} // namespace dtr::search
