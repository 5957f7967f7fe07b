// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Indexed victim search: buckets on the time-invariant part of the score, ordered
//! by last access inside, searched by branch and bound. Sub-linear in the evictable pool.
#pragma once

#include <dtr/bounded_score.hpp>
#include <dtr/concepts.hpp>
#include <dtr/heuristic/ablation.hpp>
#include <dtr/heuristic/detail/dependent_list.hpp>
#include <dtr/search/detail/forwarding.hpp>
#include <dtr/search/detail/key_buckets.hpp>
#include <dtr/search/exhaustive.hpp>

#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace dtr::search {

namespace detail {

//! The factored policy whose scores an index keys: H itself, or, for a policy that reads
//! the forecast over an online factored policy (heuristics::next_use_aware), that online
//! policy, which scores every storage while no forecast is in force.
template <class H>
struct factored_core {
    using type = H;
    static H& of(H& h) noexcept { return h; }
};
//! A policy that reads the forecast and names its online policy (heuristics::next_use_aware).
template <class H>
concept forecast_over_online = reads_forecast<H> && requires {
    typename H::online_type;
};

template <class H>
    requires(!heuristics::factored_heuristic<H> && forecast_over_online<H>)
struct factored_core<H> {
    using type = typename H::online_type;
    static type& of(H& h) noexcept { return h.online(); }
};

} // namespace detail

//! @brief The policies search::indexed can index: those of the score skeleton, and those
//! that read the forecast over one (dtr_next_use: the index while there is no forecast,
//! the scan while there is).
template <class H>
concept indexable = heuristics::factored_heuristic<typename detail::factored_core<H>::type>;

//! @brief An index over the evictable pool for policies of the score skeleton
//! (heuristics::ablation and the named policies built on it: dtr, dtr_eqclass, dtr_local,
//! msps), returning the exhaustive scan's minimum score without scoring every storage.
//!
//! Why the score factors. score(t) = N(t) / (m(t) x (now - last_access(t))). For a fixed
//! `now` this orders storages by no fixed key, but a(t) = N(t) / m(t) (the "key") does not
//! depend on time, and neither does last_access(t); only `now` moves. So:
//! - storages are bucketed by their key into geometric buckets of ratio 1 + 1/8
//!   (detail::key_buckets), and kept in each bucket in order of last access (oldest first;
//!   a use moves a storage to its bucket's end in O(1) amortized);
//! - for a bucket b with lower bound L_b, any member t scores at least
//!   L_b / (now - last_access(t)), and its oldest member gives the bucket's best bound;
//! - a decision computes those bounds for the non-empty buckets, then visits buckets in
//!   increasing bound and, inside, members oldest first, scoring each exactly with the
//!   policy, until the bound reaches the best exact score found (divided by 1 + tolerance).
//! Without staleness the buckets are ordered by the key itself and the bound is the key.
//!
//! Keys go stale when N(t) changes. The cost models only ever report decreases to the
//! index (the decrease listener): e* and class values grow on evictions and shrink on
//! rematerializations and destructions, and each cost model names every storage whose
//! numerator can have shrunk (cost::estar: the frontier of the changed neighbourhood;
//! cost::eqclass: the storages registered with the class that lost value). Those are
//! re-keyed before the next decision. A key that is too low (numerator grew) is still a
//! valid lower bound; it is corrected when the storage is next scored.
//!
//! Deviation from the exhaustive scan. With tolerance 0 the victim's score equals the
//! exhaustive minimum exactly (both computed by the same function, bit for bit); only ties
//! may be broken differently (the scan keeps the last lowest in pool order, the index the
//! first lowest it meets). With tolerance e > 0 the victim's score is at most (1 + e) times
//! the minimum. Proof sketch: every key is <= its storage's true N/m (decreases are
//! re-keyed first; increases only make keys low), so every bound is a true lower bound on
//! its storage's score; the search stops only when no unscored storage's bound is below
//! best / (1 + e).
//!
//! Cost of a decision: one bound per non-empty bucket (at most key_buckets::count, in
//! practice the binades spanned by N/m, eight buckets each) plus the storages scored, which
//! are those whose bound is below the optimum / (1 + e): storages within a factor
//! 9/8 / (1 + e) of the best score, and storages whose key is stale-low. Tolerance 1/8 makes
//! that set nearly empty. Cost of maintenance: O(log k) per pool insertion or removal (k:
//! the bucket's size), plus one numerator when the key must be recomputed (a storage that
//! left the pool to be pinned keeps its key unless a decrease was reported meanwhile);
//! O(1) amortized per access; a re-key per reported decrease.
//!
//! Built at the first decision. Until a victim is needed (a budget that never binds, the
//! first calls of a program before it does) the index keeps nothing: pool insertions,
//! removals and accesses cost the policy's own upkeep only, and no numerator is computed.
//! The first decision that uses the index files the whole pool, O(pool) numerators once;
//! from there on the index follows the pool as above. The victims are the same either way:
//! each is of minimum score, found by the same function.
//!
//! A policy that reads the forecast (dtr_next_use: next_use_aware over dtr_eqclass) is
//! indexed by its online policy's scores, which are its own scores while no forecast is in
//! force; while one is (heuristic_context::forecast), its scores depend on when each
//! storage is read next, which no key bounds, and a decision is the exhaustive scan
//! instead, the same victim as the policy alone. Once built, the index is kept up to date
//! throughout, so that it serves again at once when the program leaves the recorded step or
//! the forecast guard withholds the forecast; a program that has the forecast from its
//! first decision on never builds it.
//!
//! @tparam H a search::indexable policy
template <class H>
class indexed : public detail::forwarding<H> {
    static_assert(indexable<H>,
                  "dtr::search::indexed<H>: H must be a policy of the score skeleton "
                  "(dtr::heuristics::ablation<CostModel, UseSize, UseStaleness> or a policy "
                  "derived from it: dtr, dtr_eqclass, dtr_local, msps), whose score is a "
                  "time-invariant numerator over size and staleness, or one that reads the "
                  "forecast over such a policy (dtr_next_use)");
    using base = detail::forwarding<H>;
    //! The policy the keys come from (H, or H's online policy).
    using core_type = typename detail::factored_core<H>::type;
    core_type& core() noexcept { return detail::factored_core<H>::of(this->inner_); }
    using hook_type = boost::intrusive::set_member_hook<
        boost::intrusive::link_mode<boost::intrusive::normal_link>>;
    static constexpr std::uint32_t npos = heuristics::detail::npos;

public:
    //! Per-storage index state, on top of the policy's own.
    struct storage_data : H::storage_data {
        //! Bucket membership. normal_link: the runtime deletes storages at teardown
        //! without unlinking them, and the index never touches them afterwards.
        hook_type ix_hook{};
        double ix_key = 0;        //!< cached N/m (or N): a lower bound of the true one
        double ix_order = 0;      //!< order inside the bucket: last access, or the key
        void* ix_owner = nullptr; //!< the storage this record lives in
        std::uint32_t ix_bucket = 0;
        std::uint32_t ix_dirty_slot = npos; //!< position in the re-key list, or npos
        double ix_cost = 0;                 //!< the storage's own cost when the key was computed
        bool ix_member = false;
        bool ix_recheck = false;
        //! The key is still a lower bound: no decrease was reported since it was computed.
        //! A storage that leaves the pool only to be pinned keeps its key (and its
        //! registrations) and rejoins without recomputing its numerator.
        bool ix_valid = false;
    };
    static constexpr char strategy_name[] = "indexed";
    //! "indexed:<H::name>".
    static constexpr const char* name = detail::joined_name<strategy_name, H>::value;

    //! @brief An index over `inner`'s scores; `tolerance` e >= 0 lets a decision stop once no
    //! storage left can beat the best found by more than a factor 1 + e.
    explicit indexed(H inner = H{}, double tolerance = 0)
        : base(std::move(inner)),
          shrink_(1.0 / (1.0 + tolerance)),
          trees_(std::make_unique<tree_type[]>(detail::key_buckets::count)) {
        for (std::uint32_t b = 0; b < detail::key_buckets::count; ++b) {
            lower_[b] = detail::key_buckets::lower(b);
            head_order_[b] = std::numeric_limits<double>::infinity();
        }
    }

    //! @brief The victim: a storage of minimum score (within the tolerance); nullptr for an
    //! empty pool.
    template <class Pool>
    typename Pool::value_type* choose(Pool& pool, const heuristic_context& ctx);

    // ---- hooks ------------------------------------------------------------------------
    template <class Storage>
    void on_pool_insert(Storage& s, const heuristic_context& ctx) {
        base::on_pool_insert(s, ctx);
        if (built_) insert(s, ctx);
    }
    template <class Storage>
    void on_pool_erase(Storage& s, const heuristic_context& ctx) {
        base::on_pool_erase(s, ctx);
        remove(s, ctx);
    }
    template <class Storage>
    void on_access(Storage& s, const heuristic_context& ctx) {
        base::on_access(s, ctx);
        storage_data& d = s.meta();
        if (!d.ix_member || !core_type::uses_staleness) return;
        ctx.count_access();
        tree_type& tree = trees_[d.ix_bucket];
        tree.erase(tree.iterator_to(d));
        d.ix_order = static_cast<double>(s.last_access());
        tree.insert(tree.end(), d); // the newest access: the end, O(1) amortized
        refresh_head(d.ix_bucket);
    }
    template <class Storage>
    void on_evict(Storage& s, const heuristic_context& ctx) {
        core().on_evict(s, ctx, listener{this});
        // Evicted, its key means nothing any more; neither do its registrations.
        core().untrack(s);
        s.meta().ix_valid = false;
    }
    template <class Storage>
    void on_rematerialize(Storage& s, const heuristic_context& ctx) {
        core().on_rematerialize(s, ctx, listener{this});
        // The events go to the online policy directly; the policy over it counts them too
        // (heuristics::next_use_aware's rescue).
        if constexpr (requires { this->inner_.count_rematerialization(s, ctx); })
            this->inner_.count_rematerialization(s, ctx);
    }
    template <class Storage>
    void on_release(Storage& s, const heuristic_context& ctx) {
        core().on_release(s, ctx, listener{this});
    }
    template <class Storage>
    void on_destroy(Storage& s, const heuristic_context& ctx) {
        core().on_destroy(s, ctx, listener{this});
        core().untrack(s);
        s.meta().ix_valid = false;
    }

    // ---- introspection ----------------------------------------------------------------
    //! @brief Whether the index has been built (at the first decision that needed it).
    [[nodiscard]] bool built() const noexcept { return built_; }
    //! @brief Storages indexed: the evictable pool's size once built, 0 before.
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    //! @brief Buckets holding at least one storage.
    [[nodiscard]] std::size_t nonempty_buckets() const noexcept {
        std::size_t n = 0;
        for (std::uint64_t w : nonempty_) n += static_cast<std::size_t>(std::popcount(w));
        return n;
    }
    //! @brief Re-keys so far (decreases reported, and stale-low keys found by scoring).
    [[nodiscard]] std::uint64_t rekeys() const noexcept { return rekeys_; }
    //! @brief Of those, re-keys of storages whose numerator a cost model reported as
    //! possibly decreased.
    [[nodiscard]] std::uint64_t decrease_rekeys() const noexcept { return decrease_rekeys_; }
    [[nodiscard]] double tolerance() const noexcept { return 1.0 / shrink_ - 1.0; }

private:
    struct order_less {
        bool operator()(const storage_data& a, const storage_data& b) const noexcept {
            return a.ix_order < b.ix_order;
        }
    };
    using tree_type = boost::intrusive::multiset<
        storage_data,
        boost::intrusive::member_hook<storage_data, hook_type, &storage_data::ix_hook>,
        boost::intrusive::compare<order_less>, boost::intrusive::constant_time_size<false>>;

    //! Reports storages whose numerator may have dropped: members are re-keyed before the
    //! next decision, others when they rejoin the pool.
    struct listener {
        indexed* self;
        template <class Storage>
        void operator()(Storage& s) const {
            storage_data& d = s.meta();
            if (!d.ix_member) {
                d.ix_valid = false;
                return;
            }
            if (d.ix_dirty_slot != npos) return;
            d.ix_dirty_slot = static_cast<std::uint32_t>(self->dirty_.size());
            self->dirty_.push_back(&s);
        }
    };
    struct head {
        double bound;
        std::uint32_t bucket;
    };

    //! Rounding slack: a bound is computed as L / staleness, the score as N / (m x
    //! staleness); shaving 2^-40 keeps the bound below the score whatever the rounding.
    static constexpr double safety = 1.0 - 0x1p-40;

    template <class Storage>
    static double key_of(double numerator, const Storage& s) noexcept {
        if constexpr (core_type::uses_size)
            return numerator / static_cast<double>(s.size());
        else
            return numerator;
    }

    //! Lower bound on the score of a member of bucket b whose order key is `order`, valid
    //! for every member further down the bucket (monotone along the bucket).
    double bucket_bound(std::uint32_t b, double order, cost_t now) const noexcept {
        if constexpr (core_type::uses_staleness) {
            const double staleness = static_cast<double>(now) - order;
            if (!(staleness > 0)) return std::numeric_limits<double>::infinity();
            return lower_[b] * safety / staleness;
        } else {
            (void)b;
            (void)now;
            return order * safety; // the order is the key itself
        }
    }
    //! Lower bound on one member's score from its own cached key (tighter, not monotone).
    double member_bound(const storage_data& d, cost_t now) const noexcept {
        if constexpr (core_type::uses_staleness) {
            const double staleness = static_cast<double>(now) - d.ix_order;
            if (!(staleness > 0)) return std::numeric_limits<double>::infinity();
            return d.ix_key * safety / staleness;
        } else {
            (void)now;
            return d.ix_key * safety;
        }
    }
    //! Keeps head_order_[b] (the order key of the bucket's first member) in step with the
    //! tree, so that a decision reads bucket bounds from one array instead of chasing a
    //! pointer per bucket.
    void refresh_head(std::uint32_t b) noexcept {
        const tree_type& tree = trees_[b];
        head_order_[b] =
            tree.empty() ? std::numeric_limits<double>::infinity() : tree.begin()->ix_order;
    }

    //! Files s in the bucket of its key, ordered by last access (or by key).
    template <class Storage>
    void link(Storage& s) {
        storage_data& d = s.meta();
        d.ix_bucket = detail::key_buckets::of(d.ix_key);
        if constexpr (core_type::uses_staleness)
            d.ix_order = static_cast<double>(s.last_access());
        else
            d.ix_order = d.ix_key;
        // Most insertions are of recently used storages: try the end first.
        trees_[d.ix_bucket].insert(trees_[d.ix_bucket].end(), d);
        nonempty_[d.ix_bucket / 64] |= std::uint64_t{1} << (d.ix_bucket % 64);
        refresh_head(d.ix_bucket);
    }
    void unlink(storage_data& d) noexcept {
        tree_type& tree = trees_[d.ix_bucket];
        tree.erase(tree.iterator_to(d));
        if (tree.empty()) nonempty_[d.ix_bucket / 64] &= ~(std::uint64_t{1} << (d.ix_bucket % 64));
        refresh_head(d.ix_bucket);
    }
    //! Recomputes s's key (registering it with what its numerator counted).
    template <class Storage>
    void compute_key(Storage& s, const heuristic_context& ctx) {
        storage_data& d = s.meta();
        const double numerator = core().numerator_tracked(s, ctx);
        d.ix_key = key_of(numerator, s);
        d.ix_cost = static_cast<double>(s.cost());
        d.ix_valid = true;
    }

    template <class Storage>
    void insert(Storage& s, const heuristic_context& ctx) {
        storage_data& d = s.meta();
        ctx.count_access();
        d.ix_owner = &s;
        d.ix_member = true;
        ++size_;
        // A cost corrected meanwhile (deferred-cost backends) invalidates the key too.
        if (!d.ix_valid || d.ix_cost != static_cast<double>(s.cost())) compute_key(s, ctx);
        link(s);
    }
    template <class Storage>
    void remove(Storage& s, const heuristic_context& ctx) {
        storage_data& d = s.meta();
        if (!d.ix_member) return;
        ctx.count_access();
        unlink(d);
        if (d.ix_dirty_slot != npos) {
            auto* last = static_cast<Storage*>(dirty_.back());
            dirty_[d.ix_dirty_slot] = last;
            last->meta().ix_dirty_slot = d.ix_dirty_slot;
            dirty_.pop_back();
            d.ix_dirty_slot = npos;
            d.ix_valid = false;
        }
        d.ix_member = false;
        --size_;
    }
    template <class Storage>
    void rekey(Storage& s, const heuristic_context& ctx) {
        storage_data& d = s.meta();
        ctx.count_access();
        unlink(d);
        ++rekeys_;
        compute_key(s, ctx);
        link(s);
    }

    double shrink_;
    std::unique_ptr<tree_type[]> trees_;
    std::array<double, detail::key_buckets::count> lower_{};
    std::array<double, detail::key_buckets::count> head_order_{};
    std::array<std::uint64_t, (detail::key_buckets::count + 63) / 64> nonempty_{};
    std::vector<void*> dirty_;   //!< storages to re-key before the next decision
    std::vector<void*> recheck_; //!< storages found with a stale-low key while deciding
    std::vector<head> heads_;
    std::size_t size_ = 0;
    bool built_ = false; //!< the pool has been filed (at the first decision using the index)
    std::uint64_t rekeys_ = 0;
    std::uint64_t decrease_rekeys_ = 0;
};

template <class H>
template <class Pool>
typename Pool::value_type* indexed<H>::choose(Pool& pool, const heuristic_context& ctx) {
    using storage = typename Pool::value_type;
    if constexpr (::dtr::reads_forecast<H>) {
        // The scores read the forecast: no key bounds them. The policy's own scan, so that
        // the victim is the one the policy alone would take.
        if (ctx.forecast != nullptr) return exhaustive_choice(pool, this->inner_, ctx);
        // Nor while its rescue scores without the forecast (heuristics::next_use_aware).
        if constexpr (requires { this->inner_.rescuing(); })
            if (this->inner_.rescuing()) return exhaustive_choice(pool, this->inner_, ctx);
    }
    if (!built_) {
        // The first decision: file the pool. Nothing was reported before (no member, no
        // registration), so every key is computed here, each a lower bound as always.
        built_ = true;
        for (auto& s : pool) insert(s, ctx);
    }
    if (size_ == 0) return nullptr;
    // Keys whose numerator may have dropped are no longer lower bounds: fix them first.
    while (!dirty_.empty()) {
        auto& s = *static_cast<storage*>(dirty_.back());
        dirty_.pop_back();
        s.meta().ix_dirty_slot = npos;
        ++decrease_rekeys_;
        rekey(s, ctx);
    }

    const cost_t now = ctx.now;
    heads_.clear();
    for (std::size_t w = 0; w < nonempty_.size(); ++w) {
        for (std::uint64_t bits = nonempty_[w]; bits != 0; bits &= bits - 1) {
            const auto b = static_cast<std::uint32_t>(
                w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
            if (b == detail::key_buckets::infinite) continue;
            heads_.push_back({bucket_bound(b, head_order_[b], now), b});
        }
    }

    double best_score = std::numeric_limits<double>::infinity();
    storage* best = nullptr;
    // Buckets in increasing bound: a heap, since only the first few are usually visited.
    auto later = [](const head& x, const head& y) { return x.bound > y.bound; };
    std::make_heap(heads_.begin(), heads_.end(), later);
    while (!heads_.empty() && heads_.front().bound < best_score * shrink_) {
        std::pop_heap(heads_.begin(), heads_.end(), later);
        const std::uint32_t b = heads_.back().bucket;
        heads_.pop_back();
        tree_type& tree = trees_[b];
        for (auto it = tree.begin(); it != tree.end();) {
            storage_data& d = *it;
            ++it;
            const double threshold = best_score * shrink_;
            if (!(bucket_bound(b, d.ix_order, now) < threshold)) break; // nor anyone after
            ctx.count_access();
            if (!(member_bound(d, now) < threshold)) continue; // its own key rules it out
            auto& s = *static_cast<storage*>(d.ix_owner);
            const double numerator = core().numerator(s, ctx);
            const double score = core().compose(numerator, s, ctx);
            ctx.count_evaluation();
            if (key_of(numerator, s) != d.ix_key && !d.ix_recheck) {
                d.ix_recheck = true;
                recheck_.push_back(&s);
            }
            if (score < best_score) {
                best_score = score;
                best = &s;
                if (score <= 0) break;
            }
        }
        if (best_score <= 0) break;
    }
    // Keys found stale (low) while scoring: move them to their bucket now.
    for (void* p : recheck_) {
        auto& s = *static_cast<storage*>(p);
        s.meta().ix_recheck = false;
        rekey(s, ctx);
    }
    recheck_.clear();
    if (best == nullptr) {
        // Every score is infinite (all just used, or empty): any member will do; prefer the
        // finite buckets' oldest, then the infinite bucket.
        for (std::size_t w = 0; w < nonempty_.size() && best == nullptr; ++w)
            if (nonempty_[w] != 0) {
                const auto b = static_cast<std::uint32_t>(
                    w * 64 + static_cast<std::size_t>(std::countr_zero(nonempty_[w])));
                best = static_cast<storage*>(trees_[b].begin()->ix_owner);
            }
    }
    return best;
}

} // namespace dtr::search
