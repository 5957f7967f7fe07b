// SPDX-License-Identifier: Apache-2.0
// The demo: trains a small multi-layer perceptron with real SGD on synthetic data through
// dtr::runtime on the host backend, first without a budget, then under budgets from 100%
// of that run's peak down to the lowest that works. For each budget it prints the peak
// resident bytes, the recomputations, the wall time relative to the unconstrained run and
// the final loss, which must be bit-identical at every budget (and so must the weights).
//
// With --offload GBPS the host backend gets a second memory tier (dtr::offloading_backend)
// whose transfers the runtime models at GBPS GB/s plus 5 us each on one copy stream beside
// compute: victims may be copied out instead of dropped (runtime_options::offload), storages
// that outlived 8 newer ones are copied out while the stream is idle (offload_ahead), the
// parameters may leave the device when nothing else can, and what the next layer will read is
// prefetched, so copy-backs are charged half against recomputation (copy_back_charge): by the
// program's own hints (runtime::prefetch; --prefetch hints, the default), or, with --prefetch
// forecast, by the runtime from the step it has recorded, the program giving no hints
// (runtime_options::prefetch_ahead: the next 8 calls' reads, from the second step on). The
// copies are real memcpys, so bit-identity checks the transfers as well; the time they would
// take is the runtime clock's modelled wait, shown apart from the wall time.
//
// Each SGD step starts with runtime::begin_step(): from the second step on, the default policy
// knows when each storage is read next (docs/design.md, "Steps"); --heuristic names another.
//
//   train_mlp [--steps N] [--depth D] [--width W] [--batch B]
//             [--heuristic default|dtr_eqclass|dtr_local|lru|largest] [--offload GBPS]
//             [--prefetch hints|forecast]
#include <dtr/heuristic/dtr_eqclass.hpp>
#include <dtr/heuristic/dtr_local.hpp>
#include <dtr/heuristic/largest.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using ctx_t = dtr::op_context<dtr::host_backend>;

// ---- kernels: plain C++, single-threaded, fixed summation order (deterministic) ---------

//! Y[n,m] = X[n,k] * W[k,m] + b[m]
struct linear_fwd {
    std::size_t n, k, m;
    void operator()(ctx_t& ctx) const {
        auto x = ctx.input(0).as<float>(), w = ctx.input(1).as<float>(),
             b = ctx.input(2).as<float>();
        auto y = ctx.output(0, n * m * sizeof(float)).as<float>();
        for (std::size_t i = 0; i < n; ++i) {
            float* row = &y[i * m];
            for (std::size_t j = 0; j < m; ++j) row[j] = b[j];
            for (std::size_t p = 0; p < k; ++p) {
                const float xv = x[i * k + p];
                const float* wrow = &w[p * m];
                for (std::size_t j = 0; j < m; ++j) row[j] += xv * wrow[j];
            }
        }
    }
};

//! Y = max(X, 0)
struct relu_fwd {
    void operator()(ctx_t& ctx) const {
        auto x = ctx.input(0).as<float>();
        auto y = ctx.output(0, x.size() * sizeof(float)).as<float>();
        for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
    }
};

//! Softmax cross-entropy over logits[n,c] with integer labels: outputs the mean loss (one
//! float) and dlogits[n,c] = (softmax - onehot) / n.
struct softmax_xent {
    std::size_t n, c;
    void operator()(ctx_t& ctx) const {
        auto logits = ctx.input(0).as<float>();
        auto labels = ctx.input(1).as<std::int32_t>();
        auto loss = ctx.output(0, sizeof(float)).as<float>();
        auto grad = ctx.output(1, n * c * sizeof(float)).as<float>();
        double total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const float* row = &logits[i * c];
            float mx = row[0];
            for (std::size_t j = 1; j < c; ++j) mx = std::max(mx, row[j]);
            double sum = 0;
            for (std::size_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j] - mx));
            const auto label = static_cast<std::size_t>(labels[i]);
            total += std::log(sum) - static_cast<double>(row[label] - mx);
            for (std::size_t j = 0; j < c; ++j) {
                const double p = std::exp(static_cast<double>(row[j] - mx)) / sum;
                grad[i * c + j] =
                    static_cast<float>((p - (j == label ? 1.0 : 0.0)) / static_cast<double>(n));
            }
        }
        loss[0] = static_cast<float>(total / static_cast<double>(n));
    }
};

//! dX[n,k] = dY[n,m] * W[k,m]^T, masked by the ReLU that produced X (mask = X > 0).
struct linear_bwd_input {
    std::size_t n, k, m;
    bool relu_mask;
    void operator()(ctx_t& ctx) const {
        auto dy = ctx.input(0).as<float>(), w = ctx.input(1).as<float>(),
             x = ctx.input(2).as<float>();
        auto dx = ctx.output(0, n * k * sizeof(float)).as<float>();
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t p = 0; p < k; ++p) {
                float acc = 0;
                for (std::size_t j = 0; j < m; ++j) acc += dy[i * m + j] * w[p * m + j];
                dx[i * k + p] = (!relu_mask || x[i * k + p] > 0) ? acc : 0.0f;
            }
    }
};

//! dW[k,m] = X[n,k]^T * dY[n,m], db[m] = sum_i dY[i,m] (two outputs).
struct linear_bwd_params {
    std::size_t n, k, m;
    void operator()(ctx_t& ctx) const {
        auto x = ctx.input(0).as<float>(), dy = ctx.input(1).as<float>();
        auto dw = ctx.output(0, k * m * sizeof(float)).as<float>();
        auto db = ctx.output(1, m * sizeof(float)).as<float>();
        std::fill(dw.begin(), dw.end(), 0.0f);
        std::fill(db.begin(), db.end(), 0.0f);
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t p = 0; p < k; ++p) {
                const float xv = x[i * k + p];
                float* drow = &dw[p * m];
                for (std::size_t j = 0; j < m; ++j) drow[j] += xv * dy[i * m + j];
            }
            for (std::size_t j = 0; j < m; ++j) db[j] += dy[i * m + j];
        }
    }
};

//! In place: P -= lr * G.
struct sgd_update {
    float lr;
    void operator()(ctx_t& ctx) const {
        auto p = ctx.inout(0).as<float>();
        auto g = ctx.input(1).as<float>();
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * g[i];
    }
};

// ---- the model ---------------------------------------------------------------------------

struct config {
    std::size_t steps = 10, depth = 8, width = 64, batch = 1024, inputs = 32, classes = 10;
    std::string heuristic = "default";
    double offload_gbps = 0; //!< > 0: a host tier at this bandwidth (GB/s)
    //! With a tier: the program hints what it reads next (runtime::prefetch), or the runtime
    //! prefetches from its forecast (runtime_options::prefetch_ahead) and the program does not.
    bool prefetch_by_forecast = false;
};

struct result {
    float loss = 0;
    std::uint64_t weights_hash = 0;
    std::size_t peak = 0;
    std::uint64_t remats = 0, evictions = 0;
    std::uint64_t offloads = 0, copy_backs = 0; //!< with --offload
    double transfer_wait_ms = 0;                //!< the clock's modelled waits for transfers
    double seconds = 0;
    bool out_of_memory = false;
    std::string error;
};

std::vector<float> random_floats(std::mt19937& rng, std::size_t count, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(count);
    for (float& f : v) f = normal(rng);
    return v;
}

template <class Runtime>
dtr::tensor upload(Runtime& rt, std::span<const std::byte> bytes) {
    return rt.constant(bytes.size(), [&](dtr::buffer_view<std::byte*> buf) {
        std::memcpy(buf.data(), bytes.data(), bytes.size());
    });
}

//! The runtime for one run: under --offload, with a host tier and the offload settings.
template <class Runtime>
Runtime make_runtime(const config& cfg, std::size_t budget) {
    if (cfg.offload_gbps <= 0) return Runtime({.budget = budget});
    dtr::host_backend backend;
    backend.enable_host_tier({.transfer = {.bandwidth = cfg.offload_gbps * 1e9, .latency = 5000}});
    return Runtime({.budget = budget,
                    .offload = dtr::offload_policy::automatic,
                    .offload_ahead = 8,
                    .prefetch_ahead = cfg.prefetch_by_forecast ? 8U : 0U,
                    .copy_back_charge = 0.5},
                   std::move(backend));
}

template <class Runtime>
result train(const config& cfg, std::size_t budget) {
    result r;
    Runtime rt = make_runtime<Runtime>(cfg, budget);
    std::mt19937 rng(42);
    // Synthetic task: labels from a fixed random "teacher" projection of the inputs.
    const auto data = random_floats(rng, cfg.batch * cfg.inputs, 1.0f);
    const auto teacher = random_floats(rng, cfg.inputs * cfg.classes, 1.0f);
    std::vector<std::int32_t> labels(cfg.batch);
    for (std::size_t i = 0; i < cfg.batch; ++i) {
        std::size_t best = 0;
        float best_v = -1e30f;
        for (std::size_t c = 0; c < cfg.classes; ++c) {
            float v = 0;
            for (std::size_t p = 0; p < cfg.inputs; ++p)
                v += data[i * cfg.inputs + p] * teacher[p * cfg.classes + c];
            if (v > best_v) best_v = v, best = c;
        }
        labels[i] = static_cast<std::int32_t>(best);
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
        dtr::tensor x = upload(rt, std::as_bytes(std::span(data)));
        dtr::tensor y = upload(rt, std::as_bytes(std::span(labels)));
        std::vector<std::size_t> dims{cfg.inputs};
        for (std::size_t l = 0; l < cfg.depth; ++l) dims.push_back(cfg.width);
        dims.push_back(cfg.classes);
        std::vector<dtr::tensor> w, b;
        for (std::size_t l = 0; l + 1 < dims.size(); ++l) {
            const auto wv = random_floats(rng, dims[l] * dims[l + 1],
                                          std::sqrt(2.0f / static_cast<float>(dims[l])));
            const std::vector<float> bv(dims[l + 1], 0.0f);
            w.push_back(upload(rt, std::as_bytes(std::span(wv))));
            b.push_back(upload(rt, std::as_bytes(std::span(bv))));
        }
        const std::size_t layers = w.size();
        // The program's prefetch hints (a host tier, unless the runtime prefetches itself).
        const bool hints = cfg.offload_gbps > 0 && !cfg.prefetch_by_forecast;
        for (std::size_t step = 0; step < cfg.steps; ++step) {
            rt.begin_step(); // the same place in every step: the runtime learns the step
            // Forward: keep what backward reads, as autograd would.
            std::vector<dtr::tensor> acts{x}; // input of each layer
            dtr::tensor logits;
            for (std::size_t l = 0; l < layers; ++l) {
                if (hints && l + 1 < layers) rt.prefetch(w[l + 1]); // back when layer l is done
                dtr::tensor z =
                    rt.call(linear_fwd{cfg.batch, dims[l], dims[l + 1]}, {acts.back(), w[l], b[l]});
                if (l + 1 == layers)
                    logits = z;
                else
                    acts.push_back(rt.call(relu_fwd{}, {z}));
            }
            auto [loss, dlogits] =
                rt.template call<2>(softmax_xent{cfg.batch, cfg.classes}, {logits, y});
            logits.reset();
            {
                const auto pinned = rt.pin(loss);
                r.loss = pinned.template as<float>()[0];
            }
            // Backward with the SGD update of each layer applied as soon as its gradient is
            // known (after the layer's input gradient, which reads the old weights): the
            // same arithmetic as updating after the whole backward pass, but gradients and
            // old parameter versions never pile up. Activations are released after their
            // last use, as autograd would.
            dtr::tensor dy = dlogits;
            dlogits.reset();
            for (std::size_t l = layers; l-- > 0;) {
                // The next layer's input and weights: their copy-back overlaps this layer.
                if (hints && l > 0) {
                    rt.prefetch(acts[l - 1]);
                    rt.prefetch(w[l - 1]);
                }
                auto [dw, db] = rt.template call<2>(
                    linear_bwd_params{cfg.batch, dims[l], dims[l + 1]}, {acts[l], dy});
                if (l > 0)
                    dy = rt.call(linear_bwd_input{cfg.batch, dims[l], dims[l + 1], true},
                                 {dy, w[l], acts[l]});
                acts[l].reset();
                rt.mutate(sgd_update{0.05f}, {w[l], dw}, {0});
                rt.mutate(sgd_update{0.05f}, {b[l], db}, {0});
            }
            dy.reset();
        }
        std::uint64_t h = 1469598103934665603ULL;
        for (std::size_t l = 0; l < layers; ++l)
            for (const dtr::tensor* t : {&w[l], &b[l]}) {
                const auto pinned = rt.pin(*t); // named: the pin lasts the whole loop
                for (std::byte byte : pinned.span())
                    h = (h ^ std::to_integer<std::uint64_t>(byte)) * 1099511628211ULL;
            }
        r.weights_hash = h;
    } catch (const dtr::out_of_memory& e) {
        r.out_of_memory = true;
        r.error = e.what();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.peak = rt.stats().peak_resident_bytes;
    r.remats = rt.stats().rematerializations;
    r.evictions = rt.stats().evictions;
    r.offloads = rt.stats().offloads + rt.stats().offloads_clean;
    r.copy_backs = rt.stats().copy_backs;
    r.transfer_wait_ms = rt.stats().transfer_stall / 1e6;
    return r;
}

template <class Heuristic>
int sweep(const config& cfg) {
    using runtime = dtr::runtime<dtr::host_backend, Heuristic>;
    std::printf("dtr demo: MLP %zu -> %zu x %zu -> %zu, batch %zu, %zu SGD steps, heuristic %s\n",
                cfg.inputs, cfg.depth, cfg.width, cfg.classes, cfg.batch, cfg.steps,
                Heuristic::name);
    const result base = train<runtime>(cfg, dtr::unlimited);
    std::printf("unconstrained run: peak %zu bytes, %.3f s, final loss %.9g\n", base.peak,
                base.seconds, static_cast<double>(base.loss));
    const bool offload = cfg.offload_gbps > 0;
    if (offload)
        std::printf(
            "offload: a host tier at %g GB/s (offloads and copy-backs are real copies; "
            "\"wait ms\" is the modelled time compute waits for them); prefetch %s\n",
            cfg.offload_gbps,
            cfg.prefetch_by_forecast ? "by the runtime's forecast (no hints)"
                                     : "by the program's hints");
    std::printf("\n%8s %12s %12s %10s %10s %9s %14s  %s", "budget", "budget B", "peak B",
                "evictions", "remats", "time x", "final loss", "bit-identical");
    if (offload) std::printf(" %9s %10s %8s", "offloads", "copy-backs", "wait ms");
    std::printf("\n");
    bool all_identical = true;
    int feasible = 0;
    for (int percent = 100; percent >= 5; percent -= (percent > 50 ? 10 : 5)) {
        const std::size_t budget = base.peak * static_cast<std::size_t>(percent) / 100;
        const result r = train<runtime>(cfg, budget);
        if (r.out_of_memory) {
            std::printf("%7d%% %12zu  out of memory: this is below the lowest budget that works\n",
                        percent, budget);
            std::printf("          (%s)\n", r.error.c_str());
            break;
        }
        ++feasible;
        const bool identical = std::memcmp(&r.loss, &base.loss, sizeof(float)) == 0 &&
                               r.weights_hash == base.weights_hash;
        all_identical &= identical;
        std::printf("%7d%% %12zu %12zu %10llu %10llu %9.2f %14.9g  %*s", percent, budget, r.peak,
                    static_cast<unsigned long long>(r.evictions),
                    static_cast<unsigned long long>(r.remats), r.seconds / base.seconds,
                    static_cast<double>(r.loss), offload ? -13 : 0, identical ? "yes" : "NO");
        if (offload)
            std::printf(" %9llu %10llu %8.3f", static_cast<unsigned long long>(r.offloads),
                        static_cast<unsigned long long>(r.copy_backs), r.transfer_wait_ms);
        std::printf("\n");
        if (r.peak > budget) {
            std::printf("budget exceeded: this is a bug\n");
            return 1;
        }
    }
    std::printf("\n%s\n", all_identical && feasible > 0
                              ? "final loss and weights are bit-identical at every budget that fits"
                              : "MISMATCH: results differ from the unconstrained run");
    return all_identical && feasible > 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    config cfg;
    bool prefetch_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "missing value after %s\n", arg.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--steps")
            cfg.steps = std::stoul(next());
        else if (arg == "--depth")
            cfg.depth = std::stoul(next());
        else if (arg == "--width")
            cfg.width = std::stoul(next());
        else if (arg == "--batch")
            cfg.batch = std::stoul(next());
        else if (arg == "--heuristic")
            cfg.heuristic = next();
        else if (arg == "--offload") {
            const std::string v = next();
            char* end = nullptr;
            cfg.offload_gbps = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(cfg.offload_gbps > 0) ||
                !std::isfinite(cfg.offload_gbps)) {
                std::fprintf(stderr, "--offload: GB/s must be a number > 0, not '%s'\n", v.c_str());
                return 2;
            }
        } else if (arg == "--prefetch") {
            const std::string v = next();
            if (v != "hints" && v != "forecast") {
                std::fprintf(stderr, "--prefetch: 'hints' or 'forecast', not '%s'\n", v.c_str());
                return 2;
            }
            cfg.prefetch_by_forecast = v == "forecast";
            prefetch_given = true;
        } else {
            std::fprintf(stderr,
                         "usage: train_mlp [--steps N] [--depth D] [--width W] [--batch B] "
                         "[--heuristic default|dtr_eqclass|dtr_local|lru|largest] "
                         "[--offload GBPS] [--prefetch hints|forecast]\n");
            return 2;
        }
    }
    if (prefetch_given && cfg.offload_gbps <= 0) {
        std::fprintf(stderr,
                     "--prefetch: only with --offload GBPS (without a host tier nothing "
                     "is ever copied back)\n");
        return 2;
    }
    if (cfg.heuristic == "default") return sweep<dtr::default_heuristic>(cfg);
    if (cfg.heuristic == "dtr_eqclass") return sweep<dtr::heuristics::dtr_eqclass>(cfg);
    if (cfg.heuristic == "dtr_local") return sweep<dtr::heuristics::dtr_local>(cfg);
    if (cfg.heuristic == "lru") return sweep<dtr::heuristics::lru>(cfg);
    if (cfg.heuristic == "largest") return sweep<dtr::heuristics::largest>(cfg);
    std::fprintf(stderr, "unknown heuristic '%s' (default, dtr_eqclass, dtr_local, lru, largest)\n",
                 cfg.heuristic.c_str());
    return 2;
}
