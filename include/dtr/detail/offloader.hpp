// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Offload to the backend's host tier: copy a victim out instead of dropping it,
//! copy it back on use, let constants leave when nothing else can, and the clock's waits
//! for transfers in flight (runtime_options::offload).
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/counters.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/error.hpp>
#include <dtr/offload.hpp>
#include <dtr/options.hpp>
#include <dtr/step_forecast.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace dtr::detail {

//! @brief The runtime's side of a second memory tier.
//!
//! On a backend without dtr::offloading_backend every member is a no-op the compiler
//! removes, and under offload_policy::off none changes anything. The other collaborators
//! call in at a handful of places (docs/design.md, "Offload"): evictable_pool::evict
//! (offload_victim) and its score scan (score_factor), budgeted_memory when nothing
//! evictable is left (offload_fixed) and on success (wait_for_freed_memory), the
//! rematerializer (copy_back, wait_for), execution::run (wait_for_inputs), the end of
//! each call (copy_ahead), and the destruction of a storage or of the runtime, and
//! pin_for_write (release_host_copy).
//!
//! @tparam Rt the runtime: its backend, options, counters, clock, pool and memory.
template <class Rt, class Backend, class Meta>
class offloader : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::op;
    using typename base::storage;
    using pointer = typename Backend::pointer;

    explicit offloader(Rt& rt) noexcept : base(rt) {}

    //! @brief Called when `s` is evicted: copies it out (or keeps its clean host copy)
    //! instead of dropping it when the policy says so. A storage nobody holds (an eager
    //! eviction, `eager`, or a kept one while runtime::keeps_released: only a recomputation
    //! can read it again) leaves by transfer only with a clean host copy. Returns: whether
    //! `s` left the device that way (the caller then does not drop it).
    bool offload_victim(storage* s, bool eager) noexcept {
        if constexpr (offloading_backend<Backend>) {
            const bool unheld = eager || (rt_.keeps_released() && s->unheld());
            // The common case, inline: no host copy, and either a storage nobody holds or
            // offload off. Dropped.
            if (!s->host.valid() && (unheld || rt_.options_.offload == offload_policy::off))
                return false;
            return offload_or_drop(s, unheld, eager);
        } else {
            (void)s;
            (void)eager;
            return false;
        }
    }

    //! @brief After a first run: starts an out-copy ahead of eviction
    //! (runtime_options::offload_ahead) of a storage that has outlived `offload_ahead` newer
    //! ones, when resident bytes exceed half the budget and the backend's copy stream is
    //! idle: of the four storages next older than that, the largest worth a copy. A
    //! storage that young readers free soon after it is made would make its block wait for
    //! the copy; one that outlived as many newer storages is likely kept for later (a
    //! forward activation that backward reads). A failed copy is not an error: the storage
    //! stays as it was. Complexity: offload_ahead + 4 steps through the storage list.
    void copy_ahead() noexcept {
        if constexpr (copying_ahead_backend<Backend>) {
            const runtime_options& o = rt_.options_;
            if (o.offload_ahead == 0 || o.offload == offload_policy::off ||
                rt_.counters_.resident_bytes <= o.budget / 2 ||
                !rt_.backend_.copy_stream_idle(rt_.clock_))
                return;
            auto& list = rt_.graph_.storages; // in order of creation
            auto it = list.end();
            for (std::uint32_t newer = 0; newer < o.offload_ahead; ++newer) {
                if (it == list.begin()) return;
                --it;
            }
            storage* best = nullptr;
            for (int k = 0; k < 4 && it != list.begin(); ++k) {
                storage& s = *--it;
                if ((best == nullptr || s.bytes > best->bytes) && worth_copying_ahead(s)) best = &s;
            }
            if (best != nullptr) start_out_copy(best, true);
        }
    }

    //! @brief After a call, while the program follows a recorded step
    //! (runtime_options::prefetch_ahead): starts the copy-back of what the next
    //! prefetch_ahead calls of the step will wait for, soonest read first, at most
    //! prefetch_batch a call, each as runtime::prefetch would (room made only from kept
    //! storages; the backend's block at once or none):
    //! - the offloaded storages those calls read;
    //! - the offloaded ancestors of the dropped storages they read (evicted without a host
    //!   copy): the read recomputes the storage, and the recomputation copies them back
    //!   first. Found by a walk up through dropped storages, ancestor_visits input visits a
    //!   call in all.
    //! The first that finds no room ends the batch; it stays due, to be tried again after the
    //! next call while its read is still ahead. What copy_in throws leaves it offloaded, for
    //! the read to copy back (and report). Complexity: O(log n) in the maps, plus at most
    //! ancestor_visits visits, prefetch_batch prefetches and one that fails.
    void prefetch_by_forecast(const step_forecast& f) noexcept {
        if constexpr (offloading_backend<Backend>) {
            if (queued_.empty() && awaited_.empty()) return;
            const std::uint64_t first = f.read_stamp(0);
            const std::uint64_t last = f.read_stamp(rt_.options_.prefetch_ahead);
            // Candidates first, prefetches after: making room evicts kept storages, which may
            // change the maps (one offloaded as a victim joins the queue). Each candidate keeps
            // the key it was found by (the queued storage's, or that of the awaited storage
            // whose ancestor it is), to check before its prefetch that it still exists.
            struct entry {
                queue_key key;
                bool ancestor;
                storage* s;
            };
            std::array<entry, 2 * prefetch_batch> due{};
            std::size_t n = 0;
            for (auto it = queued_.lower_bound({first, 0});
                 it != queued_.end() && it->first.first <= last && n < prefetch_batch; ++it)
                due[n++] = {it->first, false, it->second};
            // The offloaded ancestors of the dropped storages read in the window, reached
            // through dropped ones (a resident one stops the walk: its own inputs are not
            // needed). Keyed by the awaited storage's read: they are needed just before it.
            std::size_t visits = 0;
            try { // the walk's vector may fail to grow: then fewer ancestors are due
                for (auto it = awaited_.lower_bound({first, 0});
                     it != awaited_.end() && it->first.first <= last && n < due.size() &&
                     visits < ancestor_visits;
                     ++it) {
                    walk_.clear();
                    walk_.push_back(it->second);
                    for (std::size_t h = 0; h < walk_.size() && visits < ancestor_visits; ++h) {
                        // An offloaded storage comes back by transfer: its inputs are not read.
                        const op* o = walk_[h]->offloaded() ? nullptr : walk_[h]->producer;
                        if (o == nullptr) continue;
                        for (std::uint32_t i = 0; i < o->n_inputs && visits < ancestor_visits;
                             ++i) {
                            storage* p = o->in[i].storage;
                            ++visits;
                            if (p->is_resident ||
                                std::find(walk_.begin(), walk_.end(), p) != walk_.end())
                                continue;
                            walk_.push_back(p);
                            if (p->offloaded() && n < due.size()) due[n++] = {it->first, true, p};
                        }
                    }
                }
            } catch (...) {}
            // In the order of the reads: one that finds no room stops the batch, so that a later
            // read does not take the room an earlier one waits for.
            std::stable_sort(due.begin(), due.begin() + static_cast<std::ptrdiff_t>(n),
                             [](const entry& a, const entry& b) { return a.key < b.key; });
            std::size_t started = 0;
            for (std::size_t k = 0; k < n && started < prefetch_batch; ++k) {
                // Still there: a queued storage is in the queue while offloaded, and an awaited
                // one keeps its ancestors alive (its recipe reads them, theirs read theirs).
                const auto& map = due[k].ancestor ? awaited_ : queued_;
                if (map.find(due[k].key) == map.end()) continue;
                storage* s = due[k].s;
                if (!s->offloaded() || s->bytes > rt_.options_.budget) continue;
                try {
                    if (!rt_.prefetch_storage(s)) return;
                    ++rt_.counters_.forecast_prefetches;
                    if (due[k].ancestor) ++rt_.counters_.forecast_recompute_prefetches;
                    ++started;
                } catch (...) { // copy_in failed: it stays offloaded; the read copies it back
                    return;
                }
            }
        } else {
            (void)f;
        }
    }

    //! Records dropped `s` (evicted without a host copy, with a recipe, still held by the
    //! program) whose next read the forecast knows, for prefetch_by_forecast to copy back its
    //! offloaded ancestors before that read recomputes it; a map that cannot grow leaves it
    //! out. Its stamp does not change while it is evicted (a read recomputes it first).
    void await_recompute(storage* s) noexcept {
        if constexpr (offloading_backend<Backend>) {
            if (rt_.options_.prefetch_ahead == 0 || s->producer == nullptr || s->released ||
                !step_forecast::is_read(s->use_stamp))
                return;
            try {
                awaited_.emplace(queue_key{s->use_stamp, s->sid}, s);
                s->awaited = true;
            } catch (...) {}
        } else {
            (void)s;
        }
    }
    //! Dropped storages waiting in the map of await_recompute (runtime::check_invariants).
    [[nodiscard]] std::size_t awaited_count() const noexcept { return awaited_.size(); }
    //! Takes `s` out of the awaited map, if it is in it (it is resident again, or destroyed).
    void unawait(storage* s) noexcept {
        if (!s->awaited) return;
        s->awaited = false;
        if (awaited_.erase(queue_key{s->use_stamp, s->sid}) != 0) return;
        // Unreachable while stamps stay put as above; exact even if they did not.
        for (auto it = awaited_.begin(); it != awaited_.end(); ++it)
            if (it->second == s) {
                awaited_.erase(it);
                return;
            }
    }

    //! @brief The fallback when nothing evictable is left: offloads the least recently used
    //! resident, unpinned storage without a recipe (a constant, or the child of a banished
    //! storage), not a constant that runtime_options::offload_constants and allow_offload
    //! keep on the device (runtime::offload_allowed). Returns: whether one left.
    bool offload_fixed() noexcept;

    //! @brief Copies an offloaded storage back into a new block under the budget (a
    //! "restore" by transfer). Throws: dtr::out_of_memory (nothing changed) when no block
    //! can be had; what the backend's copy_in throws (the block is given back).
    void copy_back(storage* s) { fill_from_host(s, rt_.memory_.allocate(s->bytes, s)); }

    //! @brief For a hint: copies `s` back only if the budget has room for it and the backend
    //! gives a block at once, evicting nothing. Returns: whether the copy-back started.
    //! Throws: what the backend's copy_in throws (the block is given back).
    bool try_copy_back(storage* s) {
        const pointer p = rt_.memory_.try_allocate(*s);
        if (p == pointer{}) return false;
        fill_from_host(s, p);
        return true;
    }

    //! @brief Returns: whether victims' scores are multiplied by score_factor() (offload on,
    //! on a backend with a tier); false lets a scan skip the factor.
    [[nodiscard]] bool factors_scores() const noexcept {
        if constexpr (offloading_backend<Backend>)
            return rt_.options_.offload != offload_policy::off;
        else
            return false;
    }

    //! @brief The factor a victim's score is multiplied by: the cheaper of recomputing and
    //! transferring, relative to recomputing (1 when offload is off).
    [[nodiscard]] double score_factor(const storage& s) const noexcept {
        if constexpr (offloading_backend<Backend>) {
            if (rt_.options_.offload == offload_policy::off) return 1.0;
            return offload_score_factor(rt_.backend_, rt_.options_.offload, s.view(),
                                        s.host.valid(), rt_.options_.copy_back_charge);
        } else {
            (void)s;
            return 1.0;
        }
    }

    //! @brief Advances the clock until every input of `o` has landed from a copy-back.
    void wait_for_inputs(const op& o) noexcept {
        if constexpr (offloading_backend<Backend>) {
            cost_t t = 0;
            for (std::uint32_t i = 0; i < o.n_inputs; ++i)
                t = std::max(t, o.in[i].storage->host.ready_at());
            stall_until(t, &counters::copy_back_stall);
        } else {
            (void)o;
        }
    }
    //! @brief Advances the clock until `s` has landed from a copy-back.
    void wait_for(const storage* s) noexcept {
        if constexpr (offloading_backend<Backend>)
            stall_until(s->host.ready_at(), &counters::copy_back_stall);
        else
            (void)s;
    }
    //! @brief Advances the clock until the blocks freed by out-copies may be reused.
    void wait_for_freed_memory() noexcept {
        if constexpr (offloading_backend<Backend>)
            stall_until(freed_memory_at_, &counters::block_reuse_stall);
    }
    //! @brief Frees the host copy of `s`, if any (its bytes are about to change, or it is
    //! destroyed).
    void release_host_copy(storage* s) noexcept;

private:
    //! Advances the clock to `t`, charging the wait to transfer_stall and to `kind`, the
    //! half of it that says what was waited for.
    void stall_until(cost_t t, cost_t counters::*kind) noexcept {
        if (t <= rt_.clock_) return;
        rt_.counters_.transfer_stall += t - rt_.clock_;
        rt_.counters_.*kind += t - rt_.clock_;
        rt_.clock_ = t;
    }
    //! offload_victim past its inline test.
    bool offload_or_drop(storage* s, bool unheld, bool eager) noexcept;
    //! Starts the out-copy of resident `s` into a new host copy; false if the tier refused.
    //! `ahead`: `s` stays on the device (runtime_options::offload_ahead).
    bool start_out_copy(storage* s, bool ahead = false) noexcept;
    //! Whether resident `s` should get a host copy ahead of eviction: it is recomputable,
    //! held (a storage nobody holds is dropped when evicted: offload_victim), has none, fits
    //! the tier, and (under `automatic`) offload_decision would let it leave with the copy
    //! (its charged copy-back cheaper than recomputing it). Used by copy_ahead() only, so
    //! instantiated only on backends with the capability.
    [[nodiscard]] bool worth_copying_ahead(const storage& s) const noexcept {
        if (!s.is_resident || s.host.valid() || !s.rematerializable() || s.bytes == 0 || s.unheld())
            return false;
        if (!rt_.backend_.host_room(s.bytes)) return false;
        return leaves_by_transfer(s, true);
    }
    //! dtr::offload_decision for `s` under this runtime's offload policy and
    //! copy_back_charge: whether it should leave by transfer, with a host copy already
    //! (`has_copy`) or by a new out-copy. The one place the options reach the decision.
    [[nodiscard]] bool leaves_by_transfer(const storage& s, bool has_copy) const noexcept {
        return offload_decision(rt_.backend_, rt_.options_.offload, s.view(), has_copy,
                                rt_.options_.copy_back_charge);
    }
    //! Frees the device block of `s`, which has a valid host copy (now offloaded).
    void leave_device(storage* s) noexcept;
    //! Copies offloaded `s` back into block `p`, taken for it under the budget; gives `p`
    //! back and rethrows when the copy fails.
    void fill_from_host(storage* s, pointer p);
    //! The device block of `s`, which has a valid host copy, is about to be freed: its
    //! reuse waits until the out-copy has read it (on the clock, and on the backend).
    void source_freed(storage* s) noexcept {
        if constexpr (offloading_backend<Backend>) {
            freed_memory_at_ = std::max(freed_memory_at_, s->host.read_done_at());
            if constexpr (copying_ahead_backend<Backend>)
                rt_.backend_.fence_host_copy(std::as_const(s->host.copy()));
        } else {
            (void)s;
        }
    }

    //! Queues offloaded `s` for prefetch_by_forecast when it has a forecast read (and
    //! prefetch_ahead is on); a queue that cannot grow leaves it out (the read copies it back).
    void queue_for_prefetch(storage* s) noexcept {
        if constexpr (offloading_backend<Backend>) {
            if (rt_.options_.prefetch_ahead == 0 || !step_forecast::is_read(s->use_stamp)) return;
            try {
                queued_.emplace(queue_key{s->use_stamp, s->sid}, s);
                s->host.set_queued_read(s->use_stamp);
            } catch (...) {}
        } else {
            (void)s;
        }
    }
    //! Takes `s` out of the prefetch queue, if it is in it (it came back, or is dropped).
    void unqueue(storage* s) noexcept {
        if constexpr (offloading_backend<Backend>) {
            const std::uint64_t stamp = s->host.queued_read();
            if (stamp == 0) return;
            queued_.erase(queue_key{stamp, s->sid});
            s->host.set_queued_read(0);
        } else {
            (void)s;
        }
    }

    //! Prefetches prefetch_by_forecast starts at most after one call: a bound on its work.
    static constexpr std::size_t prefetch_batch = 16;
    //! Recipe inputs prefetch_by_forecast visits at most after one call, looking for the
    //! offloaded ancestors of dropped storages: a bound on its work.
    static constexpr std::size_t ancestor_visits = 128;
    //! A queued storage's forecast read (its next_use() stamp) and its id.
    using queue_key = std::pair<std::uint64_t, std::uint64_t>;

    using base::rt_;
    cost_t freed_memory_at_ = 0; //!< when the last out-copy releases its device block
    //! Offloaded storages with a forecast read, by that read (runtime_options::prefetch_ahead):
    //! a storage's stamp does not change while it is offloaded (a read copies it back first).
    std::map<queue_key, storage*> queued_;
    //! Dropped storages with a forecast read, by that read (storage_record::awaited).
    std::map<queue_key, storage*> awaited_;
    std::vector<storage*> walk_; //!< the ancestor walk's storages, kept for its capacity
};

template <class Rt, class Backend, class Meta>
void offloader<Rt, Backend, Meta>::release_host_copy(storage* s) noexcept {
    if constexpr (offloading_backend<Backend>) {
        if (!s->host.valid()) return;
        unqueue(s);
        if (s->is_resident) source_freed(s); // destroyed: its block is freed with the copy
        rt_.backend_.free_host(s->host.copy(), s->bytes);
        s->host.set_valid(false);
        rt_.counters_.host_bytes -= std::min(rt_.counters_.host_bytes, s->bytes);
    } else {
        (void)s;
    }
}

template <class Rt, class Backend, class Meta>
bool offloader<Rt, Backend, Meta>::start_out_copy(storage* s, bool ahead) noexcept {
    if constexpr (offloading_backend<Backend>) {
        counters& stats = rt_.counters_;
        try {
            typename Backend::host_copy& slot = s->host.copy(); // may allocate: inside the try
            copy_out_result<typename Backend::host_copy> r{};
            if constexpr (copying_ahead_backend<Backend>) {
                r = ahead ? rt_.backend_.copy_out_ahead(s->ptr, s->bytes, rt_.clock_)
                          : rt_.backend_.copy_out(s->ptr, s->bytes, rt_.clock_);
            } else {
                r = rt_.backend_.copy_out(s->ptr, s->bytes, rt_.clock_);
            }
            slot = std::move(r.copy);
            s->host.set_read_done_at(r.reusable_at);
            // A victim's block is reused as soon as it is free; an ahead copy's only when the
            // storage leaves the device (leave_device) or is destroyed (release_host_copy).
            if (!ahead) freed_memory_at_ = std::max(freed_memory_at_, r.reusable_at);
        } catch (...) {
            return false; // the tier could not take it
        }
        s->host.set_valid(true);
        if (ahead) {
            ++stats.copies_ahead;
        } else {
            ++stats.offloads;
        }
        stats.bytes_offloaded += s->bytes;
        stats.transfer_cost += rt_.backend_.transfer_cost(s->bytes);
        stats.host_bytes += s->bytes;
        stats.peak_host_bytes = std::max(stats.peak_host_bytes, stats.host_bytes);
        return true;
    } else {
        (void)s;
        return false;
    }
}

template <class Rt, class Backend, class Meta>
void offloader<Rt, Backend, Meta>::leave_device(storage* s) noexcept {
    if (s->is_constant || s->producer == nullptr) ++rt_.counters_.constant_offloads;
    source_freed(s);
    // Heuristics see no eviction: an offloaded storage comes back by transfer, so to them it
    // stays resident (storage_node::resident()); only the pool loses it.
    rt_.memory_.free(s->ptr, s->bytes);
    s->ptr = pointer{};
    s->is_resident = false;
    rt_.pool_.refresh(s);
    queue_for_prefetch(s);
}

template <class Rt, class Backend, class Meta>
bool offloader<Rt, Backend, Meta>::offload_or_drop(storage* s, bool unheld, bool eager) noexcept {
    if constexpr (offloading_backend<Backend>) {
        // A storage with a clean host copy (copied ahead or back earlier: storages are
        // immutable, so the copy is still right) needs no out-copy, and leaves when its
        // charged copy-back beats recomputing it; without one, the out-copy is charged too.
        if (!s->host.valid()) {
            if (unheld || !leaves_by_transfer(*s, false)) return false;
            if (!start_out_copy(s)) return false; // dropped as without offload
        } else if (!unheld && !leaves_by_transfer(*s, true)) {
            // Dropping it keeps the policy's choice; the copy is freed with the device block.
            release_host_copy(s);
            return false;
        } else if (unheld) {
            ++(eager ? rt_.counters_.eager_evictions : rt_.counters_.evictions);
        } else {
            ++rt_.counters_.offloads_clean;
        }
        leave_device(s);
        return true;
    } else {
        (void)s;
        (void)unheld;
        (void)eager;
        return false;
    }
}

template <class Rt, class Backend, class Meta>
bool offloader<Rt, Backend, Meta>::offload_fixed() noexcept {
    if constexpr (offloading_backend<Backend>) {
        if (rt_.options_.offload == offload_policy::off || !rt_.backend_.has_host_tier())
            return false;
        // The least recently used resident storage nothing can evict: unpinned, without a
        // recipe (constants, and the children of banished storages), not being written.
        storage* best = nullptr;
        for (storage& s : rt_.graph_.storages) {
            if (!s.is_resident || s.producer != nullptr || s.pins != 0) continue;
            // A constant may share its bytes with the framework (offload_constants); a
            // banished storage's child is the runtime's own.
            if (s.is_constant && !rt_.options_.offload_constants && !s.may_offload) continue;
            if (!s.host.valid() && !rt_.backend_.host_room(s.bytes)) continue;
            if (best == nullptr || s.accessed < best->accessed) best = &s;
        }
        if (best == nullptr) return false;
        if (best->host.valid())
            ++rt_.counters_.offloads_clean;
        else if (!start_out_copy(best))
            return false;
        leave_device(best);
        return true;
    } else {
        return false;
    }
}

template <class Rt, class Backend, class Meta>
void offloader<Rt, Backend, Meta>::fill_from_host(storage* s, pointer p) {
    if constexpr (offloading_backend<Backend>) {
        cost_t done = rt_.clock_;
        try {
            done = rt_.backend_.copy_in(p, std::as_const(s->host.copy()), s->bytes, rt_.clock_);
        } catch (...) {
            rt_.memory_.free(p, s->bytes);
            throw;
        }
        s->ptr = p;
        s->is_resident = true;
        s->host.set_ready_at(done);
        unqueue(s);
        counters& stats = rt_.counters_;
        ++stats.copy_backs;
        stats.bytes_copied_back += s->bytes;
        stats.transfer_cost += rt_.backend_.transfer_cost(s->bytes);
        rt_.pool_.refresh(s);
        if (!rt_.backend_.transfers_overlap()) stall_until(done, &counters::copy_back_stall);
    } else {
        rt_.memory_.free(p, s->bytes);
        throw logic_error("dtr: internal error: copy_back on a backend without a host tier");
    }
}

} // namespace dtr::detail
