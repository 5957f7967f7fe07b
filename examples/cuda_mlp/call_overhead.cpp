// SPDX-License-Identifier: Apache-2.0
// call_overhead: what runtime::call costs on top of a kernel launch, on a GPU. The kernel is
// trivial (one block writing 256 bytes), so the device is never the bottleneck and the
// figures are host time per call: launch alone, then through dtr::runtime<cuda_backend> with
// measured (lazy event) costs, with supplied costs, with event timing off, and with a budget
// that makes every call evict.
//
// Usage: call_overhead [calls]   (default 20000). Exits 77 without a usable GPU.
#include "kernels.hpp"

#include <dtr/backend/cuda.hpp>
#include <dtr/runtime.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

namespace {

using context = dtr::op_context<dtr::cuda_backend>;
constexpr int floats = 64; // 256 bytes: one block of the region

//! Host nanoseconds per iteration of `body`, including the final synchronization.
template <class Body>
double per_call(int calls, cudaStream_t stream, Body&& body) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body(i);
    DTR_CUDA_TRY(cudaStreamSynchronize(stream));
    const auto ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    return ns / calls;
}

struct scenario {
    const char* name;
    std::size_t budget; //!< bytes; the region is the same size
    std::size_t keep;   //!< outputs kept alive (a ring): with a tight budget, each call evicts
    std::optional<dtr::cost_t> cost; //!< supplied cost, or measured
    std::size_t timing_slots;
};

double run(const scenario& s, int calls, cudaStream_t stream, dtr::counters& stats) {
    dtr::runtime<dtr::cuda_backend> rt(
        {.budget = s.budget},
        dtr::cuda_backend(s.budget, stream, {.timing_slots = s.timing_slots}));
    const dtr::tensor seed = rt.constant(floats * sizeof(float), [&](auto b) {
        DTR_CUDA_TRY(cudaMemsetAsync(b.data().get(), 0, b.size(), stream));
    });
    auto touch = [](context& ctx) {
        float* out = ctx.output(0, floats * sizeof(float)).data().as<float>();
        mlp::touch(out, floats, ctx.backend().stream());
    };
    std::vector<dtr::tensor> ring(s.keep);
    const double ns = per_call(calls, stream, [&](int i) {
        ring[static_cast<std::size_t>(i) % ring.size()] = rt.call(touch, {seed}, {.cost = s.cost});
    });
    rt.settle_costs();
    stats = rt.stats();
    return ns;
}

} // namespace

int main(int argc, char** argv) try {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
        cudaFree(nullptr) != cudaSuccess) {
        std::printf("call_overhead: no usable CUDA device; skipping\n");
        return 77;
    }
    const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
    cudaStream_t stream = nullptr;
    DTR_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float* raw = nullptr;
    DTR_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&raw), floats * sizeof(float)));

    // Warm-up: module loading and the first launches are not what we measure.
    (void)per_call(1000, stream, [&](int) { mlp::touch(raw, floats, stream); });
    const double launch = per_call(calls, stream, [&](int) { mlp::touch(raw, floats, stream); });
    std::printf("%d calls of a trivial kernel (one block, 256 bytes)\n", calls);
    std::printf("%-48s %9.0f ns/call\n", "kernel launch alone", launch);

    constexpr std::size_t block = 256;
    const scenario scenarios[] = {
        {"runtime::call, measured costs (lazy events)", std::size_t{1} << 26, 8, std::nullopt, 256},
        {"runtime::call, supplied costs", std::size_t{1} << 26, 8, 1.0, 256},
        {"runtime::call, event timing off", std::size_t{1} << 26, 8, std::nullopt, 0},
        {"runtime::call, every call evicts (measured)", 9 * block, 16, std::nullopt, 256},
        {"runtime::call, every call evicts (supplied)", 9 * block, 16, 1.0, 256},
    };
    for (const scenario& s : scenarios) {
        dtr::counters stats{};
        (void)run(s, 1000, stream, stats); // warm-up
        const double ns = run(s, calls, stream, stats);
        std::printf(
            "%-48s %9.0f ns/call  (+%.0f over the launch; %llu evictions, %llu victim searches)\n",
            s.name, ns, ns - launch, static_cast<unsigned long long>(stats.evictions),
            static_cast<unsigned long long>(stats.victim_searches));
    }
    DTR_CUDA_TRY(cudaFree(raw));
    DTR_CUDA_TRY(cudaStreamDestroy(stream));
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "call_overhead: %s\n", e.what());
    return 1;
}
