// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The decrease listener: how a cost model tells an index whose numerator may have
//! dropped.
#pragma once

namespace dtr::heuristics::cost {

//! @brief The listener of a policy used without an index: ignores every report.
//!
//! A cost model's maintenance hooks take an optional listener, a callable invoked with each
//! storage whose numerator may have decreased (rematerializations and destructions shrink
//! evicted neighbourhoods and classes). dtr::search::indexed passes one that re-keys those
//! storages; the runtime calls the hooks without one.
struct ignore_decrease {
    template <class Storage>
    void operator()(Storage&) const noexcept {}
};

} // namespace dtr::heuristics::cost
