// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief CUDA errors as exceptions: dtr::cuda_error, dtr::cuda_out_of_memory and the
//! DTR_CUDA_TRY(call) macro that throws them naming the call, the file and the line.
//!
//! Two types because callers treat them differently. Running out of device memory is a
//! resource condition a caller may handle (a smaller region, a smaller batch); so
//! cudaErrorMemoryAllocation becomes dtr::cuda_out_of_memory, a dtr::out_of_memory and so a
//! std::bad_alloc, like every other "memory is exhausted" error of dtr. Every other CUDA error
//! (a bad stream, a failed launch, a device fault) is dtr::cuda_error, a std::runtime_error
//! carrying the cudaError_t.
//!
//! Only the CUDA runtime API header is needed (no nvcc): this compiles with the host
//! compiler and links against cudart.
#pragma once

#include <dtr/error.hpp>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace dtr {

//! @brief A CUDA runtime call failed. what() names the error, the call and where it was
//! made; code() is the cudaError_t.
class cuda_error : public std::runtime_error {
public:
    //! @brief An error with code() `code` and what() `message` (DTR_CUDA_TRY composes it).
    cuda_error(cudaError_t code, const std::string& message)
        : std::runtime_error(message), code_(code) {}
    //! @brief Returns: the CUDA error code.
    [[nodiscard]] cudaError_t code() const noexcept { return code_; }

private:
    cudaError_t code_;
};

//! @brief The device could not provide memory (cudaErrorMemoryAllocation), typically when a
//! backend reserves its region. A dtr::out_of_memory: info().requested is the size asked for
//! and info().free_total the device's free memory at the time, when known (0 otherwise).
class cuda_out_of_memory : public out_of_memory {
public:
    //! @brief An error with what() `message` and info() `d`.
    cuda_out_of_memory(std::string message, details d) : out_of_memory(std::move(message), d) {}
    //! @brief Returns: cudaErrorMemoryAllocation, always; for symmetry with cuda_error.
    [[nodiscard]] static constexpr cudaError_t code() noexcept { return cudaErrorMemoryAllocation; }
};

namespace detail {

//! "cudaErrorInvalidResourceHandle (invalid resource handle)".
inline std::string cuda_error_text(cudaError_t code) {
    std::string text = cudaGetErrorName(code);
    text += " (";
    text += cudaGetErrorString(code);
    text += ')';
    return text;
}

//! The location as DTR_EXPECTS reports it: the path below include/ (or the file name).
inline std::string cuda_error_location(const char* file, int line) {
    std::string where = file;
    if (auto pos = where.rfind("include/"); pos != std::string::npos) where.erase(0, pos + 8);
    return where + ':' + std::to_string(line);
}

//! @brief Throws the exception for `code`, returned by `call` at file:line.
//! Clears the runtime's last-error state first: a non-sticky error must not be reported
//! again by the next, unrelated, cudaGetLastError().
[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call, const char* file,
                                          int line) {
    (void)cudaGetLastError();
    std::string text = "dtr: CUDA error " + cuda_error_text(code) + " in " + call + " [" +
                       cuda_error_location(file, line) + ']';
    if (code == cudaErrorMemoryAllocation) throw cuda_out_of_memory(std::move(text), {});
    throw cuda_error(code, text);
}

} // namespace detail
} // namespace dtr

//! @brief Evaluates `call` (an expression of type cudaError_t) once and throws, unless it
//! returned cudaSuccess: dtr::cuda_out_of_memory for cudaErrorMemoryAllocation, otherwise
//! dtr::cuda_error. The message names the error, the call's text, the file and the line.
#define DTR_CUDA_TRY(call)                                                                \
    do {                                                                                  \
        const cudaError_t dtr_cuda_status_ = (call);                                      \
        if (dtr_cuda_status_ != cudaSuccess) [[unlikely]]                                 \
            ::dtr::detail::throw_cuda_error(dtr_cuda_status_, #call, __FILE__, __LINE__); \
    } while (false)
