// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Release and banishing: what happens when a storage loses its last handle, the
//! work list that frees storages and records without recursion, and banishing.
#pragma once

#include <dtr/deferred_cost.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/options.hpp>
#include <dtr/tensor.hpp>

#include <cstdint>
#include <vector>

namespace dtr::detail {

//! @brief Releases of handles and storages, handled when the runtime is not busy.
//!
//! A storage without handles is examined from a work list (never recursively): freed when
//! nothing depends on it, banished under dealloc_policy::banish once every dependent is
//! resident.
//!
//! @tparam Rt the runtime: its options, counters, registry, pool, cost queue and hooks.
template <class Rt, class Backend, class Meta>
class release_queue : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::edge;
    using typename base::op;
    using typename base::storage;

    explicit release_queue(Rt& rt) noexcept : base(rt) {}

    //! @brief A handle's node released while the runtime is busy: handled by drain().
    void defer(tensor_node* node) noexcept {
        node->next_deferred = deferred_;
        deferred_ = node;
    }

    //! @brief Drops `node` (its last handle is gone) from its storage.
    void release(tensor_node* node) noexcept {
        auto* s = static_cast<storage*>(node->storage);
        s->tensors.erase(s->tensors.iterator_to(*node));
        rt_.recycle_node(node);
        if (s->unheld()) on_last_handle(s);
    }

    //! @brief `s` lost its last handle: freed when nothing depends on it, else evicted
    //! (eager_evict), evicted and marked for banishing (banish), or left as it is
    //! (keep_resident, and keep_once_bound once the budget has bound: the policy evicts it
    //! when it chooses).
    void on_last_handle(storage* s) noexcept {
        rt_.hook_on_release(*s);
        rt_.pool_.on_unheld(s);
        if (s->consumers.empty()) {
            enqueue(s);
            return;
        }
        const dealloc_policy policy = rt_.options_.dealloc;
        if (rt_.keeps_released()) return;
        if (s->evictable()) rt_.pool_.evict(s, true);
        if (policy == dealloc_policy::banish) request_banish(s);
    }

    //! @brief Queues `s` to be examined when the operation ends.
    void enqueue(storage* s) noexcept {
        if (s->queued) return;
        s->queued = true;
        queue_.push_back(s);
    }

    //! @brief `op` has just been recomputed: a pending banishment of one of its inputs may
    //! have become safe.
    void recheck_inputs(const op& o) noexcept {
        for (std::uint32_t i = 0; i < o.n_inputs; ++i)
            if (o.in[i].storage->banish_pending) enqueue(o.in[i].storage);
    }

    //! @brief Handles every deferred release and queued storage, until none is left.
    void drain() noexcept {
        for (;;) {
            if (deferred_ != nullptr) {
                tensor_node* node = deferred_;
                deferred_ = node->next_deferred;
                release(node);
                continue;
            }
            if (queue_.empty()) break;
            storage* s = queue_.back();
            queue_.pop_back();
            s->queued = false;
            examine(s);
        }
    }

    //! @brief Teardown: frees the nodes of deferred releases (orphans by then).
    void discard_deferred() noexcept {
        while (deferred_ != nullptr) {
            tensor_node* node = deferred_;
            deferred_ = node->next_deferred;
            delete node;
        }
    }

private:
    //! Marks `s` (without handles) for banishing and queues the safety check.
    void request_banish(storage* s) noexcept {
        s->banish_pending = true;
        enqueue(s);
    }

    void examine(storage* s) noexcept {
        if (s->pins != 0 || !s->unheld()) return;
        if (s->consumers.empty()) {
            destroy_storage(s);
            return;
        }
        if (s->banish_pending && banish_safe(s)) banish(s);
    }

    //! Every product of every record that reads `s` is resident.
    static bool banish_safe(const storage* s) noexcept {
        for (const edge& e : s->consumers) {
            bool all_resident = true;
            e.op->for_each_product(
                [&](const storage& child) { all_resident &= child.is_resident; });
            if (!all_resident) return false;
        }
        return true;
    }

    void banish(storage* s) noexcept {
        // Every dependent is resident: free s for good. The dependents lose their recipe (it
        // reads s) and so can no longer be evicted; those without handles are banished in
        // turn once they are safe. s itself is freed when examined next: destroy_op() queues
        // it, without dependents.
        while (!s->consumers.empty()) {
            op* o = s->consumers.front().op;
            o->for_each_product([&](storage& child) {
                child.producer = nullptr;
                rt_.pool_.refresh(&child);
                if (child.unheld()) request_banish(&child);
            });
            for (std::uint32_t i = 0; i < o->n_outputs; ++i) o->out[i].storage = nullptr;
            for (std::uint32_t k = 0; k < o->n_versions; ++k) o->ver[k].storage = nullptr;
            o->live = 0;
            destroy_op(o);
        }
        ++rt_.counters_.banishments;
    }

    void destroy_storage(storage* s) noexcept {
        rt_.offload_.unawait(s);
        if (s->is_resident) rt_.memory_.free(s->ptr, s->bytes);
        rt_.offload_.release_host_copy(s);
        s->is_resident = false;
        rt_.pool_.refresh(s);
        rt_.hook_on_destroy(*s);
        rt_.graph_.storages.erase(rt_.graph_.storages.iterator_to(*s));
        if (op* o = s->producer) {
            for (std::uint32_t i = 0; i < o->n_outputs; ++i)
                if (o->out[i].storage == s) o->out[i].storage = nullptr;
            for (std::uint32_t k = 0; k < o->n_versions; ++k)
                if (o->ver[k].storage == s) o->ver[k].storage = nullptr;
            if (--o->live == 0) destroy_op(o);
        }
        ++rt_.counters_.storages_freed;
        delete s;
    }

    void destroy_op(op* o) noexcept {
        if constexpr (deferred_costs<Backend>) rt_.costs_.forget(o);
        for (std::uint32_t i = 0; i < o->n_inputs; ++i) {
            edge& e = o->in[i];
            if (!e.consumer_hook.is_linked()) continue;
            e.storage->consumers.erase(e.storage->consumers.iterator_to(e));
            enqueue(e.storage); // a freed dependent may make it garbage, or safe to banish
        }
        rt_.graph_.ops.erase(rt_.graph_.ops.iterator_to(*o));
        op::destroy(o); // may drop handles captured by the operator: deferred, we are busy
    }

    using base::rt_;
    std::vector<storage*> queue_;     //!< storages to examine (kept for its capacity)
    tensor_node* deferred_ = nullptr; //!< releases to handle when not busy
};

} // namespace dtr::detail
