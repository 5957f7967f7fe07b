// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Out-of-line members of dtr::runtime: release, collection and banishing of storages, teardown, and the invariant checker. Included by <dtr/runtime.hpp> only.
#pragma once

#include <dtr/runtime.hpp>

#include <algorithm>
#include <sstream>

namespace dtr {

// =====================================================================================
// lifetime: release, collection, banishing
// =====================================================================================

template <class B, class H>
void runtime<B, H>::on_last_handle(storage_t* s) noexcept {
    hook_on_release(*s);
    if (s->consumers.empty()) {
        enqueue(s);
        return;
    }
    if (options_.dealloc == dealloc_policy::eager_evict) {
        if (s->evictable()) evict_storage(s, true);
    } else {
        s->banish_pending = true;
        if (s->evictable()) evict_storage(s, true);
        enqueue(s);
    }
}

template <class B, class H>
void runtime<B, H>::enqueue(storage_t* s) noexcept {
    if (s->queued) return;
    s->queued = true;
    examine_queue_.push_back(s);
}

template <class B, class H>
void runtime<B, H>::finish() noexcept {
    for (;;) {
        if (deferred_ != nullptr) {
            detail::tensor_node* node = deferred_;
            deferred_ = node->next_deferred;
            release_now(node);
            continue;
        }
        if (examine_queue_.empty()) break;
        storage_t* s = examine_queue_.back();
        examine_queue_.pop_back();
        s->queued = false;
        examine(s);
    }
}

template <class B, class H>
void runtime<B, H>::examine(storage_t* s) noexcept {
    if (s->pins != 0 || !s->tensors.empty()) return;
    if (s->consumers.empty()) {
        destroy_storage(s);
        return;
    }
    if (s->banish_pending && banish_safe(s)) banish(s);
}

template <class B, class H>
bool runtime<B, H>::banish_safe(const storage_t* s) const noexcept {
    for (const edge_t& e : s->consumers) {
        bool all_resident = true;
        e.op->for_each_product([&](const storage_t& child) { all_resident &= child.is_resident; });
        if (!all_resident) return false;
    }
    return true;
}

template <class B, class H>
void runtime<B, H>::banish(storage_t* s) noexcept {
    // Every dependent is resident: free s for good. The dependents lose their recipe (it
    // reads s) and so can no longer be evicted; those without handles are banished in turn
    // once they are safe.
    // s itself is freed when examined next: destroy_op() queues it, without dependents.
    while (!s->consumers.empty()) {
        op_t* op = s->consumers.front().op;
        op->for_each_product([&](storage_t& child) {
            child.producer = nullptr;
            refresh_pool(&child);
            if (child.tensors.empty()) {
                child.banish_pending = true;
                enqueue(&child);
            }
        });
        for (std::uint32_t i = 0; i < op->n_outputs; ++i) op->out[i].storage = nullptr;
        for (std::uint32_t k = 0; k < op->n_versions; ++k) op->ver[k].storage = nullptr;
        op->live = 0;
        destroy_op(op);
    }
    ++counters_.banishments;
}

template <class B, class H>
void runtime<B, H>::destroy_storage(storage_t* s) noexcept {
    if (s->is_resident) free_memory(s->ptr, s->bytes);
    s->is_resident = false;
    if (s->pool_hook.is_linked()) {
        pool_.erase(pool_.iterator_to(*s));
        hook_on_pool_erase(*s);
    }
    hook_on_destroy(*s);
    all_storages_.erase(all_storages_.iterator_to(*s));
    if (op_t* op = s->producer) {
        for (std::uint32_t i = 0; i < op->n_outputs; ++i)
            if (op->out[i].storage == s) op->out[i].storage = nullptr;
        for (std::uint32_t k = 0; k < op->n_versions; ++k)
            if (op->ver[k].storage == s) op->ver[k].storage = nullptr;
        if (--op->live == 0) destroy_op(op);
    }
    ++counters_.storages_freed;
    delete s;
}

template <class B, class H>
void runtime<B, H>::destroy_op(op_t* op) noexcept {
    if constexpr (deferred_costs<B>)
        for (std::size_t i = pending_head_; i < pending_costs_.size(); ++i)
            if (pending_costs_[i].op == op) pending_costs_[i].op = nullptr;
    for (std::uint32_t i = 0; i < op->n_inputs; ++i) {
        edge_t& e = op->in[i];
        if (!e.consumer_hook.is_linked()) continue;
        e.storage->consumers.erase(e.storage->consumers.iterator_to(e));
        enqueue(e.storage);
    }
    all_ops_.erase(all_ops_.iterator_to(*op));
    delete op; // may drop handles captured by the operator: deferred, we are busy
}

// =====================================================================================
// teardown and invariants
// =====================================================================================

template <class B, class H>
runtime<B, H>::~runtime() {
    busy_ = true;
    for (storage_t& s : all_storages_) {
        // Orphan the handles' tensors: they outlive us and free themselves.
        while (!s.tensors.empty()) {
            detail::tensor_node& tn = s.tensors.front();
            s.tensors.pop_front();
            tn.owner = nullptr;
            tn.storage = nullptr;
        }
        s.consumers.clear();
        if (s.is_resident) backend_.deallocate(s.ptr, s.bytes);
    }
    pool_.clear();
    // Handles dropped while deferred, and those captured by recipes, are orphans by now.
    while (deferred_ != nullptr) {
        detail::tensor_node* node = deferred_;
        deferred_ = node->next_deferred;
        delete node;
    }
    for (detail::tensor_node* node : spare_nodes_) delete node;
    all_ops_.clear_and_dispose([](op_t* op) { delete op; });
    all_storages_.clear_and_dispose([](storage_t* s) { delete s; });
}

template <class B, class H>
void runtime<B, H>::check_invariants() const {
    auto fail = [](const std::string& what) { throw logic_error("dtr: invariant broken: " + what); };
    auto sid = [](const storage_t& s) { return "storage #" + std::to_string(s.sid); };
    std::size_t resident = 0, pool_members = 0, pins = 0;
    for (const storage_t& s : all_storages_) {
        if (s.is_resident) resident += s.bytes;
        if (s.pool_hook.is_linked() != s.evictable()) fail(sid(s) + ": pool membership disagrees with evictability");
        if (s.pool_hook.is_linked()) ++pool_members;
        pins += s.pins;
        if (s.write_guards > s.pins) fail(sid(s) + ": more write guards than pins");
        if (s.write_guards > 0 && !s.is_constant) fail(sid(s) + ": a write guard on a computed storage");
        if (!s.is_resident && s.producer == nullptr) fail(sid(s) + " is evicted but has no recipe");
        if (s.tensors.empty() && s.consumers.empty() && s.pins == 0) fail(sid(s) + " is garbage (no handle, no dependent) but alive");
        if (s.queued) fail(sid(s) + " is still queued at rest");
        if (s.banish_pending && options_.dealloc != dealloc_policy::banish) fail(sid(s) + " pending banishment under eager eviction");
        // A storage that lost its handles to a mutation while a pin guard holds it waits for
        // the guard, not for banishment, when nothing was computed from it.
        if (options_.dealloc == dealloc_policy::banish && s.tensors.empty() && !s.banish_pending &&
            !(s.pins > 0 && s.consumers.empty()))
            fail(sid(s) + " has no handle but is not pending banishment");
        for (const detail::tensor_node& tn : s.tensors) {
            if (tn.storage != &s || tn.owner != this) fail(sid(s) + ": a tensor points elsewhere");
            if (tn.offset > s.bytes || tn.length > s.bytes - tn.offset) fail(sid(s) + ": a tensor view exceeds it");
        }
        for (const edge_t& e : s.consumers)
            if (e.storage != &s || !e.op->all_hook.is_linked()) fail(sid(s) + ": a consumer edge is stale");
        if (const op_t* op = s.producer) {
            if (!op->all_hook.is_linked()) fail(sid(s) + ": its recipe is not alive");
            bool found = false;
            op->for_each_product([&](const storage_t& p) { found |= (&p == &s); });
            if (!found) fail(sid(s) + ": its recipe does not list it");
            for (std::uint32_t i = 0; i < op->n_inputs; ++i)
                if (!op->in[i].consumer_hook.is_linked()) fail(sid(s) + ": its recipe's inputs are unlinked");
        }
    }
    for (const op_t& op : all_ops_) {
        std::uint32_t live = 0;
        op.for_each_product([&](const storage_t& p) { live += (p.producer == &op); });
        if (live != op.live || live == 0) fail("operator #" + std::to_string(op.id) + ": live count " +
                                               std::to_string(op.live) + ", products " + std::to_string(live));
    }
    if (resident != counters_.resident_bytes)
        fail("resident bytes " + std::to_string(counters_.resident_bytes) + " but storages sum to " +
             std::to_string(resident));
    if (resident > options_.budget) fail("resident bytes exceed the budget");
    if (pool_members != pool_.size()) fail("pool size mismatch");
    if (pins != user_pins_) fail("pins at rest (" + std::to_string(pins) + ") differ from live pin guards (" +
                                 std::to_string(user_pins_) + ")");
}

} // namespace dtr
