// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Where the bridge's time goes: cumulative counters a scoped timer adds to, and a
//! per-operator profile of kernel time (rt.stats()["profile"], _dtr_torch.profile()).

#pragma once

#include "counting_allocator.hpp"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <ctime>
#include <string>
#include <unordered_map>

namespace dtr_torch {

//! ns, cumulative, while profiling is on (_dtr_torch.profile_ops(True); the clock reads cost
//! about as much as the rest of a small operator's path, so they are off otherwise).
//! recipe_ns / recipe_kernel_ns: inside recipe::run (the operator the runtime
//! runs: argument tensors, the kernel, adopting the outputs) on first runs, and in its kernel;
//! remat_recipe_ns / remat_kernel_ns: the same for rematerializations. kernel_ns: every kernel
//! the bridge runs (recipes, views, in-place updates of constants, eager constants).
struct profile_counters {
    std::uint64_t dispatch_ns = 0, kernel_ns = 0, promote_ns = 0, promote_bytes = 0, follow_ns = 0,
                  stack_ns = 0, runtime_call_ns = 0, wrap_ns = 0, recipe_ns = 0,
                  recipe_kernel_ns = 0, remat_recipe_ns = 0, remat_kernel_ns = 0;
};
inline profile_counters prof;

//! Per operator: calls, the calling thread's CPU ns inside its kernel, and the same two for
//! its rematerializations (off unless _dtr_torch.profile_ops(True): a clock_gettime pair per
//! operator). The counters above read the same clock, so that both are comparable with the
//! bench's step_cpu_ratio.
struct op_profile {
    std::uint64_t calls = 0, ns = 0, remats = 0, remat_ns = 0;
};
inline bool prof_ops = false;
inline std::unordered_map<std::string, op_profile> prof_by_op;

inline std::uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

//! A boxed call of `op`, profiled per operator when profile_ops is on; with `zero_scratch`, its
//! CPU allocations are zero-filled (zero_fill_scope).
inline void boxed_call(const c10::OperatorHandle& op, std::vector<c10::IValue>* s,
                       bool remat = false, bool zero_scratch = false) {
    zero_fill_scope zero{zero_scratch};
    if (!prof_ops) {
        op.callBoxed(s);
        return;
    }
    const std::uint64_t t0 = thread_cpu_ns();
    op.callBoxed(s);
    const std::uint64_t dt = thread_cpu_ns() - t0;
    const auto& schema = op.schema();
    auto& e = prof_by_op[schema.name() +
                         (schema.overload_name().empty() ? "" : "." + schema.overload_name())];
    ++e.calls;
    e.ns += dt;
    if (remat) {
        ++e.remats;
        e.remat_ns += dt;
    }
}

//! Adds its lifetime to one counter while profiling is on.
struct scoped_ns {
    explicit scoped_ns(std::uint64_t& counter) : into(prof_ops ? &counter : nullptr) {
        if (into != nullptr) start = thread_cpu_ns();
    }
    ~scoped_ns() {
        if (into != nullptr) *into += thread_cpu_ns() - start;
    }
    scoped_ns(const scoped_ns&) = delete;
    scoped_ns& operator=(const scoped_ns&) = delete;

private:
    std::uint64_t* into;
    std::uint64_t start = 0;
};

} // namespace dtr_torch
