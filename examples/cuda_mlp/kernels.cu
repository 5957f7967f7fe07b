// SPDX-License-Identifier: Apache-2.0
// Kernels of the CUDA MLP example. Simple on purpose: the GEMMs (cuBLAS) dominate; what
// matters here is that every kernel is deterministic (see kernels.hpp).
#include "kernels.hpp"

#include <cfloat>

namespace mlp {
namespace {

constexpr int threads = 256;

unsigned blocks_for(std::size_t n) {
    const std::size_t b = (n + threads - 1) / threads;
    return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

__global__ void add_bias_kernel(float* z, const float* bias, int rows, int cols) {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        z[i] += bias[i % static_cast<std::size_t>(cols)];
}

__global__ void relu_kernel(float* a, const float* z, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        a[i] = z[i] > 0.0F ? z[i] : 0.0F;
}

__global__ void relu_backward_kernel(float* dz, const float* da, const float* z, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        dz[i] = z[i] > 0.0F ? da[i] : 0.0F;
}

// One thread per column; neighbouring threads read neighbouring columns (coalesced), and
// each adds its rows in order: a fixed summation order, hence reproducible bits.
__global__ void column_sums_kernel(float* out, const float* m, int rows, int cols) {
    const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= cols) return;
    float sum = 0.0F;
    for (int r = 0; r < rows; ++r) sum += m[static_cast<std::size_t>(r) * cols + c];
    out[c] = sum;
}

// One thread per row: the class count is small.
__global__ void softmax_cross_entropy_kernel(float* dlogits, float* loss, const float* logits,
                                             const int* labels, int rows, int classes,
                                             float scale) {
    const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (r >= rows) return;
    const float* x = logits + static_cast<std::size_t>(r) * classes;
    float* d = dlogits + static_cast<std::size_t>(r) * classes;
    float top = -FLT_MAX;
    for (int c = 0; c < classes; ++c) top = fmaxf(top, x[c]);
    float sum = 0.0F;
    for (int c = 0; c < classes; ++c) sum += expf(x[c] - top);
    const int label = labels[r];
    loss[r] = logf(sum) + top - x[label];
    for (int c = 0; c < classes; ++c)
        d[c] = (expf(x[c] - top) / sum - (c == label ? 1.0F : 0.0F)) * scale;
}

// One block: each thread sums a strided slice in order, then a fixed tree in shared memory.
__global__ void mean_kernel(float* out, const float* v, int n) {
    __shared__ float partial[threads];
    float sum = 0.0F;
    for (int i = static_cast<int>(threadIdx.x); i < n; i += threads) sum += v[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half)
            partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = partial[0] / static_cast<float>(n);
}

__global__ void sgd_kernel(float* w, const float* g, float lr, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
        w[i] -= lr * g[i];
}

__global__ void touch_kernel(float* out, int n) {
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
        out[i] = static_cast<float>(i);
}

} // namespace

void add_bias(float* z, const float* bias, int rows, int cols, cudaStream_t stream) {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    if (n != 0) add_bias_kernel<<<blocks_for(n), threads, 0, stream>>>(z, bias, rows, cols);
}

void relu(float* a, const float* z, std::size_t n, cudaStream_t stream) {
    if (n != 0) relu_kernel<<<blocks_for(n), threads, 0, stream>>>(a, z, n);
}

void relu_backward(float* dz, const float* da, const float* z, std::size_t n, cudaStream_t stream) {
    if (n != 0) relu_backward_kernel<<<blocks_for(n), threads, 0, stream>>>(dz, da, z, n);
}

void column_sums(float* out, const float* m, int rows, int cols, cudaStream_t stream) {
    if (cols != 0)
        column_sums_kernel<<<blocks_for(static_cast<std::size_t>(cols)), threads, 0, stream>>>(
            out, m, rows, cols);
}

void softmax_cross_entropy(float* dlogits, float* loss, const float* logits, const int* labels,
                           int rows, int classes, float scale, cudaStream_t stream) {
    if (rows != 0)
        softmax_cross_entropy_kernel<<<blocks_for(static_cast<std::size_t>(rows)), threads, 0,
                                       stream>>>(dlogits, loss, logits, labels, rows, classes,
                                                 scale);
}

void mean(float* out, const float* v, int n, cudaStream_t stream) {
    mean_kernel<<<1, threads, 0, stream>>>(out, v, n);
}

void sgd(float* w, const float* g, float lr, std::size_t n, cudaStream_t stream) {
    if (n != 0) sgd_kernel<<<blocks_for(n), threads, 0, stream>>>(w, g, lr, n);
}

void touch(float* out, int n, cudaStream_t stream) { touch_kernel<<<1, 64, 0, stream>>>(out, n); }

} // namespace mlp
