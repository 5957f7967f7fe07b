// SPDX-License-Identifier: Apache-2.0
// Random programs for the property test: random DAGs of deterministic byte operators
// (multi-output, views, in-place updates, data-dependent sizes, releases, reads, each read
// after a prefetch hint), run against a runtime by an interpreter that records every value
// read.
//
// The programs also keep pin guards alive across later steps: read guards on any tensor,
// and write guards on fresh constants. Guarded tensors are then mutated (the guard must
// keep showing, and keep resident, the version it was taken on), released, evicted and
// read around; the bytes seen through every guard are checked against what they were when
// it was taken (or last written) and recorded like any other read. A call reading a constant
// under a live write guard must be refused with dtr::logic_error, changing nothing.
//
// On a backend that injects faults (dtr::fault_injecting_backend; with a host tier, into the
// transfers too), a step that fails with
// dtr::injected_fault or dtr::out_of_memory is retried: a few times with faults, then with
// injection stopped for that step, then (out_of_memory only) with the budget lifted. The
// runtime's invariants are checked after every failed attempt, after every step that failed,
// and after every step or every few steps (the caller's invariant_period).
//
// The program is generated while it runs, from a seeded RNG and from tensor sizes only.
// Sizes are themselves deterministic values, so every run of one seed executes the same
// program, whatever the budget, heuristic, release policy or injected faults.
#pragma once

#include "byte_ops.hpp"

#include <dtr/backend/fault_injecting.hpp>
#include <dtr/runtime.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace dtr_test {

//! What one run of a program observed.
struct program_trace {
    std::vector<std::vector<std::uint8_t>> reads; //!< every value read, in order
    std::vector<std::size_t> sizes;               //!< every output size, in order
    std::size_t peak_resident = 0;                //!< runtime's peak resident bytes
    std::size_t backend_peak = 0;                 //!< bytes the backend really held at most
    std::size_t floor = 0;                        //!< largest footprint one step needs
    std::size_t ooms = 0;                         //!< out_of_memory thrown (and recovered)
    std::size_t budget_lifts = 0;                 //!< of which recovered only by lifting the budget
    std::uint64_t evictions = 0, remats = 0, banishments = 0;
    std::uint64_t offloads = 0, copy_backs = 0; //!< offload (runtime_options::offload)
    std::uint64_t copies_ahead = 0;             //!< runtime_options::offload_ahead
    std::uint64_t prefetches = 0;               //!< copy-backs started by runtime::prefetch
    std::uint64_t in_place_reuses = 0;          //!< runtime_options::in_place
    // Pin guards.
    std::uint64_t guards_taken = 0;    //!< read and write guards taken
    std::uint64_t guard_reads = 0;     //!< reads through a guard taken earlier
    std::uint64_t guard_mutations = 0; //!< mutations of a tensor under a live read guard
    std::uint64_t write_guard_rejections =
        0; //!< calls refused for reading a write-guarded constant
    // Faults.
    std::uint64_t allocation_faults = 0; //!< allocations the backend was made to refuse
    std::uint64_t execution_faults = 0;  //!< executions the backend was made to throw from
    std::uint64_t copy_out_faults = 0;   //!< out-copies to the host tier made to throw
    std::uint64_t copy_in_faults = 0;    //!< copy-backs from the host tier made to throw
    std::uint64_t faults_caught = 0;     //!< dtr::injected_fault that reached a step
    std::uint64_t recoveries = 0;        //!< steps that failed, then succeeded when retried
    std::uint64_t faults_suspended = 0;  //!< steps that needed injection stopped to finish
};

//! Whether a runtime's backend injects faults (dtr::fault_injecting_backend's controls).
template <class Runtime>
concept fault_injecting_runtime = requires(Runtime& rt) {
    rt.backend().faults();
    rt.backend().set_enabled(true);
    rt.backend().options();
};

//! Interprets one random program on one runtime.
template <class Runtime>
class program_runner {
public:
    //! @param invariant_period check the runtime's invariants after every step (1) or every
    //! that many steps; after a step that failed and was retried they are checked always.
    program_runner(Runtime& rt, std::uint64_t seed, std::size_t steps,
                   std::size_t invariant_period = 1)
        : rt_(rt),
          rng_(seed),
          steps_(steps),
          invariant_period_(std::max<std::size_t>(invariant_period, 1)) {}

    program_trace run() {
        for (std::size_t step = 0; step < steps_; ++step) {
            const int kind = pick(0, 99);
            if (live_.size() < 2 || kind < 7)
                make_constant();
            else if (kind < 32)
                call_mix();
            else if (kind < 41)
                call_multi();
            else if (kind < 46)
                call_view_op();
            else if (kind < 50)
                metadata_view();
            else if (kind < 59)
                call_mutate();
            else if (kind < 71)
                release();
            else if (kind < 85)
                read_value();
            else if (kind < 88)
                explicit_evict();
            else if (kind < 91)
                take_read_guard();
            else if (kind < 93)
                take_write_guard();
            else if (kind < 95)
                mutate_guarded();
            else if (kind < 96)
                call_on_write_guarded();
            else if (kind < 98)
                read_through_guards();
            else
                release_guard();
            check_budget();
            if (step % invariant_period_ == 0 || step_failed_) rt_.check_invariants();
            step_failed_ = false;
        }
        // Read through the guards still alive and drop them (a written constant joins the
        // live tensors), read everything still alive, then drop it all: nothing may leak.
        read_through_guards();
        read_guards_.clear();
        for (held_write& w : write_guards_) {
            live_.push_back(w.guard.handle());
            w.guard.reset();
        }
        write_guards_.clear();
        rt_.check_invariants();
        for (std::size_t i = 0; i < live_.size(); ++i)
            guarded([&] { trace_.reads.push_back(read(rt_, live_[i])); });
        live_.clear();
        rt_.check_invariants();
        if (rt_.storage_count() != 0 || rt_.operator_count() != 0 || rt_.resident_bytes() != 0 ||
            rt_.backend().used_bytes() != 0 || rt_.stats().host_bytes != 0) {
            std::ostringstream why;
            why << "leak at end: " << rt_.storage_count() << " storages, " << rt_.operator_count()
                << " recipes, " << rt_.resident_bytes() << " bytes resident, "
                << rt_.backend().used_bytes() << " bytes held by the backend, "
                << rt_.stats().host_bytes << " bytes in the host tier";
            throw std::runtime_error(why.str());
        }
        trace_.peak_resident = rt_.stats().peak_resident_bytes;
        trace_.backend_peak = rt_.backend().peak_bytes();
        trace_.evictions = rt_.stats().evictions;
        trace_.in_place_reuses = rt_.stats().in_place_reuses;
        trace_.remats = rt_.stats().rematerializations;
        trace_.banishments = rt_.stats().banishments;
        trace_.offloads = rt_.stats().offloads + rt_.stats().offloads_clean;
        trace_.copy_backs = rt_.stats().copy_backs;
        trace_.copies_ahead = rt_.stats().copies_ahead;
        trace_.prefetches = rt_.stats().prefetches;
        if constexpr (fault_injecting_runtime<Runtime>) {
            trace_.allocation_faults = rt_.backend().faults().allocation_faults;
            trace_.execution_faults = rt_.backend().faults().execution_faults();
            trace_.copy_out_faults = rt_.backend().faults().copy_out_faults;
            trace_.copy_in_faults = rt_.backend().faults().copy_in_faults;
        }
        return std::move(trace_);
    }

private:
    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    std::size_t pick_size(std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
    }
    const dtr::tensor& any_live() { return live_[pick_size(0, live_.size() - 1)]; }
    double cost() { return static_cast<double>(pick(1, 100)); }

    //! Attempts with faults before injection stops for the step.
    static constexpr int faulty_attempts = 4;

    bool faults_active() {
        if constexpr (fault_injecting_runtime<Runtime>) {
            const dtr::fault_options& o = rt_.backend().options();
            return rt_.backend().enabled() &&
                   (o.allocation_fault_rate > 0 || o.execution_fault_rate > 0 ||
                    o.transfer_fault_rate > 0);
        } else {
            return false;
        }
    }
    void set_faults(bool on) {
        if constexpr (fault_injecting_runtime<Runtime>)
            rt_.backend().set_enabled(on);
        else
            (void)on;
    }

    // Runs `step`, retrying it after an injected fault or an out_of_memory: the runtime must
    // be consistent after each failure and nothing computed may be lost. After
    // `faulty_attempts` failures injection stops until the step is done; an out_of_memory
    // without injection (a budget below what the step needs) lifts the budget, once.
    template <class Step>
    void guarded(Step&& step) {
        bool suspended = false, lifted = false, failed = false;
        for (int attempt = 0;; ++attempt) {
            try {
                step();
                break;
            } catch (const dtr::injected_fault&) {
                ++trace_.faults_caught;
            } catch (const dtr::out_of_memory&) {
                ++trace_.ooms;
                if (!faults_active()) {
                    if (lifted) {
                        if (suspended) set_faults(true);
                        throw;
                    }
                    rt_.check_invariants();
                    rt_.set_budget(dtr::unlimited);
                    ++trace_.budget_lifts;
                    lifted = true;
                }
            }
            failed = true;
            rt_.check_invariants();
            if (attempt + 1 >= faulty_attempts && faults_active()) {
                set_faults(false);
                suspended = true;
                ++trace_.faults_suspended;
            }
        }
        if (failed) {
            ++trace_.recoveries;
            step_failed_ = true;
        }
        if (suspended) set_faults(true);
    }

    void check_budget() {
        if (rt_.resident_bytes() > rt_.budget())
            throw std::runtime_error("resident bytes exceed the budget");
    }

    std::size_t footprint(std::initializer_list<std::size_t> extra) {
        std::size_t sum = constant_bytes_ + guarded_bytes_;
        for (std::size_t e : extra) sum += e;
        return sum;
    }
    void note_floor(std::size_t bytes) { trace_.floor = std::max(trace_.floor, bytes); }
    std::size_t storage_bytes_of(const dtr::tensor& t) {
        // Conservative: a view's whole storage may be pinned; the view size is a lower bound.
        return t.size() + t.offset() + 64;
    }

    void make_constant() {
        const std::size_t bytes = pick_size(1, 48);
        const auto seed = static_cast<std::uint8_t>(pick(0, 255));
        guarded([&] { live_.push_back(rt_.constant(bytes, fill_with(seed))); });
        constant_bytes_ += bytes;
    }

    void call_mix() {
        const std::size_t arity = pick_size(1, 3);
        std::vector<dtr::tensor> in;
        std::size_t in_bytes = 0;
        for (std::size_t i = 0; i < arity; ++i) {
            in.push_back(any_live());
            in_bytes += storage_bytes_of(in.back());
        }
        const bool data_dependent = pick(0, 4) == 0;
        const std::size_t bytes = pick_size(1, 64);
        const double c = cost();
        dtr::tensor out;
        if (data_dependent) {
            // Output size read from the data while the operator runs.
            guarded([&] {
                out = rt_.call(
                    [](auto& ctx) {
                        auto first = ctx.input(0);
                        const std::size_t n = first.size() == 0 ? 1 : u8(first.data()[0]) % 40 + 1;
                        mix_op{n}(ctx);
                    },
                    in, {.cost = c});
            });
        } else {
            guarded([&] { out = rt_.call(mix_op{bytes}, in, {.cost = c}); });
        }
        note_floor(footprint({in_bytes, out.size()}));
        trace_.sizes.push_back(out.size());
        live_.push_back(std::move(out));
    }

    // Two or three outputs; sometimes the first is a view of input 0.
    void call_multi() {
        const dtr::tensor a = any_live(), b = any_live();
        const std::size_t outputs = pick_size(2, 3);
        const std::size_t s1 = pick_size(1, 40), s2 = pick_size(1, 40);
        const bool first_is_view = pick(0, 2) == 0 && a.size() > 0;
        const std::size_t off = first_is_view ? pick_size(0, a.size() - 1) : 0;
        const std::size_t len = first_is_view ? pick_size(0, a.size() - off) : 0;
        const double c = cost();
        auto op = [=](auto& ctx) {
            if (first_is_view)
                ctx.alias(0, 0, off, len);
            else
                mix_op{s1}.write(ctx, 0, 1);
            mix_op{s2}.write(ctx, 1, 2);
            if (ctx.num_outputs() == 3) mix_op{s1 + s2}.write(ctx, 2, 3);
        };
        std::vector<dtr::tensor> outs;
        const std::array<dtr::tensor, 2> ins{a, b};
        guarded([&] {
            if (outputs == 2) {
                auto pair = rt_.template call<2>(op, ins, {.cost = c});
                outs.assign(pair.begin(), pair.end());
            } else {
                outs = rt_.call_n(3, op, ins, {.cost = c});
            }
        });
        note_floor(footprint({storage_bytes_of(a), storage_bytes_of(b), s1, s2, s1 + s2}));
        for (auto& t : outs) {
            trace_.sizes.push_back(t.size());
            if (pick(0, 3) != 0) live_.push_back(std::move(t)); // some outputs die at once
        }
    }

    // A view produced by an operator (no memory).
    void call_view_op() {
        const dtr::tensor a = any_live();
        if (a.size() == 0) return;
        const std::size_t off = pick_size(0, a.size() - 1);
        const std::size_t len = pick_size(0, a.size() - off);
        const double c = cost() / 10;
        dtr::tensor v;
        guarded(
            [&] { v = rt_.call([=](auto& ctx) { ctx.alias(0, 0, off, len); }, {a}, {.cost = c}); });
        note_floor(footprint({storage_bytes_of(a)}));
        live_.push_back(std::move(v));
    }

    void metadata_view() {
        const dtr::tensor a = any_live();
        const std::size_t off = a.size() == 0 ? 0 : pick_size(0, a.size() - 1);
        const std::size_t len = pick_size(0, a.size() - off);
        live_.push_back(rt_.view(a, off, len));
    }

    // In-place update of one or two inputs, reading a third.
    void call_mutate() { mutate_inputs({any_live(), any_live(), any_live()}); }

    // In-place update of in[0] (and sometimes in[1]), reading in[2].
    void mutate_inputs(std::vector<dtr::tensor> in) {
        std::vector<std::uint32_t> mutated{0};
        if (pick(0, 2) == 0) mutated.push_back(1);
        const auto salt = static_cast<std::uint8_t>(pick(1, 255));
        const double c = cost();
        std::size_t bytes = 0;
        for (auto& t : in) bytes += 2 * storage_bytes_of(t);
        auto op = [salt, mutated](auto& ctx) {
            if constexpr (std::is_pointer_v<
                              typename std::remove_reference_t<decltype(ctx)>::pointer>) {
                auto src = ctx.input(2);
                for (std::uint32_t m : mutated) {
                    auto io = ctx.inout(m);
                    for (std::size_t i = 0; i < io.size(); ++i) {
                        const std::uint8_t extra =
                            src.size() ? u8(src.data()[(i * 3) % src.size()]) : 0;
                        io.data()[i] = std::byte(
                            static_cast<std::uint8_t>(u8(io.data()[i]) * 3 + extra + salt));
                    }
                }
            }
        };
        // A guard whose own tensor is mutated: the handle moves on, the guard must not.
        bool across_guard = false;
        for (std::uint32_t m : mutated)
            for (const held_read& g : read_guards_) across_guard |= (g.guard.handle() == in[m]);
        guarded([&] { rt_.mutate(op, in, mutated, c); });
        if (across_guard) ++trace_.guard_mutations;
        verify_guards("a mutation");
        note_floor(footprint({bytes}));
    }

    // ---- pin guards -----------------------------------------------------------------------

    struct held_read {
        typename Runtime::read_guard guard;
        std::vector<std::uint8_t> bytes; //!< what the guard showed when taken
        std::size_t pinned;              //!< estimate of the bytes it keeps resident
    };
    struct held_write {
        typename Runtime::write_guard guard;
        std::vector<std::uint8_t> bytes; //!< what was last written through it
    };

    template <class Guard>
    static std::vector<std::uint8_t> bytes_of(const Guard& g) {
        const auto span = g.span();
        std::vector<std::uint8_t> v(span.size());
        if (!span.empty()) std::memcpy(v.data(), span.data(), span.size());
        return v;
    }

    //! Every guard must still show what it showed when taken (storages never change) or, for
    //! a write guard, what was last written through it.
    void verify_guards(const char* after) {
        for (const held_read& g : read_guards_)
            if (bytes_of(g.guard) != g.bytes)
                throw std::runtime_error(
                    std::string("the bytes under a read guard changed after ") + after);
        for (const held_write& w : write_guards_)
            if (bytes_of(w.guard) != w.bytes)
                throw std::runtime_error(
                    std::string("the bytes under a write guard changed after ") + after);
    }

    void take_read_guard() {
        if (read_guards_.size() >= 3) return read_value();
        const dtr::tensor& t = any_live();
        guarded([&] {
            auto g = rt_.pin(t);
            std::vector<std::uint8_t> bytes = bytes_of(g);
            trace_.reads.push_back(bytes);
            read_guards_.push_back({std::move(g), std::move(bytes), storage_bytes_of(t)});
        });
        ++trace_.guards_taken;
        guarded_bytes_ += read_guards_.back().pinned;
        note_floor(footprint({}));
    }

    // A fresh constant written through a write guard that then stays alive.
    void take_write_guard() {
        if (write_guards_.size() >= 2) return make_constant();
        const std::size_t bytes = pick_size(1, 32);
        const auto seed = static_cast<std::uint8_t>(pick(0, 255));
        guarded([&] {
            auto w = rt_.pin_for_write(rt_.constant(bytes));
            for (std::size_t i = 0; i < bytes; ++i)
                w.span()[i] = std::byte(static_cast<std::uint8_t>(seed * 7 + i * 13));
            std::vector<std::uint8_t> written = bytes_of(w);
            write_guards_.push_back({std::move(w), std::move(written)});
        });
        ++trace_.guards_taken;
        constant_bytes_ += bytes;
        note_floor(footprint({}));
    }

    // Mutates the tensor of a live read guard: the guard keeps the old version.
    void mutate_guarded() {
        if (read_guards_.empty()) return call_mutate();
        const dtr::tensor t = read_guards_[pick_size(0, read_guards_.size() - 1)].guard.handle();
        mutate_inputs({t, any_live(), any_live()});
    }

    // A call or a mutation reading a constant under a live write guard: refused, and nothing
    // changes (no storage, no record, the guard's bytes intact).
    void call_on_write_guarded() {
        if (write_guards_.empty()) return take_write_guard();
        const held_write& w = write_guards_[pick_size(0, write_guards_.size() - 1)];
        const dtr::tensor guarded_constant = w.guard.handle();
        const dtr::tensor other = any_live();
        const int how = pick(0, 2);
        const std::size_t storages = rt_.storage_count(), ops = rt_.operator_count();
        bool refused = false;
        guarded([&] {
            try {
                if (how == 0) {
                    (void)rt_.call(mix_op{8}, {other, guarded_constant}, {.cost = 1});
                } else {
                    // Mutating the constant itself, or another tensor while reading it.
                    const std::array<dtr::tensor, 2> in = how == 1
                                                              ? std::array{guarded_constant, other}
                                                              : std::array{other, guarded_constant};
                    rt_.mutate([](auto&) {}, in, {0}, 1);
                }
            } catch (const dtr::logic_error& e) {
                if (std::string(e.what()).find("write guard") == std::string::npos) throw;
                refused = true;
            }
        });
        if (!refused)
            throw std::runtime_error(
                "a call reading a constant under a live write guard was not refused");
        if (rt_.storage_count() != storages || rt_.operator_count() != ops)
            throw std::runtime_error("a refused call left storages or records behind");
        ++trace_.write_guard_rejections;
        verify_guards("a refused call");
    }

    // Reads through every guard (recorded like any read), and sometimes writes a new value
    // through a write guard: no operator has read its constant, so that is still allowed.
    void read_through_guards() {
        verify_guards("later steps");
        for (const held_read& g : read_guards_) trace_.reads.push_back(g.bytes);
        for (const held_write& w : write_guards_) trace_.reads.push_back(w.bytes);
        trace_.guard_reads += read_guards_.size() + write_guards_.size();
        if (!write_guards_.empty() && pick(0, 1) == 0) {
            held_write& w = write_guards_[pick_size(0, write_guards_.size() - 1)];
            const auto salt = static_cast<std::uint8_t>(pick(1, 255));
            for (std::size_t i = 0; i < w.bytes.size(); ++i) {
                w.bytes[i] = static_cast<std::uint8_t>(w.bytes[i] + salt);
                w.guard.span()[i] = std::byte(w.bytes[i]);
            }
        }
    }

    // Drops a guard. A write guard's constant usually joins the live tensors.
    void release_guard() {
        const std::size_t n = read_guards_.size() + write_guards_.size();
        if (n == 0) return take_read_guard();
        verify_guards("later steps");
        const std::size_t i = pick_size(0, n - 1);
        if (i < read_guards_.size()) {
            guarded_bytes_ -= read_guards_[i].pinned;
            read_guards_.erase(read_guards_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            const auto j = static_cast<std::ptrdiff_t>(i - read_guards_.size());
            if (pick(0, 3) != 0)
                live_.push_back(write_guards_[static_cast<std::size_t>(j)].guard.handle());
            write_guards_.erase(write_guards_.begin() + j);
        }
    }

    void release() {
        const std::size_t i = pick_size(0, live_.size() - 1);
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    void read_value() {
        const dtr::tensor& t = any_live();
        // A hint first (it starts the copy-back of an offloaded storage, if the budget and
        // the backend have room now; nothing otherwise): it must change no value.
        guarded([&] { (void)rt_.prefetch(t); });
        guarded([&] { trace_.reads.push_back(read(rt_, t)); });
        note_floor(footprint({storage_bytes_of(t)}));
    }

    // Evicts a live tensor, sometimes a guarded one (refused while the guard pins its
    // version; after a mutation its handle names another, evictable one).
    void explicit_evict() {
        if (!read_guards_.empty() && pick(0, 2) == 0) {
            (void)rt_.evict(read_guards_[pick_size(0, read_guards_.size() - 1)].guard.handle());
            verify_guards("an eviction");
        } else {
            (void)rt_.evict(any_live());
        }
    }

    Runtime& rt_;
    std::mt19937_64 rng_;
    std::size_t steps_;
    std::size_t invariant_period_;
    bool step_failed_ = false; //!< the current step failed at least once
    std::vector<dtr::tensor> live_;
    std::size_t constant_bytes_ = 0;
    std::size_t guarded_bytes_ = 0; //!< estimate of what the read guards keep resident
    std::vector<held_read> read_guards_;
    std::vector<held_write> write_guards_;
    program_trace trace_;
};

} // namespace dtr_test
