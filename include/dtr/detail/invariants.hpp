// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The invariant checker behind runtime::check_invariants (tests and debugging).
#pragma once

#include <dtr/counters.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/error.hpp>
#include <dtr/options.hpp>
#include <dtr/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtr::detail {

//! @brief Walks `graph` and throws dtr::logic_error describing the first broken invariant.
//! `owner` is the runtime the graph's tensors must name; `pool_size`, `stats`, `options`,
//! `user_pins` and `awaited` (the offloader's map of dropped storages with a forecast read)
//! are the runtime's. Complexity: linear in the graph.
template <class Backend, class Meta>
void check_invariants(const dependency_graph<Backend, Meta>& graph, const runtime_base* owner,
                      std::size_t pool_size, const counters& stats, const runtime_options& options,
                      std::size_t user_pins, std::size_t awaited) {
    using storage = storage_record<Backend, Meta>;
    using op = op_node<Backend, Meta>;
    using edge = input_edge<Backend, Meta>;
    auto fail = [](const std::string& what) {
        throw logic_error("dtr: invariant broken: " + what);
    };
    auto sid = [](const storage& s) { return "storage #" + std::to_string(s.sid); };
    std::size_t resident = 0, pool_members = 0, pins = 0, host = 0, awaited_flags = 0;
    for (const storage& s : graph.storages) {
        if (s.is_resident) resident += s.bytes;
        if (s.host.valid()) host += s.bytes; // offload: host copies
        if (s.pool_hook.is_linked() != s.evictable())
            fail(sid(s) + ": pool membership disagrees with evictability");
        if (s.pool_hook.is_linked()) ++pool_members;
        pins += s.pins;
        if (s.write_guards > s.pins) fail(sid(s) + ": more write guards than pins");
        if (s.write_guards > 0 && !s.is_constant)
            fail(sid(s) + ": a write guard on a computed storage");
        if (!s.is_resident && s.producer == nullptr && !s.offloaded())
            fail(sid(s) + " is evicted but has no recipe");
        if (s.unheld() && s.consumers.empty() && s.pins == 0)
            fail(sid(s) + " is garbage (no handle, no dependent) but alive");
        if (s.queued) fail(sid(s) + " is still queued at rest");
        if (s.awaited) {
            ++awaited_flags;
            if (s.is_resident || s.offloaded() || s.producer == nullptr)
                fail(sid(s) + " is awaited for prefetch but not dropped with a recipe");
        }
        if (s.banish_pending && options.dealloc != dealloc_policy::banish)
            fail(sid(s) + " pending banishment under eager eviction");
        // A storage that lost its handles to a mutation while a pin guard holds it waits for
        // the guard, not for banishment, when nothing was computed from it.
        if (options.dealloc == dealloc_policy::banish && s.unheld() && !s.banish_pending &&
            !(s.pins > 0 && s.consumers.empty()))
            fail(sid(s) + " has no handle but is not pending banishment");
        for (const tensor_node& tn : s.tensors) {
            if (tn.storage != &s || tn.owner != owner) fail(sid(s) + ": a tensor points elsewhere");
            if (tn.offset > s.bytes || tn.length > s.bytes - tn.offset)
                fail(sid(s) + ": a tensor view exceeds it");
        }
        for (const edge& e : s.consumers)
            if (e.storage != &s || !e.op->all_hook.is_linked())
                fail(sid(s) + ": a consumer edge is stale");
        if (const op* o = s.producer) {
            if (!o->all_hook.is_linked()) fail(sid(s) + ": its recipe is not alive");
            bool found = false;
            o->for_each_product([&](const storage& p) { found |= (&p == &s); });
            if (!found) fail(sid(s) + ": its recipe does not list it");
            for (std::uint32_t i = 0; i < o->n_inputs; ++i)
                if (!o->in[i].consumer_hook.is_linked())
                    fail(sid(s) + ": its recipe's inputs are unlinked");
        }
    }
    for (const op& o : graph.ops) {
        std::uint32_t live = 0;
        o.for_each_product([&](const storage& p) { live += (p.producer == &o); });
        if (live != o.live || live == 0)
            fail("operator #" + std::to_string(o.id) + ": live count " + std::to_string(o.live) +
                 ", products " + std::to_string(live));
    }
    if (resident != stats.resident_bytes)
        fail("resident bytes " + std::to_string(stats.resident_bytes) + " but storages sum to " +
             std::to_string(resident));
    if (resident > options.budget) fail("resident bytes exceed the budget");
    if (host != stats.host_bytes)
        fail("host tier bytes " + std::to_string(stats.host_bytes) + " but host copies sum to " +
             std::to_string(host));
    if (pool_members != pool_size) fail("pool size mismatch");
    if (awaited_flags != awaited)
        fail("awaited storages " + std::to_string(awaited_flags) + " but the prefetch map holds " +
             std::to_string(awaited));
    if (pins != user_pins)
        fail("pins at rest (" + std::to_string(pins) + ") differ from live pin guards (" +
             std::to_string(user_pins) + ")");
}

} // namespace dtr::detail
