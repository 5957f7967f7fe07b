// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The bridge's dtr::backend: runtime blocks are ATen storages. allocate() adopts the
//! storage an operator just produced instead of copying it; the host tier's copies are ATen
//! CPU storages.

#pragma once

#include "profile.hpp"

#include <dtr/backend/wall_clock.hpp>
#include <dtr/offload.hpp>
#include <dtr/runtime.hpp>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace dtr_torch {

//! State shared by the backend (which the runtime owns) and the bridge: the storages behind
//! every block, the adoption slot, and the device.
struct block_table {
    c10::Device device{c10::kCPU};
    c10::Allocator* allocator = nullptr;
    std::unordered_map<const void*, c10::Storage> blocks;
    //! Set by an operator just before it asks the runtime for an output: allocate() takes
    //! this storage (ATen's own allocation) instead of allocating and copying.
    c10::Storage pending;
    bool has_pending = false;
    std::size_t adopted = 0;
    std::size_t fresh = 0;
    //! Operator costs on the calling thread's CPU clock instead of wall time (Bridge
    //! set_cost_clock): with one torch thread the kernels run on it, and another process
    //! taking the core does not inflate a cost.
    bool cpu_costs = false;
    //! Released storages that a live recipe still reads stay resident (evictable) instead of
    //! being evicted at once (Bridge set_park_released): the runtime's
    //! dtr::dealloc_policy::keep_resident, so that the policy, not the release, decides when
    //! they go. Only outside backward (backward's released temporaries, partial gradient
    //! sums, are not read again), and only once the budget has bound (the runtime has
    //! searched for a victim): where everything fits, an eager eviction costs nothing, and a
    //! kept storage would only add pressure. bridge::update_dealloc switches the policy.
    bool park_released = false;
    //! ... and only while the policy scores with the forecast (park_released="following":
    //! a policy that reads it, in a recorded step the runtime follows with the forecast in
    //! force): parked in the steps run on the online scores, the TreeLSTM's kept forward
    //! temporaries displace what backward reads and it thrashes at 0.94, where without
    //! parking it finishes (docs/torch.md, park_released).
    bool park_only_following = false;
    bool in_backward = false;     //!< backward's releases are not parked (bridge::set_in_backward)
    bool keeping = false;         //!< the runtime's dealloc policy is keep_resident now
    std::size_t parked_total = 0; //!< releases of resident computed storages a recipe reads, kept
    //! Offload (Bridge host_memory): the host tier's capacity and transfer model, none without
    //! one. The copies are real and synchronous (transfers do not overlap).
    std::optional<dtr::host_tier_options> host_tier;
};

//! Copies `bytes` bytes between blocks on `dst_device` and `src_device` (the same device, or
//! the device and host memory): memcpy on the CPU, ATen's copy kernel where a device is
//! involved (synchronous: the bytes are there when it returns).
void copy_bytes(void* dst, c10::Device dst_device, const void* src, c10::Device src_device,
                std::size_t bytes);

class torch_backend : public dtr::host_tier_holder {
public:
    using pointer = std::byte*;
    using const_pointer = const std::byte*;

    explicit torch_backend(std::shared_ptr<block_table> table) : table_(std::move(table)) {
        if (table_->host_tier) tier_ = dtr::host_tier(*table_->host_tier);
    }

    // ---- the host tier (dtr::offloading_backend) -------------------------------------------
    //! A host copy: an ATen CPU storage (page-locked for a CUDA device, so that the copies
    //! are DMA transfers).
    struct host_copy {
        c10::Storage storage;
    };

    //! Effects: copies `bytes` device bytes at `src` into a new host storage; the block may
    //! be reused at once (the copy is synchronous). Throws when the tier is full or the host
    //! allocation fails (the runtime then drops the victim instead).
    dtr::copy_out_result<host_copy> copy_out(const_pointer src, std::size_t bytes,
                                             dtr::cost_t now) {
        if (!tier_.room(bytes)) throw std::runtime_error("dtr_torch: the host tier is full");
        host_copy h{host_storage(bytes)};
        copy_bytes(h.storage.data_ptr().get(), c10::kCPU, src, table_->device, bytes);
        tier_.hold(bytes);
        const dtr::cost_t done = tier_.issue(bytes, now);
        return {std::move(h), done};
    }
    //! Effects: copies a host copy into the device block `dst`; the copy stays valid.
    dtr::cost_t copy_in(pointer dst, const host_copy& copy, std::size_t bytes, dtr::cost_t now) {
        copy_bytes(dst, table_->device, copy.storage.data_ptr().get(), c10::kCPU, bytes);
        return tier_.issue(bytes, now);
    }
    void free_host(host_copy& copy, std::size_t bytes) noexcept {
        copy.storage = c10::Storage();
        tier_.release(bytes);
    }

    //! Effects: adopts the pending storage when one of this size is waiting, else allocates
    //! a new storage from the device's allocator. Zero-byte blocks get one byte so that
    //! every block has a distinct address.
    pointer allocate(std::size_t bytes) {
        c10::Storage s;
        block_table& t = *table_;
        if (t.has_pending && t.pending.nbytes() == bytes && t.pending.data_ptr().get() != nullptr &&
            t.blocks.find(t.pending.data_ptr().get()) == t.blocks.end()) {
            s = std::move(t.pending);
            t.has_pending = false;
            ++t.adopted;
        } else {
            s = c10::Storage(c10::Storage::use_byte_size_t(), std::max<std::size_t>(bytes, 1),
                             t.allocator, /*resizable=*/false);
            ++t.fresh;
        }
        auto* p = static_cast<pointer>(s.data_ptr().get());
        t.blocks.emplace(p, std::move(s));
        return p;
    }

    void deallocate(pointer p, std::size_t) noexcept { table_->blocks.erase(p); }

    void copy(pointer dst, const_pointer src, std::size_t bytes) {
        copy_bytes(dst, table_->device, src, table_->device, bytes);
    }

    template <class Body>
    dtr::cost_t execute(Body&& body) {
        if (!table_->cpu_costs) return dtr::wall_time_of(std::forward<Body>(body));
        const std::uint64_t t0 = thread_cpu_ns();
        body();
        return static_cast<dtr::cost_t>(thread_cpu_ns() - t0);
    }
    //! The clock execute() measures with, so that the runtime keeps the evictions an
    //! operator's outputs make out of its cost (dtr::cost_clock).
    dtr::cost_t cost_clock() const noexcept {
        return table_->cpu_costs ? static_cast<dtr::cost_t>(thread_cpu_ns())
                                 : dtr::wall_clock_now();
    }

    block_table& table() noexcept { return *table_; }

private:
    //! A host storage of `bytes` bytes (at least one): from PyTorch's CPU allocator (not the
    //! counting one: host copies are outside the measured device-side peak), page-locked for a
    //! CUDA device so that the copies are DMA transfers.
    c10::Storage host_storage(std::size_t bytes) const;

    std::shared_ptr<block_table> table_;
};

static_assert(dtr::backend<torch_backend>);
static_assert(dtr::offloading_backend<torch_backend>);
static_assert(dtr::cost_clock<torch_backend>);

using context_t = dtr::op_context<torch_backend>;

//! Measures the copy between the device and host memory the host tier would use: the best
//! of a few 32 MiB copies each way gives the bandwidth, the best 4 KiB copy the latency.
dtr::transfer_model measure_transfer(c10::Device device);

} // namespace dtr_torch
