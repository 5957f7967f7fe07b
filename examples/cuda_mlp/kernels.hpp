// SPDX-License-Identifier: Apache-2.0
// The example's own kernels (compiled by nvcc in kernels.cu), behind plain C++ declarations
// so that the training program itself is host code built by the host compiler.
//
// Every kernel is deterministic: no atomics, and every reduction adds in a fixed order, so
// the same inputs give the same bits whatever ran before (which is what lets DTR recompute
// instead of keep). Launch errors are left for the caller's cudaGetLastError (the CUDA
// backend checks after every operator).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mlp {

//! z[r][c] += bias[c] for a row-major rows x cols matrix.
void add_bias(float* z, const float* bias, int rows, int cols, cudaStream_t stream);
//! a = max(z, 0), element-wise.
void relu(float* a, const float* z, std::size_t n, cudaStream_t stream);
//! dz = z > 0 ? da : 0, element-wise.
void relu_backward(float* dz, const float* da, const float* z, std::size_t n, cudaStream_t stream);
//! out[c] = sum over r of m[r][c], rows added in order (a row-major rows x cols matrix).
void column_sums(float* out, const float* m, int rows, int cols, cudaStream_t stream);
//! Per row of logits (rows x classes): loss[r] = logsumexp - logit[label]; dlogits =
//! (softmax - onehot(label)) * scale.
void softmax_cross_entropy(float* dlogits, float* loss, const float* logits, const int* labels,
                           int rows, int classes, float scale, cudaStream_t stream);
//! out[0] = mean of v[0..n), one block adding in a fixed tree order.
void mean(float* out, const float* v, int n, cudaStream_t stream);
//! w -= lr * g, element-wise.
void sgd(float* w, const float* g, float lr, std::size_t n, cudaStream_t stream);
//! out[i] = i for i < n: one tiny block, for measuring per-call overhead.
void touch(float* out, int n, cudaStream_t stream);

} // namespace mlp
