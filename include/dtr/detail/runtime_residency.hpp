// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Out-of-line members of dtr::runtime: rematerialization (the explicit work stack), the evictable pool, allocation under the budget, victim choice and deferred costs. Included by <dtr/runtime.hpp> only.
#pragma once

#include <dtr/runtime.hpp>

#include <algorithm>
#include <sstream>

namespace dtr {

// =====================================================================================
// residency: pins and rematerialization
// =====================================================================================

template <class B, class H>
void runtime<B, H>::touch_inputs(op_t& op) {
    for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
        storage_t* s = op.in[i].storage;
        s->accessed = clock_;
        hook_on_access(*s);
    }
}

template <class B, class H>
void runtime<B, H>::unpin_inputs(op_t& op) noexcept {
    for (std::uint32_t i = 0; i < op.n_inputs; ++i) {
        edge_t& e = op.in[i];
        if (!e.pinned) continue;
        e.pinned = false;
        unpin(e.storage);
    }
}

template <class B, class H>
void runtime<B, H>::secure_inputs(op_t& root) {
    // Pins every input of `root`, rematerializing the evicted ones. A work stack replaces
    // recursion so that a chain of a million evicted storages needs no deep C++ stack.
    //
    // Each frame first pins the inputs already resident (they cannot be lost while the
    // others are recomputed), then restores the evicted ones in order, pinning each as it
    // becomes resident: the DTR simulator's order, so replays make the same choices. Under
    // restore_pins::yield_when_full, frames below the top give their pins up when an
    // allocation finds nothing else to evict (yield_frame_pins); such a frame re-validates
    // when it is on top again, restoring what it lost.
    frames_.clear();
    frames_.push_back({&root, 0, false});
    try {
        for (;;) {
            frame& f = frames_.back();
            op_t* op = f.op;
            if (f.yielded) { // its pins were given up while frames above it ran
                f.yielded = false;
                f.started = false;
                f.next_input = 0;
            }
            if (!f.started) {
                f.started = true;
                for (std::uint32_t i = 0; i < op->n_inputs; ++i) {
                    edge_t& e = op->in[i];
                    if (!e.pinned && e.storage->is_resident) {
                        pin(e.storage);
                        e.pinned = true;
                    }
                }
            }
            while (f.next_input < op->n_inputs && op->in[f.next_input].pinned) ++f.next_input;
            if (f.next_input < op->n_inputs) {
                edge_t& e = op->in[f.next_input];
                if (e.storage->is_resident) { // restored meanwhile, e.g. as a sibling
                    pin(e.storage);
                    e.pinned = true;
                } else {
                    op_t* producer = e.storage->producer;
                    if (producer == nullptr)
                        throw logic_error("dtr: internal error: storage #" + std::to_string(e.storage->sid) +
                                          " is evicted without a recipe");
                    touch_inputs(*producer);
                    frames_.push_back({producer, 0, false}); // invalidates f
                }
                continue;
            }
            if (op == &root) break; // the caller runs it
            rematerialize(*op);
            frames_.pop_back();
        }
    } catch (...) {
        for (const frame& f : frames_) unpin_inputs(*f.op);
        frames_.clear();
        throw;
    }
    frames_.clear();
}

template <class B, class H>
bool runtime<B, H>::yield_frame_pins() noexcept {
    // Only frames below the top: the top one's inputs are those of the operator being
    // recomputed. A frame yields at most max_yields times, so a restore that cannot fit
    // ends in out_of_memory instead of going round for ever.
    if (options_.restore != restore_pins::yield_when_full || frames_.size() < 2) return false;
    constexpr std::uint8_t max_yields = 2;
    bool released = false;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
        frame& f = frames_[i];
        if (f.yields >= max_yields) continue;
        bool had_pins = false;
        for (std::uint32_t k = 0; k < f.op->n_inputs && !had_pins; ++k) had_pins = f.op->in[k].pinned;
        if (!had_pins) continue;
        unpin_inputs(*f.op);
        f.yielded = true;
        ++f.yields;
        released = true;
    }
    if (released) ++counters_.pin_yields;
    return released;
}

template <class B, class H>
void runtime<B, H>::rematerialize(op_t& op) {
    try {
        run(op, true, std::nullopt);
    } catch (...) {
        unpin_inputs(op);
        throw;
    }
    unpin_inputs(op);
    // A recomputed dependent may make a pending banishment safe.
    for (std::uint32_t i = 0; i < op.n_inputs; ++i)
        if (op.in[i].storage->banish_pending) enqueue(op.in[i].storage);
}

template <class B, class H>
void runtime<B, H>::make_resident(storage_t* target) {
    if (target->is_resident) return;
    if (target->producer == nullptr) // only storages with a recipe are ever evicted
        throw logic_error("dtr: internal error: storage #" + std::to_string(target->sid) +
                          " is evicted without a recipe");
    op_t& op = *target->producer;
    touch_inputs(op);
    secure_inputs(op);
    rematerialize(op);
}

template <class B, class H>
void runtime<B, H>::refresh_pool(storage_t* s) noexcept {
    const bool wanted = s->evictable();
    const bool member = s->pool_hook.is_linked();
    if (wanted && !member) {
        pool_.push_back(*s);
        hook_on_pool_insert(*s);
    } else if (!wanted && member) {
        pool_.erase(pool_.iterator_to(*s));
        hook_on_pool_erase(*s);
    }
}

// =====================================================================================
// memory and eviction
// =====================================================================================

template <class B, class H>
auto runtime<B, H>::allocate(std::size_t bytes) -> pointer {
    if (bytes > options_.budget) throw_out_of_memory(bytes, false);
    bool system_refused = false;
    bool refused = false; // the backend refused this request once already
    while (bytes > options_.budget - counters_.resident_bytes) {
        storage_t* victim = choose_victim();
        if (victim == nullptr) {
            if (yield_frame_pins()) continue; // a restore's lower frames let go: try again
            throw_out_of_memory(bytes, false);
        }
        evict_storage(victim, false);
    }
    for (;;) {
        pointer p{};
        try {
            // Outside an operator's run, the only allocations are constants'.
            if constexpr (requires { backend_.allocate(bytes, arena::placement::high); }) {
                const bool high = options_.placement == placement_policy::constants_high && exec_op_ == nullptr;
                p = backend_.allocate(bytes, high ? arena::placement::high : arena::placement::best_fit);
            } else {
                p = backend_.allocate(bytes);
            }
        } catch (const out_of_memory&) {
            throw;
        } catch (const std::bad_alloc&) {
            // The system allocator behind the backend failed (a host backend under an
            // unlimited budget): a refusal like any other, explained as ours.
            system_refused = true;
        }
        if (p != pointer{}) {
            counters_.resident_bytes += bytes;
            counters_.peak_resident_bytes = std::max(counters_.peak_resident_bytes, counters_.resident_bytes);
            ++counters_.allocations;
            counters_.bytes_allocated += bytes;
            return p;
        }
        // The budget allows it but the backend has no block (fragmentation, or a capacity
        // below the budget). On a backend that describes its region, evict the cheapest
        // window of neighbours that frees a block; otherwise (or under one_by_one) keep
        // evicting in heuristic order and retry.
        if (!refused) {
            refused = true;
            ++counters_.fragmented_allocations;
        }
        if (!system_refused) {
            const window_outcome w = evict_window(bytes);
            if (w == window_outcome::none) {
                if (yield_frame_pins()) continue;
                throw_out_of_memory(bytes, true);
            }
            if (w == window_outcome::evicted) {
                ++counters_.allocation_retries;
                continue;
            }
        }
        storage_t* victim = choose_victim();
        if (victim == nullptr) {
            if (yield_frame_pins()) continue;
            throw_out_of_memory(bytes, true, system_refused);
        }
        ++counters_.allocation_retries;
        evict_storage(victim, false);
    }
}

template <class B, class H>
auto runtime<B, H>::evict_window(std::size_t bytes) -> window_outcome {
    if constexpr (reports_layout<B>) {
        if (options_.fragmentation != fragmentation_policy::window || !backend_.has_layout())
            return window_outcome::unavailable;
        // Scores read costs: fold in every measurement that has finished (never waits).
        if constexpr (deferred_costs<B>) collect_costs(cost_collection::ready);
        const auto start = std::chrono::steady_clock::now();
        const std::size_t a = std::max<std::size_t>(backend_.layout_alignment(), 1);
        if (bytes > std::numeric_limits<std::size_t>::max() - a) return window_outcome::none;
        const std::size_t need = bytes == 0 ? a : (bytes + a - 1) / a * a;
        // Only pool members may go; every other live block (pinned, constant, without a
        // recipe, a buffer of the running operator) is a wall. The pool is small next to
        // the region's blocks, so it is sorted by address here rather than indexed always.
        window_candidates_.clear();
        for (storage_t& s : pool_) window_candidates_.emplace_back(backend_.region_offset(s.ptr), &s);
        std::sort(window_candidates_.begin(), window_candidates_.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        window_blocks_.clear();
        window_owners_.clear();
        const heuristic_context ctx = hctx();
        std::size_t next = 0;
        backend_.for_each_block([&](std::size_t offset, std::size_t size, bool is_free) {
            window_block b{offset, size, is_free ? window_block::kind::free : window_block::kind::fixed, 0};
            storage_t* owner = nullptr;
            if (!is_free) {
                while (next < window_candidates_.size() && window_candidates_[next].first < offset) ++next;
                if (next < window_candidates_.size() && window_candidates_[next].first == offset) {
                    owner = window_candidates_[next].second;
                    b.what = window_block::kind::evictable;
                    // A policy that only chooses (random) has no scores: every byte then
                    // costs alike, and the window evicting the fewest bytes wins.
                    if constexpr (scoring_heuristic<H>)
                        b.score = static_cast<double>(heuristic_.score(*owner, ctx));
                    else
                        b.score = 1.0;
                    // A block's cost is its score times its bytes. The policies' scores are
                    // per byte (DTR's h = cost / (memory x staleness)): right for ranking
                    // single victims by what they free, but a window frees a span fixed by
                    // the request, so its members are compared by what evicting them costs.
                    // Measured on the paper's logs (docs/results.md), plain sums of scores
                    // finished fewer budgets than one-by-one eviction; weighted sums more.
                    b.score *= static_cast<double>(size);
                    ++counters_.heuristic_evaluations;
                }
            }
            window_blocks_.push_back(b);
            window_owners_.push_back(owner);
        });
        const std::optional<window_choice> w = cheapest_window(window_blocks_, need);
        ++counters_.victim_searches;
        counters_.victim_search_ns += static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                .count());
        if (!w) return window_outcome::none;
        // A window of holes alone would mean the allocator refused a block it has: never
        // loop on it; let the one-by-one path decide.
        if (w->evictions == 0) return window_outcome::unavailable;
        for (std::size_t i = w->first; i < w->last; ++i) {
            if (window_owners_[i] == nullptr) continue;
            evict_storage(window_owners_[i], false);
            ++counters_.window_evictions;
        }
        return window_outcome::evicted;
    } else {
        (void)bytes;
        return window_outcome::unavailable;
    }
}

template <class B, class H>
void runtime<B, H>::free_memory(pointer p, std::size_t bytes) noexcept {
    backend_.deallocate(p, bytes);
    counters_.resident_bytes -= bytes;
}

template <class B, class H>
auto runtime<B, H>::choose_victim() -> storage_t* {
    if (pool_.empty()) return nullptr;
    // Scores read costs: fold in every measurement that has finished (never waits).
    if constexpr (deferred_costs<B>) collect_costs(cost_collection::ready);
    const auto start = std::chrono::steady_clock::now();
    const heuristic_context ctx = hctx();
    storage_t* best = nullptr;
    if constexpr (choosing_heuristic<H, pool_list>) {
        best = heuristic_.choose(pool_, ctx);
    } else {
        static_assert(scoring_heuristic<H>,
                      "dtr::runtime: the heuristic has neither score(storage, context) nor a "
                      "choose(pool, context) returning a pointer to a pool member "
                      "(runtime::storage_type*); see dtr/concepts.hpp");
        double best_score = std::numeric_limits<double>::infinity();
        for (storage_t& s : pool_) {
            const double score = static_cast<double>(heuristic_.score(s, ctx));
            ++counters_.heuristic_evaluations;
            // Last lowest wins and a zero score ends the scan: the DTR simulator's rule, so
            // that replays make the same choices.
            if (score <= best_score) {
                best_score = score;
                best = &s;
            }
            if (score == 0) break;
        }
        if (best == nullptr) best = &pool_.back(); // every score was NaN
    }
    ++counters_.victim_searches;
    counters_.victim_search_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
    return best;
}

template <class B, class H>
void runtime<B, H>::evict_storage(storage_t* s, bool eager) noexcept {
    free_memory(s->ptr, s->bytes);
    s->ptr = pointer{};
    s->is_resident = false;
    refresh_pool(s);
    hook_on_evict(*s);
    ++(eager ? counters_.eager_evictions : counters_.evictions);
}

template <class B, class H>
void runtime<B, H>::throw_out_of_memory(std::size_t bytes, bool backend_refused,
                                         bool system_refused) const {
    out_of_memory::details d;
    d.requested = bytes;
    d.budget = options_.budget;
    d.resident = counters_.resident_bytes;
    std::size_t constants = 0, unrecipied = 0, pinned = 0;
    for (const storage_t& s : all_storages_) {
        if (!s.is_resident || s.evictable()) continue;
        d.pinned += s.bytes;
        ++d.pinned_storages;
        if (s.pins > 0)
            pinned += s.bytes;
        else if (s.is_constant)
            constants += s.bytes;
        else
            unrecipied += s.bytes;
    }
    // Buffers of the operator being run are resident but belong to no storage yet.
    const std::size_t in_flight = d.resident - std::min(d.resident, [&] {
                                      std::size_t sum = 0;
                                      for (const storage_t& s : all_storages_)
                                          if (s.is_resident) sum += s.bytes;
                                      return sum;
                                  }());
    std::ostringstream msg;
    msg << "dtr: out of memory: cannot allocate " << bytes << " bytes";
    if (exec_op_ != nullptr)
        msg << " for operator #" << exec_op_->id << (exec_remat_ ? " (rematerializing it)" : "");
    msg << " under a budget of " << d.budget << " bytes; " << d.resident << " bytes resident, of which "
        << d.pinned << " bytes in " << d.pinned_storages << " storages cannot be evicted (pinned: "
        << pinned << ", constants: " << constants << ", without a recipe: " << unrecipied
        << ") and " << in_flight << " bytes are buffers of the running operator";
    if (system_refused)
        msg << "; the budget allows it but the system allocator behind the backend failed "
               "(std::bad_alloc) even with everything evictable evicted";
    else if (backend_refused)
        msg << "; the budget allows it but the backend has no block of that size";
    else
        msg << "; nothing evictable is left";
    if constexpr (reports_memory<B>) {
        // Tell fragmentation (free bytes enough, no block large enough) from exhaustion.
        if (const std::optional<memory_report> m = backend_.memory_info()) {
            d.largest_free = m->largest_free;
            d.free_total = m->free;
            const auto old_precision = msg.precision(3);
            msg << "; backend region of " << m->capacity << " bytes: " << m->free << " bytes free in "
                << m->free_blocks << (m->free_blocks == 1 ? " block" : " blocks")
                << ", largest free block " << m->largest_free << " bytes, fragmentation "
                << 100.0 * m->fragmentation() << "%";
            msg.precision(old_precision);
            // The region rounds requests up to its alignment (a zero-byte one takes a unit).
            const std::size_t a = std::max<std::size_t>(m->alignment, 1);
            const std::size_t need = bytes == 0 ? a : bytes + (a - bytes % a) % a;
            if (backend_refused && need >= bytes && m->free >= need)
                msg << " (the free bytes would hold the " << need
                    << " bytes needed, but no contiguous block does: fragmentation)";
        }
    }
    throw out_of_memory(msg.str(), d);
}

template <class B, class H>
void runtime<B, H>::set_budget(std::size_t bytes) {
    DTR_EXPECTS(!in_operator_, "set_budget() called from inside an operator");
    busy_scope busy(*this);
    // Evict first and change the budget last: any failure on the way keeps the old one.
    while (counters_.resident_bytes > bytes) {
        storage_t* victim = choose_victim();
        if (victim == nullptr) {
            out_of_memory::details d{};
            d.requested = counters_.resident_bytes - bytes; // the excess that could not be freed
            d.budget = bytes;
            d.resident = counters_.resident_bytes;
            throw out_of_memory("dtr: out of memory: cannot lower the budget to " + std::to_string(bytes) +
                                    " bytes: " + std::to_string(counters_.resident_bytes) +
                                    " bytes resident and nothing evictable is left (budget kept at " +
                                    std::to_string(options_.budget) + ")",
                                d);
        }
        evict_storage(victim, false);
    }
    options_.budget = bytes;
    remat_allowance_start_ = counters_.remat_cost;
}

template <class B, class H>
void runtime<B, H>::set_remat_limit(cost_t limit) {
    DTR_EXPECTS(!in_operator_, "set_remat_limit() called from inside an operator");
    DTR_EXPECTS(limit >= 0, "set_remat_limit: the limit must be a non-negative number of ns");
    options_.remat_limit = limit;
    remat_allowance_start_ = counters_.remat_cost;
}

// =====================================================================================
// deferred costs
// =====================================================================================

template <class B, class H>
void runtime<B, H>::settle_costs() {
    DTR_EXPECTS(!in_operator_, "settle_costs() called from inside an operator");
    if constexpr (deferred_costs<B>) collect_costs(cost_collection::wait);
}

template <class B, class H>
void runtime<B, H>::collect_costs(cost_collection mode) {
    if constexpr (deferred_costs<B>) {
        backend_.collect_costs([this](cost_t actual) noexcept { apply_cost(actual); }, mode);
        // Drop the entries handed over; in steady state some are always in flight, so
        // waiting for the queue to empty would let it grow without bound.
        if (pending_head_ == pending_costs_.size()) {
            pending_costs_.clear();
            pending_head_ = 0;
        } else if (pending_head_ >= 64 && 2 * pending_head_ >= pending_costs_.size()) {
            pending_costs_.erase(pending_costs_.begin(),
                                 pending_costs_.begin() + static_cast<std::ptrdiff_t>(pending_head_));
            pending_head_ = 0;
        }
    }
}

template <class B, class H>
void runtime<B, H>::apply_cost(cost_t actual) noexcept {
    // More results than executions would break the protocol; never pair them with nothing.
    if (pending_head_ == pending_costs_.size()) return;
    const pending_cost p = pending_costs_[pending_head_++];
    if (!p.apply) return;
    const cost_t delta = actual - p.provisional;
    // Staleness is measured on the clock: a clock running backwards would make storages
    // used since look used in the future. An overestimate is kept on the clock only.
    if (delta > 0) clock_ += delta;
    (p.remat ? counters_.remat_cost : counters_.compute_cost) += delta;
    if (p.op == nullptr) return;
    p.op->cost += delta;
    p.op->for_each_product([&](storage_t& s) {
        // A heuristic that indexes the pool by cost sees the change as the storage leaving
        // and rejoining it, as when its pins change.
        const bool member = s.pool_hook.is_linked();
        if (member) hook_on_pool_erase(s);
        s.compute_cost += delta;
        if (member) hook_on_pool_insert(s);
    });
}

} // namespace dtr
