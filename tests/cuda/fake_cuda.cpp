// SPDX-License-Identifier: Apache-2.0
// An emulation, on the host, of the part of the CUDA runtime and cuBLAS that cuda_backend and
// the device tests use. Linked instead of cudart and cuBLAS, it lets test_cuda_backend.cpp run
// on any machine, so the backend's own logic (the region, the timing ring and the lazy
// hand-over of costs, copies, error mapping) is tested without a GPU. It checks nothing about
// CUDA itself: the same tests run against the real libraries on a GPU machine.
//
// The model: one device; "device" memory is host memory; streams run work at once, in order;
// an event recorded on a stream finishes after a pseudo-random number (0 to 2) of queries,
// so measurements are sometimes still running when the backend asks; cudaEventSynchronize
// finishes it. Capture mode, launch failures and allocation failures behave as the CUDA
// documentation describes for the calls the tests make.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace {

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

struct fake_stream {
    bool capturing = false;
};

struct fake_event {
    double ms = 0;
    bool recorded = false;
    bool finished = false;
    int queries_left = 0;
};

std::set<const void*> live_events;
unsigned random_state = 12345;

int next_random() {
    random_state = random_state * 1103515245U + 12345U;
    return static_cast<int>((random_state >> 16) & 0x7fff);
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

bool capturing(cudaStream_t s) {
    return s != nullptr && reinterpret_cast<fake_stream*>(s)->capturing;
}

fake_event& event(cudaEvent_t e) {
    if (live_events.count(e) == 0) {
        std::fprintf(stderr, "fake CUDA: use of a destroyed or unknown event\n");
        std::abort();
    }
    return *reinterpret_cast<fake_event*>(e);
}

constexpr std::size_t device_memory = std::size_t{1} << 40; // larger requests fail

} // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
    std::memset(prop, 0, sizeof *prop);
    std::strcpy(prop->name, "host emulation (tests/cuda/fake_cuda.cpp)");
    prop->major = 9;
    prop->totalGlobalMem = device_memory;
    return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorNotReady:
            return "cudaErrorNotReady";
        case cudaErrorInvalidDeviceFunction:
            return "cudaErrorInvalidDeviceFunction";
        case cudaErrorStreamCaptureUnsupported:
            return "cudaErrorStreamCaptureUnsupported";
        case cudaErrorStreamCaptureInvalidated:
            return "cudaErrorStreamCaptureInvalidated";
        default:
            return "cudaError (emulated)";
    }
}
const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
cudaError_t cudaGetLastError() {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
    if (bytes > device_memory) return fail(cudaErrorMemoryAllocation);
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) {
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
    // Modest, so that programs sizing a region from it stay light on the host.
    *free = *total = std::size_t{1} << 30;
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t s) {
    if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s) {
    if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
    std::memset(dst, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
    return fail(cudaErrorInvalidDeviceFunction); // no kernel is registered here
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    *s = reinterpret_cast<cudaStream_t>(new fake_stream);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete reinterpret_cast<fake_stream*>(s);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    return capturing(s) ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    return capturing(s) ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
    event(e); // streams run work at once: every recorded event has happened
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    reinterpret_cast<fake_stream*>(s)->capturing = true;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    // Only reached in the tests after an illegal query invalidated the capture.
    reinterpret_cast<fake_stream*>(s)->capturing = false;
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureInvalidated);
}
cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    auto* created = new fake_event;
    live_events.insert(created);
    *e = reinterpret_cast<cudaEvent_t>(created);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    event(e);
    live_events.erase(e);
    delete reinterpret_cast<fake_event*>(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
    fake_event& ev = event(e);
    ev = {now_ms(), true, false, next_random() % 3};
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    fake_event& ev = event(e);
    if (!ev.recorded) std::abort(); // the backend never queries an event it did not record
    if (ev.queries_left-- > 0) return cudaErrorNotReady;
    ev.finished = true;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    event(e).finished = true;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
    const fake_event& a = event(start);
    const fake_event& b = event(stop);
    if (!b.finished) return fail(cudaErrorNotReady);
    *ms = static_cast<float>(b.ms - a.ms) + 0.001F; // some device time, even for no work
    return cudaSuccess;
}

// ---- cuBLAS: handles, settings, and the routines the tests and the example use -------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
    *h = reinterpret_cast<cublasHandle_t>(new int(0));
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    delete reinterpret_cast<int*>(h);
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS (emulated)"; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t, cublasAtomicsMode_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void*, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}

//! C = alpha op(A) op(B) + beta C, column-major, summing k in order (the example's GEMMs).
cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float* alpha, const float* a, int lda,
                              const float* b, int ldb, const float* beta, float* c, int ldc) {
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    const auto at = [&](const float* x, int ld, bool transposed, int row, int col) {
        return transposed ? x[static_cast<std::size_t>(row) * static_cast<std::size_t>(ld) +
                              static_cast<std::size_t>(col)]
                          : x[static_cast<std::size_t>(col) * static_cast<std::size_t>(ld) +
                              static_cast<std::size_t>(row)];
    };
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            float sum = 0.0F;
            for (int p = 0; p < k; ++p)
                sum += at(a, lda, ta != CUBLAS_OP_N, i, p) * at(b, ldb, tb != CUBLAS_OP_N, p, j);
            float& out = c[static_cast<std::size_t>(j) * static_cast<std::size_t>(ldc) +
                           static_cast<std::size_t>(i)];
            out = *alpha * sum + (*beta == 0.0F ? 0.0F : *beta * out);
        }
    return CUBLAS_STATUS_SUCCESS;
}

//! C = alpha * A + beta * B for column vectors (n == 1, no transposes): all the tests need.
//! Element-wise, so C may be A or B (cuBLAS's in-place mode).
cublasStatus_t cublasSgeam(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           const float* alpha, const float* a, int lda, const float* beta,
                           const float* b, int ldb, float* c, int ldc) {
    if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N || n != 1 || lda < m || ldb < m || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < m; ++i) c[i] = *alpha * a[i] + *beta * b[i];
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
