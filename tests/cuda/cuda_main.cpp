// SPDX-License-Identifier: Apache-2.0
// doctest runner for tests that need a CUDA device: without a usable one the executable
// exits 77, which Meson reports as SKIP (the machine cannot run them; nothing failed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdio>

int main(int argc, char** argv) {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    // A device may be listed and still unusable (no driver context, MIG without access):
    // creating the context is the real check.
    if (status == cudaSuccess && devices > 0) status = cudaFree(nullptr);
    if (status != cudaSuccess || devices == 0) {
        std::printf("SKIP: no usable CUDA device (%s)\n", status != cudaSuccess
                                                              ? cudaGetErrorString(status)
                                                              : "cudaGetDeviceCount found none");
        return 77;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        std::printf("CUDA device 0: %s, compute capability %d.%d, %zu MiB\n", prop.name, prop.major,
                    prop.minor, prop.totalGlobalMem >> 20);
    doctest::Context context(argc, argv);
    return context.run();
}
