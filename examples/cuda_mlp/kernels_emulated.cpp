// SPDX-License-Identifier: Apache-2.0
// Host implementations of kernels.hpp, for the emulated build of the example (linked with
// tests/cuda/fake_cuda.cpp instead of CUDA): the training program, its runtime calls and
// its bit-exactness check then run on any machine. Deterministic like the kernels (fixed
// summation orders); not bit-identical to them, which nothing compares.
#include "kernels.hpp"

#include <cfloat>
#include <cmath>

namespace mlp {

void add_bias(float* z, const float* bias, int rows, int cols, cudaStream_t) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
        for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c)
            z[r * static_cast<std::size_t>(cols) + c] += bias[c];
}

void relu(float* a, const float* z, std::size_t n, cudaStream_t) {
    for (std::size_t i = 0; i < n; ++i) a[i] = z[i] > 0.0F ? z[i] : 0.0F;
}

void relu_backward(float* dz, const float* da, const float* z, std::size_t n, cudaStream_t) {
    for (std::size_t i = 0; i < n; ++i) dz[i] = z[i] > 0.0F ? da[i] : 0.0F;
}

void column_sums(float* out, const float* m, int rows, int cols, cudaStream_t) {
    for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c) {
        float sum = 0.0F;
        for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
            sum += m[r * static_cast<std::size_t>(cols) + c];
        out[c] = sum;
    }
}

void softmax_cross_entropy(float* dlogits, float* loss, const float* logits, const int* labels,
                           int rows, int classes, float scale, cudaStream_t) {
    const auto k = static_cast<std::size_t>(classes);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
        const float* x = logits + r * k;
        float* d = dlogits + r * k;
        float top = -FLT_MAX;
        for (std::size_t c = 0; c < k; ++c) top = std::fmax(top, x[c]);
        float sum = 0.0F;
        for (std::size_t c = 0; c < k; ++c) sum += std::exp(x[c] - top);
        const auto label = static_cast<std::size_t>(labels[r]);
        loss[r] = std::log(sum) + top - x[label];
        for (std::size_t c = 0; c < k; ++c)
            d[c] = (std::exp(x[c] - top) / sum - (c == label ? 1.0F : 0.0F)) * scale;
    }
}

void mean(float* out, const float* v, int n, cudaStream_t) {
    float sum = 0.0F;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) sum += v[i];
    out[0] = sum / static_cast<float>(n);
}

void sgd(float* w, const float* g, float lr, std::size_t n, cudaStream_t) {
    for (std::size_t i = 0; i < n; ++i) w[i] -= lr * g[i];
}

void touch(float* out, int n, cudaStream_t) {
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(i);
}

} // namespace mlp
