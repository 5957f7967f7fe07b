// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Rematerialization: securing an operator's inputs (pinning the resident ones,
//! recomputing the evicted ones) with an explicit work stack instead of recursion.
#pragma once

#include <dtr/detail/dependency_graph.hpp>
#include <dtr/error.hpp>
#include <dtr/options.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtr::detail {

//! @brief The restore stack: one frame per operator waiting for its inputs.
//!
//! A chain of a million evicted storages needs a million frames in a vector, no deep C++
//! stack. Each frame first pins the inputs already resident (they cannot be lost while the
//! others are recomputed), then restores the evicted ones in order, pinning each as it
//! becomes resident: the DTR simulator's order, so replays make the same choices. Under
//! restore_pins::yield_when_full, frames below the top give their pins up when an
//! allocation finds nothing else to evict (yield_pins); such a frame re-validates when it
//! is on top again, restoring what it lost. Under restore_pins::planned, a restore first
//! walks the evicted ancestors it will recompute (plan) and counts how often their recipes
//! read each of them; a storage it recomputed is held until the last of those reads, so
//! that it is not evicted before a sibling frame reads it again.
//!
//! @tparam Rt the runtime: its options, counters, pins, execution and release queue.
template <class Rt, class Backend, class Meta>
class rematerializer : collaborator<Rt, Backend, Meta> {
public:
    using base = collaborator<Rt, Backend, Meta>;
    using typename base::edge;
    using typename base::op;
    using typename base::storage;

    explicit rematerializer(Rt& rt) noexcept : base(rt) {}

    //! @brief Pins every input of `root`, recomputing the evicted ones (and theirs, to any
    //! depth). On failure every pin taken is released.
    void secure_inputs(op& root);

    //! @brief Makes `target` resident, recomputing it (and what it needs) if evicted.
    void make_resident(storage* target) {
        if (target->offloaded()) rt_.offload_.copy_back(target);
        if (target->is_resident) {
            rt_.offload_.wait_for(target); // a copy-back still in flight
            return;
        }
        op& o = recipe_of(*target);
        rt_.touch_inputs(o);
        secure_inputs(o);
        rematerialize(o);
    }

    //! @brief Called when an allocation finds nothing evictable. Under restore_pins::planned
    //! the running restore first lets go of every storage it holds for reads still to come;
    //! failing that (and under yield_when_full), the frames below the top unpin their inputs.
    //! Returns: whether anything was released (the caller may evict again).
    bool yield_pins() noexcept;

private:
    //! One step of the work stack: an operator waiting for its inputs.
    struct frame {
        op* record;
        std::uint32_t next_input; //!< inputs before it are pinned
        bool started;             //!< the inputs resident on arrival are pinned
        bool yielded = false;     //!< its pins were given up (yield_pins): re-validate
        std::uint8_t yields = 0;  //!< how often it gave them up
    };

    //! Recomputes `o`, whose inputs are pinned, and unpins them (also on failure).
    void rematerialize(op& o) {
        rt_.exec_.run(o, true, std::nullopt);
        if (planning_) {
            // What the plan's later recipes read of o's products stays; what o was the last
            // planned reader of may go.
            o.for_each_product([&](storage& p) {
                if (reads_of(p) > 0) hold(p);
            });
            rt_.unpin_inputs(o);
            for (std::uint32_t i = 0; i < o.n_inputs; ++i) {
                storage& s = *o.in[i].storage;
                if (reads_of(s) > 0 && --s.plan_reads == 0) unhold(s);
            }
        } else {
            rt_.unpin_inputs(o);
        }
        rt_.release_.recheck_inputs(o);
    }

    // ---- restore_pins::planned ----------------------------------------------------------
    //! Counts the reads the recipes of `root`'s evicted ancestors make of each storage they
    //! recompute (each recipe once).
    void plan(op& root);
    //! Lets every hold go and forgets the plan.
    void end_plan() noexcept {
        unhold_all();
        planning_ = false;
    }
    void unhold_all() noexcept {
        while (!held_.empty()) unhold(*held_.back());
    }
    std::uint32_t reads_of(const storage& s) const noexcept {
        return s.plan_epoch == epoch_ ? s.plan_reads : 0;
    }
    void hold(storage& s) noexcept {
        if (s.restore_held || !s.is_resident) return;
        rt_.pin(&s);
        s.restore_held = true;
        s.hold_slot = static_cast<std::uint32_t>(held_.size());
        held_.push_back(&s);
    }
    void unhold(storage& s) noexcept {
        if (!s.restore_held) return;
        storage* last = held_.back();
        held_[s.hold_slot] = last;
        last->hold_slot = s.hold_slot;
        held_.pop_back();
        s.restore_held = false;
        rt_.unpin(&s); // queued for release if nothing else holds it
    }

    static op& recipe_of(const storage& s) {
        // Only storages with a recipe are ever evicted.
        if (s.producer == nullptr)
            throw logic_error("dtr: internal error: storage #" + std::to_string(s.sid) +
                              " is evicted without a recipe");
        return *s.producer;
    }

    void pin_input(edge& e) noexcept {
        rt_.pin(e.storage);
        e.pinned = true;
    }

    using base::rt_;
    std::vector<frame> frames_; //!< kept for its capacity
    // restore_pins::planned: the running restore's plan.
    std::vector<op*> plan_stack_; //!< recipes still to walk (kept for its capacity)
    std::vector<storage*> held_;  //!< storages held for reads still to come
    std::uint32_t epoch_ = 0;     //!< tells this restore's counts from stale ones
    bool planning_ = false;       //!< a plan is in force
};

template <class Rt, class Backend, class Meta>
void rematerializer<Rt, Backend, Meta>::plan(op& root) {
    if (++epoch_ == 0) { // wrapped: no count may look current
        for (storage& s : rt_.graph_.storages) s.plan_epoch = 0;
        for (op& o : rt_.graph_.ops) o.plan_epoch = 0;
        epoch_ = 1;
    }
    planning_ = true;
    plan_stack_.clear();
    // Only what the restore recomputes is counted: an input resident now is pinned by its
    // frame when that frame starts (holding it from here would pin the whole restore's
    // inputs at once, which is what the simulator's order does), and an offloaded one comes
    // back by transfer. Each recipe is walked once, however many of its products are evicted.
    const auto recomputed = [](const storage& s) { return !s.is_resident && !s.offloaded(); };
    const auto reach = [&](storage& s) {
        op& producer = recipe_of(s);
        if (producer.plan_epoch == epoch_) return;
        producer.plan_epoch = epoch_;
        plan_stack_.push_back(&producer);
    };
    for (std::uint32_t i = 0; i < root.n_inputs; ++i)
        if (recomputed(*root.in[i].storage)) reach(*root.in[i].storage);
    while (!plan_stack_.empty()) {
        op& o = *plan_stack_.back();
        plan_stack_.pop_back();
        for (std::uint32_t i = 0; i < o.n_inputs; ++i) {
            storage& s = *o.in[i].storage;
            if (!recomputed(s)) continue;
            if (s.plan_epoch != epoch_) {
                s.plan_epoch = epoch_;
                s.plan_reads = 0;
            }
            ++s.plan_reads;
            reach(s);
        }
    }
}

template <class Rt, class Backend, class Meta>
void rematerializer<Rt, Backend, Meta>::secure_inputs(op& root) {
    // Most calls find every input resident: pin them, as the first frame would, without
    // setting up the work stack.
    bool all_resident = true;
    for (std::uint32_t i = 0; i < root.n_inputs && all_resident; ++i)
        all_resident = root.in[i].storage->is_resident;
    if (all_resident) {
        for (std::uint32_t i = 0; i < root.n_inputs; ++i)
            if (!root.in[i].pinned) pin_input(root.in[i]);
        return;
    }
    frames_.clear();
    frames_.push_back({&root, 0, false});
    try {
        if (rt_.options_.restore == restore_pins::planned) plan(root);
        for (;;) {
            frame& f = frames_.back();
            op* o = f.record;
            if (f.yielded) { // its pins were given up while frames above it ran
                f.yielded = false;
                f.started = false;
                f.next_input = 0;
            }
            if (!f.started) {
                f.started = true;
                for (std::uint32_t i = 0; i < o->n_inputs; ++i) {
                    edge& e = o->in[i];
                    if (!e.pinned && e.storage->is_resident) pin_input(e);
                }
                // Offloaded inputs next, all their copy-backs issued together, so that they
                // overlap the recomputations below (offload; nothing without a host tier).
                for (std::uint32_t i = 0; i < o->n_inputs; ++i) {
                    edge& e = o->in[i];
                    if (!e.pinned && e.storage->offloaded()) {
                        rt_.offload_.copy_back(e.storage);
                        pin_input(e);
                    }
                }
            }
            while (f.next_input < o->n_inputs && o->in[f.next_input].pinned) ++f.next_input;
            if (f.next_input < o->n_inputs) {
                edge& e = o->in[f.next_input];
                if (e.storage->is_resident) { // restored meanwhile, e.g. as a sibling
                    pin_input(e);
                } else if (e.storage->offloaded()) { // offloaded meanwhile
                    rt_.offload_.copy_back(e.storage);
                    pin_input(e);
                } else {
                    op& producer = recipe_of(*e.storage);
                    rt_.touch_inputs(producer);
                    frames_.push_back({&producer, 0, false}); // invalidates f
                }
                continue;
            }
            if (o == &root) break; // the caller runs it
            rematerialize(*o);
            frames_.pop_back();
        }
    } catch (...) {
        for (const frame& f : frames_) rt_.unpin_inputs(*f.record);
        frames_.clear();
        end_plan();
        throw;
    }
    frames_.clear();
    end_plan();
}

template <class Rt, class Backend, class Meta>
bool rematerializer<Rt, Backend, Meta>::yield_pins() noexcept {
    // A planned restore's holds are the softest pins: they go before any frame's.
    if (!held_.empty()) {
        unhold_all();
        ++rt_.counters_.hold_releases;
        return true;
    }
    // Only frames below the top: the top one's inputs are those of the operator being
    // recomputed. A frame yields at most max_yields times, so a restore that cannot fit
    // ends in out_of_memory instead of going round for ever.
    if (rt_.options_.restore == restore_pins::hold || frames_.size() < 2) return false;
    constexpr std::uint8_t max_yields = 2;
    bool released = false;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
        frame& f = frames_[i];
        if (f.yields >= max_yields) continue;
        bool had_pins = false;
        for (std::uint32_t k = 0; k < f.record->n_inputs && !had_pins; ++k)
            had_pins = f.record->in[k].pinned;
        if (!had_pins) continue;
        rt_.unpin_inputs(*f.record);
        f.yielded = true;
        ++f.yields;
        released = true;
    }
    if (released) ++rt_.counters_.pin_yields;
    return released;
}

} // namespace dtr::detail
