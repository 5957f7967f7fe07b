// SPDX-License-Identifier: Apache-2.0
// CUDA error mapping and the parts of cuda_backend that need no device: these run on every
// machine with the CUDA toolkit, GPU or not. Also instantiates the whole runtime over
// cuda_backend, so that a CPU-only build proves it compiles.
#include <dtr/backend/cuda.hpp>
#include <dtr/heuristic/lru.hpp>
#include <dtr/runtime.hpp>

#include <doctest/doctest.h>

#include <new>
#include <string>

// Every member of the runtime over the CUDA backend must compile with the host compiler.
template class dtr::runtime<dtr::cuda_backend>;
template class dtr::runtime<dtr::cuda_backend, dtr::heuristics::lru>;

namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

cudaError_t returns(cudaError_t e) { return e; }

} // namespace

TEST_CASE("DTR_CUDA_TRY names the error, the call, the file and the line") {
    const int line = __LINE__ + 2;
    try {
        DTR_CUDA_TRY(returns(cudaErrorInvalidValue));
        FAIL("nothing thrown");
    } catch (const dtr::cuda_error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(e.code() == cudaErrorInvalidValue);
        CHECK(contains(what, "cudaErrorInvalidValue"));
        CHECK(contains(what, "returns(cudaErrorInvalidValue)"));
        CHECK(contains(what, "test_cuda_error.cpp:" + std::to_string(line)));
    }
    CHECK_NOTHROW(DTR_CUDA_TRY(returns(cudaSuccess)));
}

TEST_CASE("running out of device memory is an out_of_memory, every other error a cuda_error") {
    CHECK_THROWS_AS(DTR_CUDA_TRY(returns(cudaErrorMemoryAllocation)), dtr::cuda_out_of_memory);
    CHECK_THROWS_AS(DTR_CUDA_TRY(returns(cudaErrorMemoryAllocation)), dtr::out_of_memory);
    CHECK_THROWS_AS(DTR_CUDA_TRY(returns(cudaErrorMemoryAllocation)), std::bad_alloc);
    CHECK_THROWS_AS(DTR_CUDA_TRY(returns(cudaErrorLaunchFailure)), dtr::cuda_error);
    CHECK_THROWS_AS(DTR_CUDA_TRY(returns(cudaErrorInvalidResourceHandle)), std::runtime_error);
    // The two families do not overlap: handlers for one never swallow the other.
    static_assert(!std::is_base_of_v<std::bad_alloc, dtr::cuda_error>);
    static_assert(!std::is_base_of_v<std::runtime_error, dtr::cuda_out_of_memory>);
    try {
        DTR_CUDA_TRY(returns(cudaErrorMemoryAllocation));
    } catch (const dtr::cuda_out_of_memory& e) {
        CHECK(contains(e.what(), "cudaErrorMemoryAllocation"));
        CHECK(e.code() == cudaErrorMemoryAllocation);
    }
}

TEST_CASE("cuda_backend refuses a region too small for one block before touching CUDA") {
    CHECK_THROWS_AS(dtr::cuda_backend(255, nullptr), dtr::logic_error);
}

TEST_CASE("without a usable device, constructing the backend is a cuda_error, not a crash") {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    (void)cudaGetLastError();
    if (status == cudaSuccess && devices > 0) {
        MESSAGE("a device is present: the device tests cover construction");
        return;
    }
    try {
        dtr::cuda_backend b(1 << 20, nullptr);
        FAIL("constructed without a device");
    } catch (const dtr::cuda_error& e) {
        INFO(e.what());
        CHECK(e.code() == status);
        CHECK(contains(e.what(), "cuda.hpp:"));
    }
}

TEST_CASE("the backend's types") {
    static_assert(dtr::backend<dtr::cuda_backend>);
    static_assert(dtr::deferred_costs<dtr::cuda_backend>);
    static_assert(dtr::reports_memory<dtr::cuda_backend>);
    static_assert(!std::is_copy_constructible_v<dtr::cuda_backend>);
    static_assert(std::is_nothrow_move_constructible_v<dtr::cuda_backend>);
    static_assert(std::is_same_v<dtr::cuda_backend::pointer, dtr::device_pointer<std::byte>>);
    CHECK(dtr::cuda_backend::alignment == 256);
}
