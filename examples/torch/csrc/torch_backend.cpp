// SPDX-License-Identifier: Apache-2.0
#include "torch_backend.hpp"

#include "bridge_key.hpp"
#include "counting_allocator.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>

namespace dtr_torch {

void copy_bytes(void* dst, c10::Device dst_device, const void* src, c10::Device src_device,
                std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_device.is_cpu() && src_device.is_cpu()) {
        std::memcpy(dst, src, bytes);
        return;
    }
    plain_aten plain;
    const auto n = static_cast<int64_t>(bytes);
    auto d = at::from_blob(dst, {n}, at::TensorOptions().dtype(at::kByte).device(dst_device));
    auto s = at::from_blob(const_cast<void*>(src), {n},
                           at::TensorOptions().dtype(at::kByte).device(src_device));
    d.copy_(s);
}

c10::Storage torch_backend::host_storage(std::size_t bytes) const {
    const std::size_t n = std::max<std::size_t>(bytes, 1);
    if (table_->device.is_cpu())
        return c10::Storage(c10::Storage::use_byte_size_t(), n, cpu_counter().base(),
                            /*resizable=*/false);
    plain_aten plain;
    return at::empty({static_cast<int64_t>(n)},
                     at::TensorOptions().dtype(at::kByte).pinned_memory(true))
        .storage();
}

dtr::transfer_model measure_transfer(c10::Device device) {
    plain_aten plain;
    const auto host_opts = at::TensorOptions().dtype(at::kByte).pinned_memory(!device.is_cpu());
    auto best_ns = [&](int64_t n, int reps) {
        at::Tensor d = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(device));
        at::Tensor h = at::empty({n}, host_opts);
        d.fill_(1);
        h.fill_(2);
        double best = 0;
        for (int i = 0; i < reps; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            copy_bytes(h.data_ptr(), c10::kCPU, d.data_ptr(), device, static_cast<std::size_t>(n));
            copy_bytes(d.data_ptr(), device, h.data_ptr(), c10::kCPU, static_cast<std::size_t>(n));
            const double ns =
                std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                    .count() /
                2;
            if (i == 0 || ns < best) best = ns;
        }
        return best;
    };
    const int64_t large = int64_t{32} << 20;
    const double latency = best_ns(4096, 20);
    const double large_ns = best_ns(large, 3);
    dtr::transfer_model m;
    m.latency = static_cast<dtr::cost_t>(latency);
    m.bandwidth = static_cast<double>(large) / (std::max(large_ns - latency, 1.0) * 1e-9);
    return m;
}

} // namespace dtr_torch
