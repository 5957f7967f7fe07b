// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Where the bridge's time goes: cumulative counters a scoped timer adds to, and a
//! per-operator profile of kernel time (rt.stats()["profile"], _dtr_torch.profile()).

#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <unordered_map>

namespace dtr_torch {

//! ns, cumulative. recipe_ns / recipe_kernel_ns: inside recipe::run (the operator the runtime
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
//! operator). While it is on, the counters above read the thread's CPU clock too (wall time
//! otherwise), so that both are comparable with the bench's step_cpu_ratio.
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
inline std::uint64_t steady_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}
inline std::uint64_t prof_now() { return prof_ops ? thread_cpu_ns() : steady_ns(); }

//! A boxed call of `op`, profiled per operator when profile_ops is on.
inline void boxed_call(const c10::OperatorHandle& op, std::vector<c10::IValue>* s,
                       bool remat = false) {
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

//! Adds its lifetime to one counter.
struct scoped_ns {
    std::uint64_t& into;
    std::uint64_t start = prof_now();
    ~scoped_ns() { into += prof_now() - start; }
};

} // namespace dtr_torch
