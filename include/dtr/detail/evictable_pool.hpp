// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The evictable pool and victim choice: which storages may go, which one goes
//! next (the heuristic's scan or its own choose), the fragmentation-aware window, and the
//! eviction of a victim itself.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/offload.hpp>
#include <dtr/options.hpp>
#include <dtr/search/detail/forwarding.hpp>

#include <boost/intrusive/list.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace dtr::detail {

//! The pool as heuristics see it: a list of storage_node (accessors only).
template <class Backend, class Meta>
using pool_list = bi::list<storage_node<Backend, Meta>,
                           bi::member_hook<storage_node<Backend, Meta>, list_hook,
                                           &storage_record<Backend, Meta>::pool_hook>,
                           bi::constant_time_size<true>, bi::size_type<std::size_t>>;

//! What evict_window() did.
enum class window_outcome : std::uint8_t {
    evicted,     //!< evicted a window: the retry gets a block
    none,        //!< no window spans the request: evicting more cannot help
    unavailable, //!< the backend has no layout, or the policy is one_by_one
};

//! @brief The storages that are resident, rematerializable and unpinned, kept exactly so
//! (refresh() after every change of those three properties), and the choice among them.
//!
//! @tparam Rt the runtime: its backend, heuristic, options, counters and hooks.
template <class Rt, class Backend, class Meta>
class evictable_pool : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::storage;
    using list_type = pool_list<Backend, Meta>;

    explicit evictable_pool(Rt& rt) noexcept : base(rt) {}

    [[nodiscard]] std::size_t size() const noexcept { return pool_.size(); }
    [[nodiscard]] static bool contains(const storage& s) noexcept {
        return s.pool_hook.is_linked();
    }
    void clear() noexcept { pool_.clear(); }

    //! @brief Puts `s` in or takes it out of the pool as its evictability says, telling
    //! the heuristic (on_pool_insert / on_pool_erase).
    void refresh(storage* s) noexcept {
        const bool wanted = s->evictable();
        const bool member = contains(*s);
        if (wanted && !member) {
            if (kept_lead() && s->released)
                pool_.push_front(*s);
            else
                pool_.push_back(*s);
            rt_.hook_on_pool_insert(*s);
        } else if (!wanted && member) {
            pool_.erase(pool_.iterator_to(*s));
            rt_.hook_on_pool_erase(*s);
        }
    }

    //! @brief `s` lost its last handle (release_queue::on_last_handle): a member moves to
    //! the members nobody holds (see kept_lead).
    void on_unheld(storage* s) noexcept {
        s->released = true;
        if (kept_lead() && contains(*s)) pool_.splice(pool_.begin(), pool_, pool_.iterator_to(*s));
    }

    //! @brief Whether the members nobody holds lead the pool, before every held one (see
    //! kept_lead); for runtime::check_invariants.
    [[nodiscard]] bool kept_lead_the_pool() const noexcept {
        if (!kept_lead()) return true;
        bool held_seen = false;
        for (const auto& node : pool_) {
            const bool kept = static_cast<const storage&>(node).released;
            if (kept && held_seen) return false;
            held_seen = held_seen || !kept;
        }
        return true;
    }

    //! @brief Evicts `s` (a pool member): frees its bytes, keeps its recipe. Counted as an
    //! eager eviction when its last handle went (`eager`), else as a victim's.
    void evict(storage* s, bool eager) noexcept {
        if (rt_.offload_.offload_victim(s, eager)) return; // copied out to the host tier instead
        drop(s, eager);
    }

    //! @brief Evicts `s` by dropping its bytes, whatever the offload policy would choose (a
    //! host copy it has is released with them).
    void drop(storage* s, bool eager) noexcept {
        rt_.offload_.release_host_copy(s);
        rt_.memory_.free(s->ptr, s->bytes);
        s->ptr = typename Backend::pointer{};
        s->is_resident = false;
        refresh(s);
        rt_.hook_on_evict(*s);
        ++(eager ? rt_.counters_.eager_evictions : rt_.counters_.evictions);
        rt_.offload_.await_recompute(s);
    }

    //! @brief Frees at least `bytes` by evicting only members nobody holds (kept after
    //! their last release), the policy's choice among them, or evicts nothing.
    //!
    //! Only where the victim scan puts kept storages first (a scoring heuristic, while
    //! keeps_released() under kept_priority::first): a heuristic's own choose may name a
    //! held storage. Returns: whether `bytes` were freed; false, with nothing evicted,
    //! when the kept members hold less or the scan does not put them first.
    bool evict_kept(std::size_t bytes);

    //! @brief The next victim by the heuristic (its choose, or the scan of its scores);
    //! nullptr for an empty pool.
    storage* choose_victim();

    //! @brief Under fragmentation_policy::window on a backend that describes its region,
    //! evicts the cheapest run of neighbouring blocks that frees `bytes` contiguously.
    window_outcome evict_window(std::size_t bytes);

private:
    //! A heuristic with its own choose (a search strategy) that also scores.
    static constexpr bool scoring_strategy() noexcept {
        using H = typename Rt::heuristic_type;
        return choosing_heuristic<H, list_type> && scoring_heuristic<H>;
    }

    //! Whether the pool keeps its members nobody holds (kept after their last release) at
    //! its front: for a scoring strategy under kept_priority::first (fixed at construction),
    //! so that the runtime finds the kept members without scanning the held ones
    //! (best_kept), where an exhaustive scan would cost what the strategy saves. Every other
    //! pool stays in insertion order, which breaks a scan's ties as the published simulator
    //! does (and a strategy's as the plain policy's under kept_priority::scored).
    [[nodiscard]] bool kept_lead() const noexcept {
        return scoring_strategy() && rt_.options_.kept == kept_priority::first;
    }

    //! The kept member of lowest score among the pool's leading members nobody holds, by
    //! the scan's rule (search::detail::last_lowest); nullptr when there is none.
    storage_node<Backend, Meta>* best_kept(const heuristic_context& ctx) {
        search::detail::last_lowest<storage_node<Backend, Meta>> pick;
        if constexpr (scoring_strategy()) {
            std::uint64_t evaluations = 0;
            for (storage_node<Backend, Meta>& s : pool_) {
                if (!storage::of(&s)->released) break; // the held members follow
                ++evaluations;
                if (!pick.offer(s, score_against(rt_.heuristic_, s, ctx, pick.best_score()))) break;
            }
            rt_.counters_.heuristic_evaluations += evaluations;
        }
        return pick.best();
    }

    //! Whether the victim scan puts storages nobody holds before every held one now.
    [[nodiscard]] bool kept_go_first() const noexcept {
        // A policy that reads the forecast knows when a kept storage is needed again (by the
        // restores that read it), which "nobody holds it" only guesses: it orders them itself.
        if constexpr (reads_forecast<typename Rt::heuristic_type>)
            if (rt_.steps_.forecast() != nullptr) return false;
        return rt_.keeps_released() && rt_.options_.kept == kept_priority::first;
    }

    //! Counts one victim search that began at `start`.
    void count_search(std::chrono::steady_clock::time_point start) noexcept {
        ++rt_.counters_.victim_searches;
        rt_.counters_.victim_search_ns +=
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count());
    }

    using base::rt_;
    list_type pool_;
    // Fragmentation-aware eviction (evict_window): the region's blocks, the storage owning
    // each evictable one, and the evictable storages by region offset.
    std::vector<window_block> window_blocks_;
    std::vector<storage*> window_owners_;
    std::vector<std::pair<std::size_t, storage*>> window_candidates_;
};

template <class Rt, class Backend, class Meta>
auto evictable_pool<Rt, Backend, Meta>::choose_victim() -> storage* {
    using H = typename Rt::heuristic_type;
    if (pool_.empty()) return nullptr;
    // Scores read costs: fold in every measurement that has finished (never waits).
    if constexpr (deferred_costs<Backend>) rt_.costs_.collect(cost_collection::ready);
    const auto start = std::chrono::steady_clock::now();
    const heuristic_context ctx = rt_.hctx();
    storage_node<Backend, Meta>* best = nullptr;
    if constexpr (choosing_heuristic<H, list_type>) {
        // A strategy searches the whole pool; storages nobody holds go first here too (as
        // in the scan below), ordered by the strategy's scores.
        if (kept_go_first()) best = best_kept(ctx);
        if (best == nullptr) best = rt_.heuristic_.choose(pool_, ctx);
    } else {
        static_assert(scoring_heuristic<H>,
                      "dtr::runtime: the heuristic has neither score(storage, context) nor a "
                      "choose(pool, context) returning a pointer to a pool member "
                      "(runtime::storage_type*); see dtr/concepts.hpp");
        double best_score = std::numeric_limits<double>::infinity();
        // Read once per scan, not per storage, so that the loop keeps both in registers.
        const bool factored = rt_.offload_.factors_scores();
        // While released storages are kept (runtime::keeps_released), a storage nobody holds
        // goes before every held one: it was kept only to fill memory the program does not
        // need (it saves recursion in later recomputations), so it never displaces a value
        // the program will read. Among the kept ones the policy's scores decide; once one is
        // found, held storages are no longer scored.
        const bool kept_first = kept_go_first();
        bool kept_found = false;
        std::uint64_t evaluations = 0;
        for (storage_node<Backend, Meta>& s : pool_) {
            if (kept_first) {
                const bool kept = storage::of(&s)->unheld();
                if (kept_found && !kept) continue;
                if (kept && !kept_found) {
                    kept_found = true;
                    best_score = std::numeric_limits<double>::infinity();
                }
            }
            double score;
            if constexpr (bounded_scoring_heuristic<H>) {
                // A policy that can stop early scores against the best so far: a score above
                // it cannot win (dtr/bounded_score.hpp), so the choice is the same. Offload:
                // a factor below 1 scales the score after the policy's bound test, so no
                // bound then, rather than a rounding argument for best / factor.
                double bound = best_score;
                double factor = 1.0;
                if (factored) {
                    factor = rt_.offload_.score_factor(*storage::of(&s));
                    if (factor != 1.0) bound = std::numeric_limits<double>::infinity();
                }
                score = score_against(rt_.heuristic_, s, ctx, bound) * factor;
            } else {
                // The plain loop for the others: the bookkeeping above cost them 3-6% of the
                // instructions of bench/micro/overhead's evicting scenarios.
                score = static_cast<double>(rt_.heuristic_.score(s, ctx));
                // Offload: the cheaper of recomputing and transferring.
                if (factored) score *= rt_.offload_.score_factor(*storage::of(&s));
            }
            ++evaluations;
            // Last lowest wins and a zero score ends the scan: the DTR simulator's rule, so
            // that replays make the same choices.
            if (score <= best_score) {
                best_score = score;
                best = &s;
            }
            // (Under kept_first a held storage's zero cannot end the scan: a kept one may follow.)
            if (score == 0 && (kept_found || !kept_first)) break;
        }
        rt_.counters_.heuristic_evaluations += evaluations;
        if (best == nullptr) best = &pool_.back(); // every score was NaN
    }
    count_search(start);
    return storage::of(best);
}

template <class Rt, class Backend, class Meta>
bool evictable_pool<Rt, Backend, Meta>::evict_kept(std::size_t bytes) {
    using H = typename Rt::heuristic_type;
    if constexpr (choosing_heuristic<H, list_type> && !scoring_strategy()) {
        return false; // a choose without scores: nothing orders the kept ones
    } else {
        if (!kept_go_first()) return false;
        // One pass at worst, stopping once they are known to suffice; where the kept ones
        // lead the pool (kept_lead), at the first held one.
        const bool lead = kept_lead();
        std::size_t kept = 0;
        for (const auto& node : pool_) {
            const auto& s = static_cast<const storage&>(node);
            if (lead ? !s.released : !s.unheld()) {
                if (lead) break;
                continue;
            }
            if ((kept += s.bytes) >= bytes) break;
        }
        if (kept < bytes) return false;
        // The scan returns a kept storage while one is left, and they hold `bytes`; should it
        // name a held one after all, the loop stops there. (A kept victim is dropped, never
        // copied out, so each frees its whole size.)
        std::size_t freed = 0;
        while (freed < bytes) {
            storage* victim = choose_victim();
            if (victim == nullptr || !victim->unheld()) break;
            freed += victim->bytes;
            evict(victim, false);
        }
        return freed >= bytes;
    }
}

template <class Rt, class Backend, class Meta>
auto evictable_pool<Rt, Backend, Meta>::evict_window(std::size_t bytes) -> window_outcome {
    if constexpr (reports_layout<Backend>) {
        Backend& backend = rt_.backend_;
        if (rt_.options_.fragmentation != fragmentation_policy::window || !backend.has_layout())
            return window_outcome::unavailable;
        // Scores read costs: fold in every measurement that has finished (never waits).
        if constexpr (deferred_costs<Backend>) rt_.costs_.collect(cost_collection::ready);
        const auto start = std::chrono::steady_clock::now();
        const std::size_t need = region_bytes(bytes, backend.layout_alignment());
        if (need == std::numeric_limits<std::size_t>::max()) return window_outcome::none;
        // Only pool members may go; every other live block (pinned, constant, without a
        // recipe, a buffer of the running operator) is a wall. The pool is small next to
        // the region's blocks, so it is sorted by address here rather than indexed always.
        window_candidates_.clear();
        for (storage_node<Backend, Meta>& s : pool_) {
            storage* r = storage::of(&s);
            window_candidates_.emplace_back(backend.region_offset(r->ptr), r);
        }
        std::sort(window_candidates_.begin(), window_candidates_.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        window_blocks_.clear();
        window_owners_.clear();
        const heuristic_context ctx = rt_.hctx();
        std::size_t next = 0;
        backend.for_each_block([&](std::size_t offset, std::size_t size, bool is_free) {
            window_block b{offset, size,
                           is_free ? window_block::kind::free : window_block::kind::fixed, 0};
            storage* owner = nullptr;
            if (!is_free) {
                while (next < window_candidates_.size() && window_candidates_[next].first < offset)
                    ++next;
                if (next < window_candidates_.size() && window_candidates_[next].first == offset) {
                    owner = window_candidates_[next].second;
                    b.what = window_block::kind::evictable;
                    // A policy that only chooses (random) has no scores: every byte then
                    // costs alike, and the window evicting the fewest bytes wins.
                    if constexpr (scoring_heuristic<typename Rt::heuristic_type>)
                        b.score = static_cast<double>(rt_.heuristic_.score(owner->view(), ctx));
                    else
                        b.score = 1.0;
                    // A block's cost is its score times its bytes: a window frees a span
                    // fixed by the request, so its members are compared by what evicting
                    // them costs (docs/design.md, "Fragmentation").
                    b.score *= static_cast<double>(size);
                    ++rt_.counters_.heuristic_evaluations;
                }
            }
            window_blocks_.push_back(b);
            window_owners_.push_back(owner);
        });
        const std::optional<window_choice> w = cheapest_window(window_blocks_, need);
        count_search(start);
        if (!w) return window_outcome::none;
        // A window of holes alone would mean the allocator refused a block it has: never
        // loop on it; let the one-by-one path decide.
        if (w->evictions == 0) return window_outcome::unavailable;
        for (std::size_t i = w->first; i < w->last; ++i) {
            if (window_owners_[i] == nullptr) continue;
            evict(window_owners_[i], false);
            ++rt_.counters_.window_evictions;
        }
        return window_outcome::evicted;
    } else {
        (void)bytes;
        return window_outcome::unavailable;
    }
}

} // namespace dtr::detail
