// SPDX-License-Identifier: Apache-2.0
// dtr::cuda_backend on a real device (the runner exits 77 without one): the region and its
// fragmentation, eviction and rematerialization checked bit for bit against the same program
// on host memory, lazy cost measurement, and the error paths.
//
// Operators use only the CUDA runtime and cuBLAS (no nvcc): element-wise sums and scalings
// with factors that are powers of two, so every result is one correctly rounded float
// operation and host and device agree to the bit.
#include "cuda_support.hpp"

#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using dtr::tensor;
using dtr_cuda_test::blas_guard;
using dtr_cuda_test::stream_guard;

namespace {

using device_context = dtr::op_context<dtr::cuda_backend>;

template <class Ctx>
constexpr bool on_device = std::is_same_v<std::remove_cvref_t<Ctx>, device_context>;

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// ---- operators, on host and device ---------------------------------------------------------

//! out[i] = alpha * x[i] + beta * y[i] for i < n = min(count, |x|, |y|) (floats).
struct combine_op {
    float alpha = 1, beta = 1;
    std::size_t count = static_cast<std::size_t>(-1);
    cublasHandle_t blas = nullptr;

    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto x = ctx.input(0);
        auto y = ctx.input(1);
        const std::size_t n = std::min({count, x.size() / 4, y.size() / 4});
        auto out = ctx.output(0, n * 4);
        if (n == 0) return;
        if constexpr (on_device<Ctx>) {
            const int m = static_cast<int>(n);
            DTR_TEST_CUBLAS(cublasSgeam(
                blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 1, &alpha, x.data().template as<float>(), m,
                &beta, y.data().template as<float>(), m, out.data().template as<float>(), m));
        } else {
            const auto xs = x.template as<float>();
            const auto ys = y.template as<float>();
            const auto os = out.template as<float>();
            for (std::size_t i = 0; i < n; ++i) os[i] = alpha * xs[i] + beta * ys[i];
        }
    }
};

//! `count` floats: x's first ones, then zeros (memset and memcpy on the stream).
struct extend_op {
    std::size_t count = 0;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto x = ctx.input(0);
        auto out = ctx.output(0, count * 4);
        const std::size_t kept = std::min(count * 4, x.size() / 4 * 4);
        if constexpr (on_device<Ctx>) {
            const cudaStream_t s = ctx.backend().stream();
            if (count != 0) DTR_CUDA_TRY(cudaMemsetAsync(out.data().get(), 0, count * 4, s));
            if (kept != 0)
                DTR_CUDA_TRY(cudaMemcpyAsync(out.data().get(), x.data().get(), kept,
                                             cudaMemcpyDeviceToDevice, s));
        } else {
            if (count != 0) std::memset(out.data(), 0, count * 4);
            if (kept != 0) std::memcpy(out.data(), x.data(), kept);
        }
    }
};

//! In place: io = 0.5 * io + x (first min(|io|, |x|) floats; the rest of io unchanged).
struct accumulate_op {
    cublasHandle_t blas = nullptr;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        auto io = ctx.inout(0);
        auto x = ctx.input(1);
        const std::size_t n = std::min(io.size(), x.size()) / 4;
        if (n == 0) return;
        const float half = 0.5F, one = 1.0F;
        if constexpr (on_device<Ctx>) {
            const int m = static_cast<int>(n);
            float* c = io.data().template as<float>();
            // cuBLAS geam computes in place when C is A with the same leading dimension.
            DTR_TEST_CUBLAS(cublasSgeam(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, 1, &half, c, m, &one,
                                        x.data().template as<float>(), m, c, m));
        } else {
            float* c = reinterpret_cast<float*>(io.data());
            const auto xs = x.template as<float>();
            for (std::size_t i = 0; i < n; ++i) c[i] = half * c[i] + one * xs[i];
        }
    }
};

// ---- moving values in and out --------------------------------------------------------------

template <class Runtime>
tensor upload(Runtime& rt, const std::vector<float>& values) {
    const std::size_t bytes = values.size() * 4;
    return rt.constant(bytes, [&](auto buffer) {
        if constexpr (std::is_same_v<typename Runtime::backend_type, dtr::cuda_backend>)
            rt.backend().upload(buffer.data(), values.data(), bytes);
        else if (bytes != 0)
            std::memcpy(buffer.data(), values.data(), bytes);
    });
}

//! The bits of every float of `t` (bit patterns, so that -0 and NaNs compare exactly).
template <class Runtime>
std::vector<std::uint32_t> bits_of(Runtime& rt, const tensor& t) {
    auto guard = rt.pin(t);
    std::vector<std::uint32_t> out(guard.data().size() / 4);
    if (out.empty()) return out;
    if constexpr (std::is_same_v<typename Runtime::backend_type, dtr::cuda_backend>)
        rt.backend().download(out.data(), guard.data().data(), out.size() * 4);
    else
        std::memcpy(out.data(), guard.data().data(), out.size() * 4);
    return out;
}

// ---- a random program, run identically on host and device ----------------------------------

struct program_result {
    std::vector<std::vector<std::uint32_t>> reads;
    std::uint64_t evictions = 0, remats = 0, retries = 0, offloads = 0, copy_backs = 0,
                  copies_ahead = 0;
    std::size_t peak_resident = 0, peak_physical = 0;
};

//! Generated from the seed and the tensors' sizes only, so every run executes the same
//! program whatever the backend and budget.
template <class Runtime>
program_result run_program(Runtime& rt, std::uint64_t seed, std::size_t steps,
                           cublasHandle_t blas) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::size_t lo, std::size_t hi) {
        return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
    };
    static constexpr std::size_t sizes[] = {1, 64, 300, 1024, 4000, 12000};
    static constexpr float factors[][2] = {
        {1, -1}, {0.5F, 0.5F}, {1, 0.5F}, {-0.5F, 1}, {0.5F, -1}};
    // Each live tensor with the storage lineage it views: an in-place update must not read a
    // shifted view of the storage it writes (on the device that is a race; the host's loop
    // order would hide it).
    struct named {
        tensor t;
        std::size_t lineage;
    };
    std::vector<named> live;
    std::size_t lineages = 0;
    auto any = [&]() -> const named& { return live[pick(0, live.size() - 1)]; };
    program_result r;
    for (std::size_t step = 0; step < steps; ++step) {
        const std::size_t kind = pick(0, 99);
        if (live.size() < 2 || kind < 10) {
            std::vector<float> v(sizes[pick(0, 5)]);
            for (float& f : v) f = static_cast<float>(static_cast<int>(pick(0, 100)) - 50);
            live.push_back({upload(rt, v), lineages++});
        } else if (kind < 45) {
            const auto& f = factors[pick(0, 4)];
            const std::size_t count =
                pick(0, 3) == 0 ? sizes[pick(0, 5)] : static_cast<std::size_t>(-1);
            const tensor x = any().t, y = any().t;
            live.push_back({rt.call(combine_op{f[0], f[1], count, blas}, {x, y}), lineages++});
        } else if (kind < 55) {
            const tensor x = any().t;
            live.push_back({rt.call(extend_op{sizes[pick(0, 5)]}, {x}), lineages++});
        } else if (kind < 65) {
            const named io = any(), x = any();
            if (io.lineage != x.lineage) rt.mutate(accumulate_op{blas}, {io.t, x.t}, {0});
        } else if (kind < 70) {
            const named x = any();
            const std::size_t n = x.t.size() / 4;
            const std::size_t off = n == 0 ? 0 : pick(0, n - 1);
            live.push_back({rt.view(x.t, off * 4, pick(0, n - off) * 4), x.lineage});
        } else if (kind < 82) {
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick(0, live.size() - 1)));
        } else if (kind < 95) {
            r.reads.push_back(bits_of(rt, any().t));
        } else {
            rt.evict(any().t);
        }
        if (rt.resident_bytes() > rt.budget())
            throw std::runtime_error("resident bytes exceed the budget");
        if (step % 16 == 0) rt.check_invariants();
    }
    for (const named& n : live) r.reads.push_back(bits_of(rt, n.t));
    r.evictions = rt.stats().evictions;
    r.remats = rt.stats().rematerializations;
    r.retries = rt.stats().allocation_retries;
    r.offloads = rt.stats().offloads + rt.stats().offloads_clean;
    r.copy_backs = rt.stats().copy_backs;
    r.copies_ahead = rt.stats().copies_ahead;
    r.peak_resident = rt.stats().peak_resident_bytes;
    rt.check_invariants();
    return r;
}

program_result host_reference(std::uint64_t seed, std::size_t steps) {
    dtr::runtime<dtr::host_backend> rt;
    return run_program(rt, seed, steps, nullptr);
}

//! The program on the device in a region of `region` bytes (the budget too), growing the
//! region by a quarter while a step cannot fit at all.
program_result device_run(std::uint64_t seed, std::size_t steps, std::size_t& region,
                          cudaStream_t stream, cublasHandle_t blas,
                          dtr::cuda_backend_options options = {},
                          dtr::offload_policy offload = dtr::offload_policy::off,
                          std::uint32_t offload_ahead = 0) {
    for (int attempt = 0;; ++attempt) {
        try {
            dtr::runtime<dtr::cuda_backend, dtr::heuristics::dtr_local> rt(
                {.budget = region, .offload = offload, .offload_ahead = offload_ahead},
                dtr::cuda_backend(region, stream, options));
            program_result r = run_program(rt, seed, steps, blas);
            rt.settle_costs();
            CHECK(rt.backend().measurements_in_flight() == 0);
            CHECK(rt.backend().peak_bytes() <= region);
            r.peak_physical = rt.backend().peak_bytes();
            rt.backend().layout().check_invariants();
            return r;
        } catch (const dtr::out_of_memory& e) {
            if (attempt == 30) throw;
            region += region / 4 + 4096;
        }
    }
}

} // namespace

TEST_CASE("the region: 256-byte blocks, best fit, refusals, copies") {
    stream_guard stream;
    dtr::cuda_backend b(1 << 20, stream.get());
    CHECK(b.capacity() == 1 << 20);
    CHECK(b.stream() == stream.get());
    const auto p = b.allocate(1000);
    const auto q = b.allocate(0);
    REQUIRE(p);
    REQUIRE(q);
    CHECK(p != q);
    CHECK(reinterpret_cast<std::uintptr_t>(p.get()) % 256 == 0);
    CHECK(p.get() >= b.base().get());
    CHECK(p.get() < b.base().get() + b.capacity());
    CHECK(b.used_bytes() == 1024 + 256);
    CHECK_FALSE(b.allocate(1 << 20));
    CHECK(b.refusals() == 1);

    std::vector<std::uint8_t> in(1000), out(1000, 0);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 7);
    const auto r = b.allocate(1000);
    b.upload(p, in.data(), in.size());
    b.copy(r, p, in.size());
    b.download(out.data(), r, out.size());
    CHECK(out == in);

    b.deallocate(p, 1000);
    b.deallocate(q, 0);
    b.deallocate(r, 1000);
    CHECK(b.used_bytes() == 0);
    const auto m = b.memory_info();
    REQUIRE(m);
    CHECK(m->largest_free == 1 << 20);
    CHECK(m->peak_used == 2048 + 256);
    b.layout().check_invariants();
}

TEST_CASE("fragmentation on the device: evict until a contiguous block exists, or say why not") {
    stream_guard stream;
    blas_guard blas(stream.get());
    constexpr std::size_t block = 4096; // 1024 floats
    dtr::runtime<dtr::cuda_backend, dtr::heuristics::lru> rt(
        {.budget = 4 * block}, dtr::cuda_backend(4 * block, stream.get()));
    std::vector<float> ones(1024, 1.0F);
    tensor w = upload(rt, ones);
    tensor a = rt.call(combine_op{1, 1, static_cast<std::size_t>(-1), blas.get()}, {w, w}); // 2
    tensor b =
        rt.call(combine_op{1, 0.5F, static_cast<std::size_t>(-1), blas.get()}, {w, w});      // 1.5
    tensor c = rt.call(combine_op{1, -1, static_cast<std::size_t>(-1), blas.get()}, {w, w}); // 0
    REQUIRE(rt.evict(a));
    REQUIRE(rt.evict(c));
    const auto m = rt.backend().memory_info();
    REQUIRE(m);
    CHECK(m->free == 2 * block);
    CHECK(m->largest_free == block);

    auto twice = [](device_context& ctx) {
        auto out = ctx.output(0, 2 * 4096);
        DTR_CUDA_TRY(cudaMemsetAsync(out.data().get(), 0, out.size(), ctx.backend().stream()));
    };
    {
        auto hold = rt.pin(b);
        try {
            (void)rt.call(twice, {w});
            FAIL("no out_of_memory");
        } catch (const dtr::out_of_memory& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(contains(what, "largest free block 4096 bytes"));
            CHECK(contains(what, "no contiguous block does: fragmentation"));
            CHECK(e.info().largest_free == block);
            CHECK(e.info().free_total == 2 * block);
        }
        rt.check_invariants();
    }
    tensor big = rt.call(twice, {w});
    CHECK(rt.stats().allocation_retries == 1);
    CHECK_FALSE(rt.is_resident(b));
    CHECK(bits_of(rt, big) == std::vector<std::uint32_t>(2048, 0));
    const auto as_bits = [](float f) {
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
    };
    CHECK(bits_of(rt, a) == std::vector<std::uint32_t>(1024, as_bits(2.0F)));
    CHECK(bits_of(rt, b) == std::vector<std::uint32_t>(1024, as_bits(1.5F)));
    CHECK(bits_of(rt, c) == std::vector<std::uint32_t>(1024, as_bits(0.0F)));
    CHECK(rt.backend().peak_bytes() <= 4 * block);
    rt.check_invariants();
}

TEST_CASE("random programs on the device read exactly what they read on the host") {
    stream_guard stream;
    blas_guard blas(stream.get());
    std::uint64_t remats = 0, evictions = 0, retries = 0;
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        CAPTURE(seed);
        const std::size_t steps = 120;
        const program_result reference = host_reference(seed, steps);
        std::size_t region = std::max<std::size_t>(reference.peak_resident / 2, 1 << 16);
        const program_result device = device_run(seed, steps, region, stream.get(), blas.get());
        CAPTURE(region);
        CHECK(device.reads == reference.reads);
        CHECK(device.peak_physical <= region);
        remats += device.remats;
        evictions += device.evictions;
        retries += device.retries;
    }
    MESSAGE("device programs: ", evictions, " evictions, ", remats, " rematerializations, ",
            retries, " allocation retries");
    CHECK(remats > 0);
}

TEST_CASE(
    "offload to pinned host memory on a copy stream: the device programs still read what the host "
    "reads") {
    stream_guard stream;
    blas_guard blas(stream.get());
    std::uint64_t offloads = 0, copy_backs = 0, copies_ahead = 0;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        CAPTURE(seed);
        const std::size_t steps = 120;
        const program_result reference = host_reference(seed, steps);
        std::size_t region = std::max<std::size_t>(reference.peak_resident / 2, 1 << 16);
        dtr::cuda_backend_options options;
        options.host_tier = true;
        options.tier.transfer = {.bandwidth = 25e9, .latency = 0};
        // Seeds 3, 4, 7 and 8 also copy out ahead of eviction, storages that outlived two
        // newer ones (copy_out_ahead: the compute stream does not wait for those transfers,
        // only a block's reuse does).
        const program_result device =
            device_run(seed, steps, region, stream.get(), blas.get(), options,
                       seed % 2 ? dtr::offload_policy::always : dtr::offload_policy::automatic,
                       (seed - 1) % 4 >= 2 ? 2 : 0);
        CAPTURE(region);
        CHECK(device.reads == reference.reads);
        offloads += device.offloads;
        copy_backs += device.copy_backs;
        copies_ahead += device.copies_ahead;
    }
    MESSAGE("device programs with offload: ", offloads, " offloads, ", copy_backs, " copy-backs, ",
            copies_ahead, " copies ahead");
    CHECK(offloads > 0);
    CHECK(copy_backs > 0);
    CHECK(copies_ahead > 0);
    // The tier is the backend's own: a backend without one never transfers.
    dtr::cuda_backend plain(1 << 16, stream.get());
    CHECK_FALSE(plain.has_host_tier());
    CHECK(plain.copy_stream() == nullptr);
}

TEST_CASE("few timing slots, or none, change nothing but when costs arrive") {
    stream_guard stream;
    blas_guard blas(stream.get());
    const program_result reference = host_reference(99, 150);
    for (const std::size_t slots : {std::size_t{0}, std::size_t{1}, std::size_t{4}}) {
        CAPTURE(slots);
        std::size_t region = std::max<std::size_t>(reference.peak_resident / 2, 1 << 16);
        const program_result device =
            device_run(99, 150, region, stream.get(), blas.get(), {.timing_slots = slots});
        CHECK(device.reads == reference.reads);
    }
}

TEST_CASE("costs are measured on the device, without a synchronization per operator") {
    stream_guard stream;
    blas_guard blas(stream.get());
    dtr::runtime<dtr::cuda_backend> rt(
        {}, dtr::cuda_backend(std::size_t{256} << 20, stream.get(), {.timing_slots = 8}));
    std::vector<float> big(std::size_t{16} << 20,
                           1.0F); // 64 MiB: each operator takes real device time
    tensor x = upload(rt, big);
    std::vector<tensor> outs;
    for (int i = 0; i < 20; ++i) {
        outs.push_back(rt.call(combine_op{1, 1, static_cast<std::size_t>(-1), blas.get()}, {x, x}));
        if (outs.size() > 2) outs.erase(outs.begin());
        CHECK(rt.backend().measurements_in_flight() <= 8);
    }
    const double provisional = rt.stats().compute_cost;
    rt.settle_costs();
    CHECK(rt.backend().measurements_in_flight() == 0);
    // Reading 128 MiB and writing 64 MiB takes tens of microseconds at least; enqueueing it
    // takes a few. The measured total must exceed the host's view.
    CHECK(rt.stats().compute_cost > 0);
    CHECK(rt.clock() >= provisional);
    MESSAGE("20 device operators: provisional (host) total ", provisional, " ns, measured total ",
            rt.stats().compute_cost, " ns");
}

TEST_CASE("a failed kernel launch fails its call, which leaves no trace") {
    stream_guard stream;
    dtr::runtime<dtr::cuda_backend> rt({}, dtr::cuda_backend(1 << 20, stream.get()));
    tensor x = upload(rt, std::vector<float>(256, 3.0F));
    auto bad_launch = [](device_context& ctx) {
        ctx.output(0, 1024);
        // A host function is no kernel: the launch fails and sets the last error, which is
        // all a <<<>>> launch would do too.
        void (*not_a_kernel)() = [] {};
        (void)cudaLaunchKernel(reinterpret_cast<const void*>(not_a_kernel), dim3(1), dim3(1),
                               nullptr, 0, ctx.backend().stream());
    };
    try {
        (void)rt.call(bad_launch, {x});
        FAIL("no cuda_error");
    } catch (const dtr::cuda_error& e) {
        INFO(e.what());
        CHECK(contains(e.what(), "kernel launches"));
        CHECK(e.code() != cudaSuccess);
    }
    CHECK(rt.storage_count() == 1);
    CHECK(rt.resident_bytes() == 1024);
    rt.check_invariants();
    CHECK(cudaGetLastError() == cudaSuccess);
    tensor y = rt.call(extend_op{256}, {x});
    CHECK(bits_of(rt, y) == bits_of(rt, x));
}

TEST_CASE("a region the device cannot hold is cuda_out_of_memory, and the device stays usable") {
    stream_guard stream;
    const std::size_t huge = std::size_t{1} << 50;
    try {
        dtr::cuda_backend b(huge, stream.get());
        FAIL("a 1 PiB region was reserved");
    } catch (const dtr::cuda_out_of_memory& e) {
        INFO(e.what());
        CHECK(contains(e.what(), "cannot reserve a region of"));
        CHECK(contains(e.what(), "cudaErrorMemoryAllocation"));
        CHECK(e.info().requested == huge);
        CHECK(e.code() == cudaErrorMemoryAllocation);
        const dtr::out_of_memory& base = e; // also a dtr::out_of_memory, and so a std::bad_alloc
        CHECK(dynamic_cast<const std::bad_alloc*>(&base) != nullptr);
    }
    CHECK(cudaGetLastError() == cudaSuccess);
    dtr::cuda_backend ok(1 << 20, stream.get());
    CHECK(ok.allocate(100));
}

TEST_CASE("a stream that cannot be used is refused at construction, naming the check") {
    // A stream being captured into a graph refuses queries: the backend could neither time
    // nor synchronize on it. (Global capture mode also forbids the cudaMalloc that would
    // follow, so the constructor fails either way; the query comes first.)
    stream_guard stream;
    REQUIRE(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
    try {
        dtr::cuda_backend b(1 << 20, stream.get());
        FAIL("a capturing stream was accepted");
    } catch (const dtr::cuda_error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(contains(what, "cudaStreamQuery(stream)"));
        CHECK(contains(what, "cuda.hpp:"));
        CHECK(e.code() != cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(stream.get(),
                               &graph); // the capture is invalidated: ends with an error
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    dtr::cuda_backend ok(1 << 20, stream.get()); // usable again once the capture ended
    CHECK(ok.stream() == stream.get());
}
