// SPDX-License-Identifier: Apache-2.0
// Random programs for the property test: random DAGs of deterministic byte operators
// (multi-output, views, in-place updates, data-dependent sizes, releases, reads), run
// against a runtime by an interpreter that records every value read.
//
// The program is generated while it runs, from a seeded RNG and from tensor sizes only.
// Sizes are themselves deterministic values, so every run of one seed executes the same
// program, whatever the budget, heuristic or release policy.
#pragma once

#include "byte_ops.hpp"

#include <dtr/runtime.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
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
    std::uint64_t evictions = 0, remats = 0, banishments = 0;
};

//! Interprets one random program on one runtime.
template <class Runtime>
class program_runner {
public:
    program_runner(Runtime& rt, std::uint64_t seed, std::size_t steps)
        : rt_(rt), rng_(seed), steps_(steps) {}

    program_trace run() {
        for (std::size_t step = 0; step < steps_; ++step) {
            const int kind = pick(0, 99);
            if (live_.size() < 2 || kind < 8)
                make_constant();
            else if (kind < 36)
                call_mix();
            else if (kind < 46)
                call_multi();
            else if (kind < 52)
                call_view_op();
            else if (kind < 56)
                metadata_view();
            else if (kind < 66)
                call_mutate();
            else if (kind < 80)
                release();
            else if (kind < 96)
                read_value();
            else
                explicit_evict();
            check_budget();
            if (step % 16 == 0) rt_.check_invariants();
        }
        // Read everything still alive, then drop it all: nothing may leak.
        for (std::size_t i = 0; i < live_.size(); ++i)
            guarded([&] { trace_.reads.push_back(read(rt_, live_[i])); });
        live_.clear();
        rt_.check_invariants();
        if (rt_.storage_count() != 0 || rt_.operator_count() != 0 || rt_.resident_bytes() != 0 ||
            rt_.backend().used_bytes() != 0) {
            std::ostringstream why;
            why << "leak at end: " << rt_.storage_count() << " storages, " << rt_.operator_count()
                << " recipes, " << rt_.resident_bytes() << " bytes resident, "
                << rt_.backend().used_bytes() << " bytes held by the backend";
            throw std::runtime_error(why.str());
        }
        trace_.peak_resident = rt_.stats().peak_resident_bytes;
        trace_.backend_peak = rt_.backend().peak_bytes();
        trace_.evictions = rt_.stats().evictions;
        trace_.remats = rt_.stats().rematerializations;
        trace_.banishments = rt_.stats().banishments;
        return std::move(trace_);
    }

private:
    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    std::size_t pick_size(std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
    }
    const dtr::tensor& any_live() { return live_[pick_size(0, live_.size() - 1)]; }
    double cost() { return static_cast<double>(pick(1, 100)); }

    // Runs `step`; on out_of_memory, checks the runtime, lifts the budget and runs the same
    // step again: the runtime must be consistent and nothing computed may be lost.
    template <class Step>
    void guarded(Step&& step) {
        try {
            step();
        } catch (const dtr::out_of_memory&) {
            ++trace_.ooms;
            rt_.check_invariants();
            rt_.set_budget(dtr::unlimited);
            step();
        }
    }

    void check_budget() {
        if (rt_.resident_bytes() > rt_.budget())
            throw std::runtime_error("resident bytes exceed the budget");
    }

    std::size_t footprint(std::initializer_list<std::size_t> extra) {
        std::size_t sum = constant_bytes_;
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
        guarded([&] { v = rt_.call([=](auto& ctx) { ctx.alias(0, 0, off, len); }, {a}, {.cost = c}); });
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
    void call_mutate() {
        std::vector<dtr::tensor> in{any_live(), any_live(), any_live()};
        std::vector<std::uint32_t> mutated{0};
        if (pick(0, 2) == 0) mutated.push_back(1);
        const auto salt = static_cast<std::uint8_t>(pick(1, 255));
        const double c = cost();
        std::size_t bytes = 0;
        for (auto& t : in) bytes += 2 * storage_bytes_of(t);
        auto op = [salt, mutated](auto& ctx) {
            if constexpr (std::is_pointer_v<typename std::remove_reference_t<decltype(ctx)>::pointer>) {
                auto src = ctx.input(2);
                for (std::uint32_t m : mutated) {
                    auto io = ctx.inout(m);
                    for (std::size_t i = 0; i < io.size(); ++i) {
                        const std::uint8_t extra = src.size() ? u8(src.data()[(i * 3) % src.size()]) : 0;
                        io.data()[i] = std::byte(static_cast<std::uint8_t>(u8(io.data()[i]) * 3 + extra + salt));
                    }
                }
            }
        };
        guarded([&] { rt_.mutate(op, in, mutated, c); });
        note_floor(footprint({bytes}));
    }

    void release() {
        const std::size_t i = pick_size(0, live_.size() - 1);
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    void read_value() {
        const dtr::tensor& t = any_live();
        guarded([&] { trace_.reads.push_back(read(rt_, t)); });
        note_floor(footprint({storage_bytes_of(t)}));
    }

    void explicit_evict() { rt_.evict(any_live()); }

    Runtime& rt_;
    std::mt19937_64 rng_;
    std::size_t steps_;
    std::vector<dtr::tensor> live_;
    std::size_t constant_bytes_ = 0;
    program_trace trace_;
};

} // namespace dtr_test
