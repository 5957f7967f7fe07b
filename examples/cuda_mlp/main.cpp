// SPDX-License-Identifier: Apache-2.0
// cuda_mlp: trains a multi-layer perceptron on synthetic data on a GPU, through
// dtr::runtime<dtr::cuda_backend>, at budgets from the unconstrained peak down to the lowest
// that works. Every budget must end with the same loss and the same weights, to the bit:
// rematerialization recomputes values, it never approximates them.
//
// The GEMMs are cuBLAS in its reproducible configuration: one stream, a workspace we own
// (cublasSetWorkspace, set again after cublasSetStream, which resets it), atomics not
// allowed, host pointer mode, default FP32 math. cuBLAS then gives the same bits on the same
// GPU model and toolkit run after run; CUBLAS_WORKSPACE_CONFIG matters only when one handle
// serves several streams, which we never do. Our own kernels add in fixed orders
// (kernels.hpp). Every block of the region is 256-byte aligned, so cuBLAS sees the same
// alignment, and picks the same kernels, at every budget.
//
// Usage: cuda_mlp [--steps N] [--batch B] [--input I] [--hidden H] [--layers L] [--budgets f1,f2,...]
//                 [--no-bisect] [--supplied-costs] [--quick]
//   --budgets   fractions of the unconstrained peak to try, in order, until one fails
//               (default 1.0 down to 0.1); then bisection narrows the lowest that works,
//               unless --no-bisect.
// Exits 77 when no usable GPU exists (a test harness reports SKIP), 1 when a budget's result
// differs from the unconstrained run's or when no budget tried could train.
#include "kernels.hpp"

#include <dtr/backend/cuda.hpp>
#include <dtr/runtime.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using dtr::tensor;
using context = dtr::op_context<dtr::cuda_backend>;

#define MLP_CUBLAS(call)                                                                         \
    do {                                                                                         \
        const cublasStatus_t mlp_status_ = (call);                                               \
        if (mlp_status_ != CUBLAS_STATUS_SUCCESS)                                                \
            throw std::runtime_error(std::string("cuBLAS ") + cublasGetStatusName(mlp_status_) + \
                                     " in " #call);                                              \
    } while (false)

struct config {
    int batch = 2048;
    int input = 1024;
    int hidden = 2048;
    int layers = 6; // hidden layers; the network has layers + 1 linear maps
    int classes = 16;
    int steps = 8;
    float lr = 0.05F;
    bool supplied_costs = false;
    bool bisect = true; // after the list, narrow the lowest workable budget down
    std::vector<double> fractions{1.0, 0.9,  0.8, 0.7,  0.6, 0.5,  0.45,
                                  0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1};
    //! Region of the unconstrained run: most of the free device memory, at most 16 GiB.
    std::size_t unconstrained_region = 0;

    [[nodiscard]] int width(int layer) const { // input width of linear map `layer`
        return layer == 0 ? input : hidden;
    }
    [[nodiscard]] int out_width(int layer) const { return layer == layers ? classes : hidden; }
};

// ---- the GPU context: stream, cuBLAS handle and its workspace -----------------------------

class gpu {
public:
    gpu() {
        DTR_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        MLP_CUBLAS(cublasCreate(&blas_));
        MLP_CUBLAS(cublasSetStream(blas_, stream_));
        // 32 MiB, as NVIDIA recommends for Hopper. Outside the DTR region: it is the
        // library's scratch, constant in size, and reported separately.
        DTR_CUDA_TRY(cudaMalloc(&workspace_, workspace_bytes));
        MLP_CUBLAS(cublasSetWorkspace(blas_, workspace_, workspace_bytes));
        MLP_CUBLAS(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
        MLP_CUBLAS(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
        MLP_CUBLAS(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
    }
    ~gpu() {
        (void)cudaStreamSynchronize(stream_);
        (void)cublasDestroy(blas_);
        (void)cudaFree(workspace_);
        (void)cudaStreamDestroy(stream_);
    }
    gpu(const gpu&) = delete;
    gpu& operator=(const gpu&) = delete;

    [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
    [[nodiscard]] cublasHandle_t blas() const noexcept { return blas_; }
    static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

private:
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    void* workspace_ = nullptr;
};

// ---- synthetic data -----------------------------------------------------------------------

std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

//! Uniform in [-1, 1), from the top 24 bits: exactly reproducible everywhere.
float uniform(std::uint64_t& state) {
    return static_cast<float>(static_cast<double>(splitmix(state) >> 40) / 8388608.0 - 1.0);
}

struct dataset {
    std::vector<float> x;                 // batch x input, row-major
    std::vector<int> labels;              // batch
    std::vector<std::vector<float>> w, b; // initial weights (out x in, row-major) and biases
};

//! Inputs uniform in [-1, 1); labels from a fixed random linear teacher, so the task is
//! learnable; weights uniform in +-1/sqrt(fan-in).
dataset make_data(const config& c) {
    dataset d;
    std::uint64_t state = 20210503; // the DTR paper's ICLR year and month; any seed works
    d.x.resize(static_cast<std::size_t>(c.batch) * static_cast<std::size_t>(c.input));
    for (float& v : d.x) v = uniform(state);
    std::vector<float> teacher(static_cast<std::size_t>(c.input) *
                               static_cast<std::size_t>(c.classes));
    for (float& v : teacher) v = uniform(state);
    d.labels.resize(static_cast<std::size_t>(c.batch));
    for (int r = 0; r < c.batch; ++r) {
        int best = 0;
        double best_score = -1e300;
        for (int k = 0; k < c.classes; ++k) {
            double s = 0;
            for (int i = 0; i < c.input; ++i)
                s += static_cast<double>(d.x[static_cast<std::size_t>(r) * c.input + i]) *
                     teacher[static_cast<std::size_t>(i) * c.classes + k];
            if (s > best_score) best_score = s, best = k;
        }
        d.labels[static_cast<std::size_t>(r)] = best;
    }
    for (int l = 0; l <= c.layers; ++l) {
        const float scale = 1.0F / std::sqrt(static_cast<float>(c.width(l)));
        std::vector<float> w(static_cast<std::size_t>(c.out_width(l)) *
                             static_cast<std::size_t>(c.width(l)));
        for (float& v : w) v = uniform(state) * scale;
        d.w.push_back(std::move(w));
        d.b.emplace_back(static_cast<std::size_t>(c.out_width(l)), 0.0F);
    }
    return d;
}

// ---- operators ----------------------------------------------------------------------------
// Row-major matrices are column-major transposes for cuBLAS: a row-major r x c matrix M is the
// column-major c x r matrix M^T with leading dimension c. So
//   Z = X W^T (B x out)      is  Z^T  = op_T(W) X^T   : gemm(T, N, out, B, in)
//   dW = dZ^T X (out x in)   is  dW^T = X^T op_T(dZ^T): gemm(N, T, in, out, B)
//   dX = dZ W (B x in)       is  dX^T = W^T dZ^T      : gemm(N, N, in, B, out)

const float* in_f(const context& ctx, std::size_t i) { return ctx.input(i).data().as<float>(); }

struct shapes {
    int batch, in, out;
    cublasHandle_t blas;
};

void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
    const float one = 1.0F, zero = 0.0F;
    MLP_CUBLAS(cublasSgemm(h, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc));
}

std::size_t floats(int a, int b) {
    return static_cast<std::size_t>(a) * static_cast<std::size_t>(b) * sizeof(float);
}

//! Z = X W^T + b. Inputs {X, W, b}.
auto linear_op(shapes s) {
    return [s](context& ctx) {
        float* z = ctx.output(0, floats(s.batch, s.out)).data().as<float>();
        gemm(s.blas, CUBLAS_OP_T, CUBLAS_OP_N, s.out, s.batch, s.in, in_f(ctx, 1), s.in,
             in_f(ctx, 0), s.in, z, s.out);
        mlp::add_bias(z, in_f(ctx, 2), s.batch, s.out, ctx.backend().stream());
    };
}

auto relu_op() {
    return [](context& ctx) {
        const auto z = ctx.input(0);
        float* a = ctx.output(0, z.size()).data().as<float>();
        mlp::relu(a, z.data().as<float>(), z.size() / sizeof(float), ctx.backend().stream());
    };
}

//! Outputs {dlogits, per-row loss}. Inputs {logits, labels}.
auto loss_op(int batch, int classes) {
    return [batch, classes](context& ctx) {
        float* d = ctx.output(0, floats(batch, classes)).data().as<float>();
        float* loss = ctx.output(1, floats(batch, 1)).data().as<float>();
        mlp::softmax_cross_entropy(d, loss, in_f(ctx, 0), ctx.input(1).data().as<int>(), batch,
                                   classes, 1.0F / static_cast<float>(batch),
                                   ctx.backend().stream());
    };
}

auto mean_op() {
    return [](context& ctx) {
        const auto v = ctx.input(0);
        float* out = ctx.output(0, sizeof(float)).data().as<float>();
        mlp::mean(out, v.data().as<float>(), static_cast<int>(v.size() / sizeof(float)),
                  ctx.backend().stream());
    };
}

//! dW = dZ^T X. Inputs {dZ, X}.
auto grad_w_op(shapes s) {
    return [s](context& ctx) {
        float* dw = ctx.output(0, floats(s.out, s.in)).data().as<float>();
        gemm(s.blas, CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.batch, in_f(ctx, 1), s.in,
             in_f(ctx, 0), s.out, dw, s.in);
    };
}

//! db = column sums of dZ. Inputs {dZ}.
auto grad_b_op(shapes s) {
    return [s](context& ctx) {
        float* db = ctx.output(0, floats(s.out, 1)).data().as<float>();
        mlp::column_sums(db, in_f(ctx, 0), s.batch, s.out, ctx.backend().stream());
    };
}

//! dX = dZ W. Inputs {dZ, W}.
auto grad_x_op(shapes s) {
    return [s](context& ctx) {
        float* dx = ctx.output(0, floats(s.batch, s.in)).data().as<float>();
        gemm(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, s.in, s.batch, s.out, in_f(ctx, 1), s.in,
             in_f(ctx, 0), s.out, dx, s.in);
    };
}

//! dZ = dA where Z > 0. Inputs {dA, Z}.
auto relu_backward_op() {
    return [](context& ctx) {
        const auto da = ctx.input(0);
        float* dz = ctx.output(0, da.size()).data().as<float>();
        mlp::relu_backward(dz, da.data().as<float>(), in_f(ctx, 1), da.size() / sizeof(float),
                           ctx.backend().stream());
    };
}

//! In place: param -= lr * grad. Inputs {param (mutated), grad}.
auto sgd_op(float lr) {
    return [lr](context& ctx) {
        const auto p = ctx.inout(0);
        mlp::sgd(p.data().as<float>(), in_f(ctx, 1), lr, p.size() / sizeof(float),
                 ctx.backend().stream());
    };
}

// ---- one training run ---------------------------------------------------------------------

struct result {
    bool ok = false;
    std::string failure;
    double seconds = 0;
    std::uint32_t loss_bits = 0;
    float first_loss = 0, loss = 0;
    std::uint64_t weights_hash = 0;
    std::size_t peak_physical = 0;
    std::size_t min_largest_free = 0; //!< smallest largest-free-block seen after each layer's work
    dtr::counters stats{};
};

template <class Runtime>
std::vector<std::byte> download(Runtime& rt, const tensor& t) {
    auto guard = rt.pin(t);
    std::vector<std::byte> host(guard.data().size());
    rt.backend().download(host.data(), guard.data().data(), host.size());
    return host;
}

template <class Runtime, class T>
tensor upload(Runtime& rt, const std::vector<T>& values) {
    const std::size_t bytes = values.size() * sizeof(T);
    return rt.constant(bytes, [&](dtr::buffer_view<dtr::cuda_backend::pointer> b) {
        rt.backend().upload(b.data(), values.data(), bytes);
    });
}

std::uint64_t fnv1a(std::uint64_t h, const std::vector<std::byte>& bytes) {
    for (std::byte b : bytes) h = (h ^ std::to_integer<std::uint64_t>(b)) * 0x100000001b3ULL;
    return h;
}

//! FLOPs of a GEMM, as a supplied cost in "ns" (only ratios matter to the heuristic).
double gemm_cost(const shapes& s) { return 2.0 * s.batch * s.in * s.out / 1e4; }

result train(const config& c, const dataset& data, gpu& g, std::size_t budget, std::size_t region,
             int steps) {
    result r;
    try {
        dtr::runtime<dtr::cuda_backend> rt({.budget = budget},
                                           dtr::cuda_backend(region, g.stream()));
        const int n = c.layers + 1;
        const tensor x = upload(rt, data.x);
        const tensor labels = upload(rt, data.labels);
        std::vector<tensor> w, b;
        for (int l = 0; l < n; ++l) {
            w.push_back(upload(rt, data.w[static_cast<std::size_t>(l)]));
            b.push_back(upload(rt, data.b[static_cast<std::size_t>(l)]));
        }
        auto cost = [&](double v) {
            return c.supplied_costs ? std::optional<dtr::cost_t>(v) : std::nullopt;
        };
        rt.backend().synchronize();
        r.min_largest_free = region;
        tensor loss;
        const auto start = std::chrono::steady_clock::now();
        for (int step = 0; step < steps; ++step) {
            // Forward. acts[l] is the input of linear map l; zs[l] its output.
            std::vector<tensor> acts{x}, zs;
            for (int l = 0; l < n; ++l) {
                const shapes s{c.batch, c.width(l), c.out_width(l), g.blas()};
                zs.push_back(rt.call(
                    linear_op(s),
                    {acts.back(), w[static_cast<std::size_t>(l)], b[static_cast<std::size_t>(l)]},
                    {.cost = cost(gemm_cost(s))}));
                if (l < n - 1) acts.push_back(rt.call(relu_op(), {zs.back()}, {.cost = cost(1)}));
            }
            auto sample_free = [&] {
                r.min_largest_free =
                    std::min(r.min_largest_free, rt.backend().memory_info()->largest_free);
            };
            auto [dz, rows] =
                rt.call<2>(loss_op(c.batch, c.classes), {zs.back(), labels}, {.cost = cost(1)});
            sample_free(); // the end of the forward pass: the most activations are resident
            loss = rt.call(mean_op(), {rows}, {.cost = cost(1)});
            rows.reset();
            if (step == 0) {
                std::vector<std::byte> bytes = download(rt, loss);
                std::memcpy(&r.first_loss, bytes.data(), sizeof(float));
            }
            // Backward, releasing what each layer no longer needs, as a framework would.
            for (int l = n - 1; l >= 0; --l) {
                const auto li = static_cast<std::size_t>(l);
                const shapes s{c.batch, c.width(l), c.out_width(l), g.blas()};
                tensor dw = rt.call(grad_w_op(s), {dz, acts[li]}, {.cost = cost(gemm_cost(s))});
                tensor db = rt.call(grad_b_op(s), {dz}, {.cost = cost(1)});
                tensor next;
                if (l > 0) {
                    tensor da = rt.call(grad_x_op(s), {dz, w[li]}, {.cost = cost(gemm_cost(s))});
                    next = rt.call(relu_backward_op(), {da, zs[li - 1]}, {.cost = cost(1)});
                }
                rt.mutate(sgd_op(c.lr), {w[li], dw}, {0}, cost(1));
                rt.mutate(sgd_op(c.lr), {b[li], db}, {0}, cost(1));
                zs[li].reset();
                if (l > 0) acts[li].reset();
                dz = std::move(next);
                sample_free();
            }
        }
        rt.settle_costs();
        rt.backend().synchronize();
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::vector<std::byte> loss_bytes = download(rt, loss);
        std::memcpy(&r.loss_bits, loss_bytes.data(), sizeof(float));
        std::memcpy(&r.loss, loss_bytes.data(), sizeof(float));
        std::uint64_t h = 0xcbf29ce484222325ULL;
        for (int l = 0; l < n; ++l) {
            h = fnv1a(h, download(rt, w[static_cast<std::size_t>(l)]));
            h = fnv1a(h, download(rt, b[static_cast<std::size_t>(l)]));
        }
        r.weights_hash = h;
        r.stats = rt.stats();
        r.peak_physical = rt.backend().peak_bytes();
        r.ok = true;
    } catch (const dtr::out_of_memory& e) {
        r.failure = e.what();
    }
    return r;
}

// ---- driver -------------------------------------------------------------------------------

std::vector<double> parse_list(const std::string& text) {
    std::vector<double> out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t comma = text.find(',', pos);
        out.push_back(std::stod(text.substr(pos, comma - pos)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

config parse(int argc, char** argv) {
    config c;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
            return argv[++i];
        };
        if (a == "--steps")
            c.steps = std::stoi(value());
        else if (a == "--batch")
            c.batch = std::stoi(value());
        else if (a == "--input")
            c.input = std::stoi(value());
        else if (a == "--hidden")
            c.hidden = std::stoi(value());
        else if (a == "--layers")
            c.layers = std::stoi(value());
        else if (a == "--budgets")
            c.fractions = parse_list(value());
        else if (a == "--supplied-costs")
            c.supplied_costs = true;
        else if (a == "--no-bisect")
            c.bisect = false;
        else if (a == "--quick") {
            c.batch = 1024, c.input = 512, c.hidden = 1024, c.layers = 4, c.steps = 4;
        } else
            throw std::invalid_argument("unknown argument " + a);
    }
    return c;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void print_row(const char* label, double fraction, std::size_t budget, const result& r,
               const result& base) {
    if (!r.ok) {
        std::printf("%-13s %5.1f%% %9.1f  out of memory: %s\n", label, 100 * fraction, mib(budget),
                    r.failure.c_str());
        return;
    }
    const bool same = r.loss_bits == base.loss_bits && r.weights_hash == base.weights_hash;
    std::printf(
        "%-13s %5.1f%% %9.1f %9.1f %9.1f %7llu %7llu %7llu %6.2fx  %.9g (0x%08x) %016llx %s\n",
        label, 100 * fraction, mib(budget), mib(r.peak_physical), mib(r.min_largest_free),
        static_cast<unsigned long long>(r.stats.rematerializations),
        static_cast<unsigned long long>(r.stats.evictions),
        static_cast<unsigned long long>(r.stats.allocation_retries), r.seconds / base.seconds,
        static_cast<double>(r.loss), r.loss_bits, static_cast<unsigned long long>(r.weights_hash),
        same ? "identical" : "DIFFERENT");
}

} // namespace

int main(int argc, char** argv) try {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0 || cudaFree(nullptr) != cudaSuccess) {
        std::printf(
            "cuda_mlp: no usable CUDA device (%s); skipping\n",
            status != cudaSuccess ? cudaGetErrorString(status) : "none found or no context");
        return 77;
    }
    config c = parse(argc, argv);
    std::size_t free = 0, total = 0;
    DTR_CUDA_TRY(cudaMemGetInfo(&free, &total));
    c.unconstrained_region = std::min(free / 10 * 7, std::size_t{16} << 30);
    cudaDeviceProp prop{};
    DTR_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
    std::printf(
        "cuda_mlp on %s: batch %d, %d -> %d x %d hidden -> %d classes, %d steps, SGD lr %g, %s "
        "costs\n",
        prop.name, c.batch, c.input, c.layers, c.hidden, c.classes, c.steps,
        static_cast<double>(c.lr), c.supplied_costs ? "supplied" : "measured (CUDA events, lazy)");
    std::printf("cuBLAS workspace %.0f MiB, outside the DTR region\n", mib(gpu::workspace_bytes));
    const dataset data = make_data(c);
    gpu g;

    // Warm up cuBLAS (kernel loading, heuristics) so the reference timing is fair.
    (void)train(c, data, g, dtr::unlimited, c.unconstrained_region, 1);
    const result base = train(c, data, g, dtr::unlimited, c.unconstrained_region, c.steps);
    if (!base.ok) {
        std::printf("the unconstrained run failed: %s\n", base.failure.c_str());
        return 1;
    }
    const std::size_t peak = base.peak_physical;
    std::printf("unconstrained: peak %.1f MiB in the region, loss %.6g -> %.9g, %.3f s\n\n",
                mib(peak), static_cast<double>(base.first_loss), static_cast<double>(base.loss),
                base.seconds);
    std::printf("%-13s %6s %9s %9s %9s %7s %7s %7s %7s  %-26s %-16s\n", "run", "budget", "MiB",
                "peak MiB", "free blk", "remats", "evicts", "retries", "time", "final loss",
                "weights hash");
    print_row("unconstrained", 1.0, peak, base, base);

    bool all_same = true;
    std::optional<double> lowest_ok, highest_failed;
    auto run_at = [&](double f, const char* label) {
        const auto budget = static_cast<std::size_t>(f * static_cast<double>(peak));
        const result r = train(c, data, g, budget, budget, c.steps); // region = budget: physical
        print_row(label, f, budget, r, base);
        if (r.ok) {
            all_same &= r.loss_bits == base.loss_bits && r.weights_hash == base.weights_hash;
            lowest_ok = std::min(lowest_ok.value_or(f), f);
        } else {
            highest_failed = std::max(highest_failed.value_or(f), f);
        }
        return r.ok;
    };
    for (double f : c.fractions)
        if (!run_at(f, "budget")) break;
    // Narrow the lowest workable budget down by bisection. (Fragmentation makes success not
    // quite monotonic in the budget: this finds a workable budget near the edge.)
    for (int i = 0; c.bisect && lowest_ok && highest_failed && i < 4; ++i) {
        if (*lowest_ok - *highest_failed < 0.01) break;
        run_at((*lowest_ok + *highest_failed) / 2, "bisect");
    }
    if (lowest_ok)
        std::printf("\nlowest budget that trained: %.1f%% of the unconstrained peak (%.1f MiB)%s\n",
                    100 * *lowest_ok,
                    mib(static_cast<std::size_t>(*lowest_ok * static_cast<double>(peak))),
                    highest_failed ? "" : " (no budget tried failed)");
    else
        std::printf(
            "\nno budget tried trained: the region's fragmentation needs more than the "
            "unconstrained "
            "peak (try --budgets 1.2,1.1,...)\n");
    std::printf("final loss and weights %s at every budget that trained\n",
                all_same ? "bit-identical" : "DIFFER");
    return all_same && lowest_ok ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_mlp: %s\n", e.what());
    return 1;
}
