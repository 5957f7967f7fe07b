// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The step tracker: records the program's calls, finds the step the program repeats
//! (from runtime::begin_step, or by matching the sequence of calls), follows it call by call,
//! and stamps each storage with the call that will read it next (dtr::step_forecast).
#pragma once

#include <dtr/counters.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/detail/dependency_graph.hpp>
#include <dtr/detail/forecast_guard.hpp>
#include <dtr/options.hpp>
#include <dtr/step_forecast.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace dtr::detail {

//! One variable per type: its address is a key for the callable type of a call
//! (call_options::op_key left 0).
template <class T>
inline constexpr char type_key_tag = 0;
template <class T>
[[nodiscard]] std::uint64_t type_key() noexcept {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&type_key_tag<T>));
}

//! @brief Learns the program's step and forecasts its reads.
//!
//! Every event of the program is a row of *slots*: a call (not a recomputation) reads its
//! inputs and makes storages (fresh outputs, new versions); a pin outside any call reads
//! one storage. A slot's *link* is the slot where the same storage last appeared, which makes
//! the data flow of a sequence of events independent of where it starts. A step is a
//! sequence of events with their signatures (operator key, input sizes, output sizes and
//! views) and links inside the step. While the program follows it, each event must match
//! the step's next one (the signature before a call runs, links and outputs after): then
//! every storage it reads or makes is stamped with the event of the step that reads it next
//! (the links reversed). A read of a storage from the previous period teaches the step the
//! link across its end. An event whose signature is not the step's next one is skipped over
//! as an *insertion* (the loss read to log it, a gradient zeroed in all steps but the
//! first): it runs without the forecast, makes storages the forecast knows nothing of, and
//! the program stays on the step, its next event expected to be the step's next one; the
//! links of later events see through it (a storage it read links to where it was before).
//! At most insertion_limit() insertions a period; one more, or any other difference (an
//! event whose outputs, or the links of its inputs, are not the step's: another shape, a
//! storage read that the step did not read there, a storage made by an insertion) ends the
//! forecast (heuristic_context::forecast is null from there on), so a policy is back on its
//! online scores from the next victim it chooses.
//! Each step boundary is also a period boundary of the forecast guard (forecast_guard.hpp),
//! which withholds the forecast from the steps after one where it cost more. Each event of
//! the step also keeps the lowest cost measured for it, which a call following the step
//! records instead of a higher measurement (runtime_options::repeat_costs).
//!
//! Where steps come from:
//! - marks (runtime::begin_step): the events between two marks are the step; a step that
//!   diverged is replaced by the one recorded at its end;
//! - otherwise (step_learning::automatic, until the first mark), after each event the
//!   tracker tries the earlier events with the same signature (the 8 most recent) as the
//!   same event one period p ago: when the last m events equal the m before them, with m = p
//!   for p <= 32 and max(32, p / 8) above, the last p events become the step. Comparing
//!   windows is O(1) with rolling hashes of the signatures.
//!
//! Memory: the recent events (at most 2 x step_limit; 56 bytes each, 8 per slot), the
//! step (at most step_limit events; 40 bytes each, 8 per slot) and the period's
//! insertions (at most insertion_limit(), 24 bytes each). Per event: O(inputs +
//! outputs), plus at most 8 hash probes while learning without marks.
template <class Rt, class Backend, class Meta>
class step_tracker : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::op;
    using typename base::storage;

    explicit step_tracker(Rt& rt) noexcept : base(rt) {}

    //! @brief Returns: the forecast while the program follows a recorded step and the
    //! forecast guard gives it to this step (runtime_options::guard_forecast), else null.
    [[nodiscard]] const step_forecast* forecast() const noexcept {
        return following_ && !inserting_ && guard_.allows() ? &forecast_ : nullptr;
    }

    //! @brief runtime::begin_step(): the calls since the last mark are one step.
    void mark() noexcept {
        ++rt_.counters_.steps_marked;
        if (rt_.options_.steps == step_learning::off) return;
        marks_seen_ = true;
        end_period(following_ && pos_ == step_.size());
        if (following_ && pos_ == step_.size()) {
            next_period(); // the step ran exactly as recorded
        } else {
            if (following_) diverge(); // it ended early
            if (mark_ != none && next_call_ > mark_ && next_call_ - mark_ <= limit() &&
                mark_ >= hist_call0_)
                adopt_guarded(static_cast<std::size_t>(mark_ - hist_call0_), hist_.size());
        }
        mark_ = next_call_;
        begin_period();
    }

    //! @brief Before a program's call `o` runs: whether it is the recorded step's next call.
    void before_call(const op& o, std::uint64_t key) noexcept { expect(call_signature(o, key)); }

    //! @brief Returns: the most the call announced by before_call may record as its measured
    //! cost: the lowest measured at its place in the recorded step, while the program follows
    //! the step (whether or not the guard gives this step the forecast) and
    //! runtime_options::repeat_costs asks for it; infinity otherwise.
    [[nodiscard]] cost_t cost_ceiling() const noexcept {
        if constexpr (deferred_costs<Backend>) {
            return std::numeric_limits<cost_t>::infinity(); // the cost arrives after the call
        } else {
            if (!following_ || inserting_ || rt_.options_.repeat_costs != repeat_cost::lowest)
                return std::numeric_limits<cost_t>::infinity();
            return step_[pos_].lowest_cost;
        }
    }

    //! @brief After the program pinned `s` (runtime::pin): a read outside any call, an event of
    //! the step like a call (the end of a step often reads its results this way).
    void after_pin(storage& s, std::size_t length) noexcept {
        expect(mix(pin_key, length));
        try {
            inputs_.assign(1, &s);
            products_.clear();
            record_event(call_sig_, pin_key, 0);
        } catch (...) {
            reset();
        }
    }

    //! @brief Whether the next event, of signature `call_sig`, is the recorded step's next one.
    void expect(std::uint64_t call_sig) noexcept {
        call_sig_ = call_sig;
        inserting_ = false;
        if (!following_) return;
        if (pos_ == step_.size()) {
            if (marks_seen_) {
                diverge(); // longer than the recorded step
                return;
            }
            end_period(true);
            next_period();
            begin_period();
        }
        if (step_[pos_].call_sig != call_sig_) {
            if (inserted_.size() < insertion_limit())
                inserting_ = true; // skipped over: the step's next event is still expected
            else
                diverge();
            return;
        }
        forecast_.now_ = base_call_ + pos_;
    }

    //! @brief After `o`'s first run succeeded (its products installed, before the commit):
    //! checks its outputs and links against the step, stamps its storages, records it.
    void after_run(const op& o) noexcept {
        try {
            record(o);
        } catch (...) { // out of memory for the recording: forget it, the program goes on
            reset();
        }
    }

    //! @brief Returns: where the tracker stands (runtime::step_state()).
    [[nodiscard]] step_status status() const noexcept {
        step_status st;
        st.following = following_;
        st.length = static_cast<std::uint32_t>(step_.size());
        st.position = following_ ? static_cast<std::uint32_t>(pos_) : 0;
        st.history = hist_.size();
        st.memory_bytes = hist_.capacity() * sizeof(recorded_call) +
                          inserted_.capacity() * sizeof(inserted_event) +
                          (hist_hash_.capacity() + hist_same_.capacity() + hist_prev_.capacity() +
                           pow_.capacity()) *
                              sizeof(std::uint64_t) +
                          same_table_.capacity() * sizeof(same_table_[0]) +
                          step_.capacity() * sizeof(step_call) +
                          prefix_.capacity() * sizeof(cost_t) +
                          (prev_.capacity() + next_.capacity()) * sizeof(std::uint32_t);
        return st;
    }

private:
    static constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
    static constexpr std::uint32_t no_link = std::numeric_limits<std::uint32_t>::max();
    //! The link of a storage an insertion made: equal to no link of the step.
    static constexpr std::uint32_t foreign_link = no_link - 1;
    //! Automatic detection: earlier calls with the same signature tried as period starts,
    //! and the shortest run of matching calls that adopts a long period.
    static constexpr int candidates = 8;
    static constexpr std::size_t min_match = 32;
    static constexpr std::size_t same_table_size = 4096;
    static constexpr std::uint64_t hash_base = 0x100000001b3ULL * 2 + 1; // odd
    //! The operator key of a pin (a read outside any call) in signatures.
    static constexpr std::uint64_t pin_key = 0x70696e0000000001ULL;

    //! A call of the recent history.
    struct recorded_call {
        std::uint64_t call_sig;
        std::uint64_t result_sig;
        cost_t cost;
        std::uint64_t first_slot; //!< global number of its first slot
        std::uint32_t inputs;
        std::uint32_t slots;
    };
    //! A call of the step being followed (its slots' links in prev_ / next_).
    struct step_call {
        std::uint64_t call_sig;
        std::uint64_t result_sig;
        cost_t lowest_cost;       //!< the lowest cost recorded at this place (cost_ceiling)
        std::uint32_t first_slot; //!< index of its first slot in prev_ / next_
        std::uint32_t slots;
    };

    [[nodiscard]] std::size_t limit() const noexcept {
        return std::max<std::size_t>(rt_.options_.step_limit, 1);
    }
    //! Insertions a period may skip over before the program is taken to have left the step:
    //! a few anywhere, more in a long step (a gradient zeroed per parameter).
    [[nodiscard]] std::size_t insertion_limit() const noexcept { return 8 + step_.size() / 4; }

    static std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
        h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ULL;
        return h ^ (h >> 31);
    }

    //! What is known before the run: operator, inputs' sizes, outputs' and versions' counts.
    static std::uint64_t call_signature(const op& o, std::uint64_t key) noexcept {
        std::uint64_t h = mix(0x51ed270b27c1f2a9ULL, key);
        h = mix(h, (std::uint64_t{o.n_inputs} << 32) | o.n_outputs);
        h = mix(h, o.n_versions);
        for (std::uint32_t i = 0; i < o.n_inputs; ++i)
            h = mix(h, (static_cast<std::uint64_t>(o.in[i].length) << 1) | o.in[i].mutated);
        return h;
    }
    //! What the run decided: each output's size, or which input it views.
    static std::uint64_t result_signature(const op& o) noexcept {
        std::uint64_t h = 0x2545f4914f6cdd1dULL;
        for (std::uint32_t i = 0; i < o.n_outputs; ++i) {
            const auto& out = o.out[i];
            if (out.alias_input >= 0) {
                h = mix(h, (static_cast<std::uint64_t>(out.alias_input) << 1) | 1);
                h = mix(h, out.alias_offset);
                h = mix(h, out.alias_length);
            } else {
                h = mix(h, static_cast<std::uint64_t>(out.bytes) << 1);
            }
        }
        return h;
    }

    //! The forecast guard's periods: one ends (`followed`: the recorded step was followed
    //! to its end), the next begins.
    void end_period(bool followed) noexcept {
        guard_.end(guard_charge(), rt_.counters_.compute_cost, followed);
    }
    void begin_period() noexcept {
        if (guard_.begin(guard_charge(), rt_.counters_.compute_cost, following_,
                         rt_.options_.guard_forecast))
            ++rt_.counters_.forecast_withheld;
    }
    //! What the guard charges the program so far: its recomputation, and the victim search
    //! time where runtime_options::guard_charges_search says the cost unit is nanoseconds.
    [[nodiscard]] cost_t guard_charge() const noexcept {
        cost_t charge = rt_.counters_.remat_cost;
        if (rt_.options_.guard_charges_search)
            charge += static_cast<cost_t>(rt_.counters_.victim_search_ns);
        return charge;
    }

    void diverge() noexcept {
        following_ = false;
        ++rt_.counters_.step_divergences;
        guard_.left(rt_.counters_.compute_cost);
    }

    //! The step ran to its end as recorded: the next period begins.
    void next_period() noexcept {
        prev_base_slot_ = base_slot_;
        prev_inserted_ = !inserted_.empty();
        inserted_.clear();
        // Stamps count the step's positions, not the program's calls (insertions skipped):
        // a read in the next period stamped in this one lands where it was meant to.
        base_call_ += step_.size();
        base_slot_ = next_slot_;
        pos_ = 0;
        forecast_.base_ = base_call_;
        forecast_.now_ = base_call_;
    }

    [[nodiscard]] std::uint64_t stamp(std::uint32_t next) const noexcept {
        return next == no_link ? forecast_.stamp_beyond() : forecast_.stamp_at(base_call_ + next);
    }

    //! The body of after_run; may throw std::bad_alloc (vectors growing).
    void record(const op& o) {
        inputs_.clear();
        for (std::uint32_t i = 0; i < o.n_inputs; ++i) inputs_.push_back(o.in[i].storage);
        // The storages it made: fresh outputs, then new versions.
        products_.clear();
        for (std::uint32_t i = 0; i < o.n_outputs; ++i)
            if (o.out[i].alias_input < 0 && o.out[i].storage != nullptr)
                products_.push_back(o.out[i].storage);
        for (std::uint32_t k = 0; k < o.n_versions; ++k)
            if (storage* v = rt_.exec_.version_target(k)) products_.push_back(v);
        record_event(call_sig_, result_signature(o), o.cost);
    }

    //! Records one event of the program that reads inputs_ and makes products_: a call, or a
    //! pin (a read outside any call: runtime::pin). While following, checks it against the
    //! step's next event (its call signature was checked before it ran) and stamps its
    //! storages; otherwise looks for a period (automatic detection).
    void record_event(std::uint64_t call_sig, std::uint64_t result_sig, cost_t cost) {
        const bool inserted = following_ && inserting_;
        bool follows = following_ && !inserted;
        if (follows && step_[pos_].result_sig != result_sig) {
            diverge();
            follows = false;
        }
        const auto inputs = static_cast<std::uint32_t>(inputs_.size());
        const auto slots = static_cast<std::uint32_t>(inputs + products_.size());
        const std::uint64_t first = next_slot_;
        const step_call* expected = follows ? &step_[pos_] : nullptr;
        if (follows && expected->slots != slots) {
            diverge();
            follows = false;
            expected = nullptr;
        }

        // Links, checked against the step's while following.
        for (std::uint32_t i = 0; i < inputs; ++i) {
            storage& s = *inputs_[i];
            const std::uint64_t last = s.last_slot;
            hist_prev_.push_back(last);
            s.last_slot = first + i;
            if (!follows) continue;
            const std::uint32_t link = step_link(last);
            if (link != prev_[expected->first_slot + i]) {
                diverge();
                follows = false;
                continue;
            }
            // A storage from the previous period, read for the first time in this one: the
            // step's slot where it was last read learns its next read (not where insertions
            // in that period shifted its slots).
            if (link == no_link && !prev_inserted_ && last != none && last >= prev_base_slot_ &&
                last - prev_base_slot_ < next_.size()) {
                std::uint32_t& next = next_[static_cast<std::size_t>(last - prev_base_slot_)];
                if (next == no_link) next = static_cast<std::uint32_t>(step_.size() + pos_);
            }
        }
        for (std::size_t j = 0; j < products_.size(); ++j) {
            products_[j]->last_slot = first + inputs + j;
            hist_prev_.push_back(none);
        }

        // Stamps: the call that reads each storage next, or none known.
        if (follows) {
            for (std::uint32_t i = 0; i < inputs; ++i)
                inputs_[i]->use_stamp = stamp(next_[expected->first_slot + i]);
            for (std::size_t j = 0; j < products_.size(); ++j)
                products_[j]->use_stamp = stamp(next_[expected->first_slot + inputs + j]);
            ++rt_.counters_.forecast_calls;
        } else if (inserted) { // what it read is still read where the step reads it
            for (storage* p : products_) p->use_stamp = 0;
        } else {
            for (storage* in : inputs_) in->use_stamp = 0;
            for (storage* p : products_) p->use_stamp = 0;
        }

        append(call_sig, result_sig, cost, first, inputs, slots);
        if (inserted) {
            const std::uint64_t before =
                inserted_.empty() ? 0 : inserted_.back().slots_before + inserted_.back().slots;
            inserted_.push_back({first, before, inputs, slots});
            ++rt_.counters_.step_insertions;
        }
        next_slot_ += slots;
        ++next_call_;
        if (follows) {
            step_[pos_].lowest_cost = std::min(step_[pos_].lowest_cost, cost);
            ++pos_;
            forecast_.now_ = base_call_ + pos_;
        } else if (!following_ && !marks_seen_ && rt_.options_.steps == step_learning::automatic) {
            find_period();
        }
        if (hist_.size() >= 2 * limit()) compact();
    }

    //! The step's slot where a storage last appeared (a link of the step), from the global
    //! slot `last` of its last appearance: no_link before this period (or never); through
    //! an insertion that read it, where it was before; foreign_link where an insertion made
    //! it; otherwise its slot with the insertions before it skipped.
    [[nodiscard]] std::uint32_t step_link(std::uint64_t last) const noexcept {
        for (;;) {
            if (last == none || last < base_slot_) return no_link;
            // the last insertion that begins at or before `last`
            const auto after = std::upper_bound(
                inserted_.begin(), inserted_.end(), last,
                [](std::uint64_t v, const inserted_event& e) { return v < e.first_slot; });
            if (after == inserted_.begin()) return static_cast<std::uint32_t>(last - base_slot_);
            const inserted_event& e = *(after - 1);
            if (last >= e.first_slot + e.slots)
                return static_cast<std::uint32_t>(last - base_slot_ - e.slots_before - e.slots);
            if (last - e.first_slot >= e.inputs || last < hist_slot0_) return foreign_link;
            last = hist_prev_[static_cast<std::size_t>(last - hist_slot0_)];
        }
    }

    void append(std::uint64_t call_sig, std::uint64_t result_sig, cost_t cost, std::uint64_t first,
                std::uint32_t inputs, std::uint32_t slots) {
        if (hist_.empty()) {
            hist_call0_ = next_call_;
            hist_slot0_ = first;
            hist_hash_.assign(1, 0);
        }
        hist_.push_back({call_sig, result_sig, cost, first, inputs, slots});
        const std::uint64_t full = full_signature(call_sig, result_sig);
        hist_hash_.push_back(hist_hash_.back() * hash_base + full);
        if (rt_.options_.steps != step_learning::automatic || marks_seen_) {
            hist_same_.push_back(none);
            return;
        }
        if (same_table_.empty()) same_table_.assign(same_table_size, {0, none});
        auto& entry = same_table_[full >> 52]; // 4096 entries: the top 12 bits
        hist_same_.push_back(entry.first == full ? entry.second : none);
        entry = {full, next_call_};
    }

    static std::uint64_t full_signature(std::uint64_t call_sig, std::uint64_t result_sig) noexcept {
        return mix(call_sig, result_sig);
    }

    //! Rolling hash of the history's calls [a, b).
    std::uint64_t range_hash(std::size_t a, std::size_t b) {
        const std::size_t n = b - a;
        if (pow_.empty()) pow_.push_back(1);
        while (pow_.size() <= n) pow_.push_back(pow_.back() * hash_base);
        return hist_hash_[b] - hist_hash_[a] * pow_[n];
    }

    //! Automatic detection: is the last call the end of a repeated period?
    void find_period() {
        const std::size_t n = hist_.size() - 1;
        std::uint64_t q_abs = hist_same_[n];
        for (int tries = 0; tries < candidates && q_abs != none && q_abs >= hist_call0_; ++tries) {
            const auto q = static_cast<std::size_t>(q_abs - hist_call0_);
            const std::size_t p = n - q;
            if (p > limit()) break;
            const std::size_t m = std::min(p, std::max(min_match, p / 8));
            if (q + 1 >= m && range_hash(q + 1 - m, q + 1) == range_hash(n + 1 - m, n + 1)) {
                end_period(false);
                adopt(q + 1, n + 1);
                begin_period();
                return;
            }
            q_abs = hist_same_[q];
        }
    }

    void adopt_guarded(std::size_t a, std::size_t b) noexcept {
        try {
            adopt(a, b);
        } catch (...) {
            reset();
        }
    }

    //! The history's calls [a, b) become the step to follow from the next call on.
    void adopt(std::size_t a, std::size_t b) {
        following_ = false;
        if (b <= a || b - a > limit()) return;
        const std::size_t length = b - a;
        const std::uint64_t slot0 = hist_[a].first_slot;
        const std::uint64_t slot_end = hist_[b - 1].first_slot + hist_[b - 1].slots;
        const auto slots = static_cast<std::size_t>(slot_end - slot0);
        step_.resize(length);
        prefix_.resize(length + 1);
        prev_.resize(slots);
        next_.assign(slots, no_link);
        prefix_[0] = 0;
        const std::size_t h0 = static_cast<std::size_t>(slot0 - hist_slot0_);
        for (std::size_t i = 0; i < length; ++i) {
            const recorded_call& c = hist_[a + i];
            const auto rel = static_cast<std::uint32_t>(c.first_slot - slot0);
            step_[i] = {c.call_sig, c.result_sig, c.cost, rel, c.slots};
            prefix_[i + 1] = prefix_[i] + c.cost;
            for (std::uint32_t k = 0; k < c.slots; ++k) {
                const std::uint64_t link = hist_prev_[h0 + rel + k];
                const std::uint32_t p = link != none && link >= slot0
                                            ? static_cast<std::uint32_t>(link - slot0)
                                            : no_link;
                prev_[rel + k] = p;
                if (p != no_link) next_[p] = static_cast<std::uint32_t>(i);
            }
        }
        if (++epoch_ >= step_forecast::epoch_limit) epoch_ = 1;
        forecast_.prefix_ = prefix_.data();
        forecast_.length_ = static_cast<std::uint32_t>(length);
        forecast_.epoch_ = epoch_;
        following_ = true;
        inserting_ = false;
        inserted_.clear();
        prev_inserted_ = false;
        pos_ = 0;
        base_call_ = next_call_;
        base_slot_ = next_slot_;
        prev_base_slot_ = slot0; // the recorded calls are the period before this one
        forecast_.base_ = base_call_;
        forecast_.now_ = base_call_;
        guard_.new_recording();
        ++rt_.counters_.steps_learned;
    }

    //! Drops the oldest calls of the history, keeping the last step_limit.
    void compact() {
        const std::size_t drop = hist_.size() - limit();
        const std::uint64_t slot0 = hist_[drop].first_slot;
        const auto slot_drop = static_cast<std::ptrdiff_t>(slot0 - hist_slot0_);
        const auto d = static_cast<std::ptrdiff_t>(drop);
        hist_.erase(hist_.begin(), hist_.begin() + d);
        hist_same_.erase(hist_same_.begin(), hist_same_.begin() + d);
        hist_hash_.erase(hist_hash_.begin(), hist_hash_.begin() + d);
        hist_prev_.erase(hist_prev_.begin(), hist_prev_.begin() + slot_drop);
        hist_call0_ += drop;
        hist_slot0_ = slot0;
    }

    //! Forgets everything recorded (the recording could not grow); learning starts again.
    void reset() noexcept {
        following_ = false;
        inserting_ = false;
        inserted_.clear();
        hist_.clear();
        hist_same_.clear();
        hist_hash_.clear();
        hist_prev_.clear();
        same_table_.clear();
        step_.clear();
        prefix_.clear();
        prev_.clear();
        next_.clear();
        mark_ = none;
    }

    using base::rt_;

    // The program's calls so far and the slots they numbered.
    std::uint64_t next_call_ = 0;
    std::uint64_t next_slot_ = 0;
    std::uint64_t call_sig_ = 0;              //!< of the call between before_call and after_run
    std::vector<storage*> inputs_, products_; //!< of the event being recorded

    // Recent history.
    std::vector<recorded_call> hist_;
    std::vector<std::uint64_t> hist_hash_; //!< prefix hashes: hist_.size() + 1 entries
    std::vector<std::uint64_t> hist_same_; //!< per call: the previous call with its signature
    std::vector<std::uint64_t> hist_prev_; //!< per slot: the global slot it links to, or none
    std::vector<std::uint64_t> pow_;       //!< hash_base^k
    std::vector<std::pair<std::uint64_t, std::uint64_t>> same_table_; //!< signature -> call
    std::uint64_t hist_call0_ = 0; //!< absolute number of hist_[0]
    std::uint64_t hist_slot0_ = 0; //!< global number of hist_[0]'s first slot
    std::uint64_t mark_ = none;    //!< absolute number of the call after the last mark
    bool marks_seen_ = false;

    // The step being followed.
    std::vector<step_call> step_;
    std::vector<cost_t> prefix_;
    std::vector<std::uint32_t> prev_, next_;
    bool following_ = false;
    //! The event running now is an insertion (expect()): no forecast, no cost ceiling.
    bool inserting_ = false;
    //! An event the program ran inside a followed period that the step does not have.
    struct inserted_event {
        std::uint64_t first_slot;   //!< global number of its first slot
        std::uint64_t slots_before; //!< slots of the period's insertions before it
        std::uint32_t inputs;
        std::uint32_t slots;
    };
    std::vector<inserted_event> inserted_; //!< this period's, in order
    bool prev_inserted_ = false;           //!< the period before had insertions
    std::size_t pos_ = 0;                  //!< position of the next call in step_
    //! The step's clock at position 0: the program's call count where the step was adopted,
    //! plus the step's length for each period followed since (insertions do not count).
    std::uint64_t base_call_ = 0;
    std::uint64_t base_slot_ = 0;      //!< global number of that call's first slot
    std::uint64_t prev_base_slot_ = 0; //!< the same for the period before, followed or recorded
    std::uint32_t epoch_ = 0;
    step_forecast forecast_;
    forecast_guard guard_;
};

} // namespace dtr::detail
