// SPDX-License-Identifier: Apache-2.0
// RAII for the CUDA objects the device tests create (streams, cuBLAS handles), and checks
// of cuBLAS calls, which have their own status type.
#pragma once

#include <dtr/backend/cuda.hpp>

#include <cublas_v2.h>

#include <stdexcept>
#include <string>

//! Throws std::runtime_error naming the cuBLAS status and the call.
#define DTR_TEST_CUBLAS(call)                                                               \
    do {                                                                                    \
        const cublasStatus_t dtr_blas_status_ = (call);                                     \
        if (dtr_blas_status_ != CUBLAS_STATUS_SUCCESS)                                      \
            throw std::runtime_error(std::string("cuBLAS ") +                               \
                                     cublasGetStatusName(dtr_blas_status_) + " in " #call); \
    } while (false)

namespace dtr_cuda_test {

//! A non-blocking stream: nothing on the legacy default stream orders it implicitly, so the
//! tests would catch work the backend forgot to put on its stream.
class stream_guard {
public:
    stream_guard() { DTR_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    ~stream_guard() { (void)cudaStreamDestroy(stream_); }
    stream_guard(const stream_guard&) = delete;
    stream_guard& operator=(const stream_guard&) = delete;
    [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

private:
    cudaStream_t stream_ = nullptr;
};

//! A cuBLAS handle bound to one stream, host pointer mode, no atomics (reproducible).
class blas_guard {
public:
    explicit blas_guard(cudaStream_t stream) {
        DTR_TEST_CUBLAS(cublasCreate(&handle_));
        DTR_TEST_CUBLAS(cublasSetStream(handle_, stream));
        DTR_TEST_CUBLAS(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
        DTR_TEST_CUBLAS(cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
    }
    ~blas_guard() { (void)cublasDestroy(handle_); }
    blas_guard(const blas_guard&) = delete;
    blas_guard& operator=(const blas_guard&) = delete;
    [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

private:
    cublasHandle_t handle_ = nullptr;
};

} // namespace dtr_cuda_test
