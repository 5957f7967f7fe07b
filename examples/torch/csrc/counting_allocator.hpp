// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Allocation accounting: every byte ATen allocates on the CPU, wherever it comes from
//! (the bench's allocator peak beside the runtime's), and a cache of freed blocks while a
//! runtime is active.

#pragma once

#include "torch_compat.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dtr_torch {

//! Wraps the CPU allocator PyTorch had when the module was loaded; counts bytes held now and
//! the highest value since the last reset. The DataPtr's context is the data pointer itself
//! (some ATen code uses raw_allocate/raw_deleter, which require that), so sizes and the
//! wrapped allocations are kept in a table keyed by address.
//!
//! While a runtime is active it also caches: freed blocks of at least cache_min bytes are
//! kept and handed out again for the same size. The bridge replaces in-place updates by fresh
//! buffers, and a just-freed block is warm and already faulted in, where glibc would return
//! large blocks to the system (munmap) and fault fresh pages in at the next allocation. The
//! cache never raises what the allocator holds above the highest *demand* (bytes allocated
//! and not freed, cache excluded) since the last reset: an allocation the cache cannot serve
//! first frees cached blocks until the demand peak covers it. So the measured allocator peak
//! is the peak of what ATen asked for, as without the cache.
class counting_allocator final : public allocator_adapter {
public:
    explicit counting_allocator(c10::Allocator* base) : base_(base) {}

    c10::DataPtr allocate_bytes(size_t n) const override {
        std::vector<c10::DataPtr> drop; // freed outside the lock
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (caching_active() && n >= cache_min) {
                auto it = cache_.find(n);
                if (it != cache_.end()) {
                    // still counted in current_: it was held all along
                    c10::DataPtr inner = std::move(it->second);
                    cache_.erase(it);
                    cached_ -= n;
                    void* data = inner.get();
                    const c10::Device device = inner.device();
                    live_.emplace(data, entry{std::move(inner), n});
                    ++reused_;
                    note_demand();
                    if (zero_fill_active()) std::memset(data, 0, n);
                    return {data, data, &release, device};
                }
            }
            // a miss: make room so that current_ stays within the demand peak
            const std::size_t demand = current_ - cached_ + n;
            const std::size_t limit = std::max(demand_peak_, demand);
            while (cached_ != 0 && current_ + n > limit) {
                auto it = cache_.begin();
                cached_ -= it->first;
                current_ -= it->first;
                drop.push_back(std::move(it->second));
                cache_.erase(it);
            }
        }
        drop.clear();
        c10::DataPtr inner = base_->allocate(n);
        void* data = inner.get();
        const c10::Device device = inner.device();
        if (data == nullptr) return inner; // zero-byte allocations: nothing to count
        std::lock_guard<std::mutex> lock(mutex_);
        live_.emplace(data, entry{std::move(inner), n});
        current_ += n;
        peak_ = std::max(peak_, current_);
        total_ += n;
        note_demand();
        if (zero_fill_active()) std::memset(data, 0, n);
        return {data, data, &release, device};
    }
    c10::DeleterFnPtr raw_deleter() const override { return &release; }

    //! Caching on (a runtime entered) or off (left: the cache is freed).
    void set_caching(bool on) {
        std::unordered_multimap<std::size_t, c10::DataPtr> drop;
        std::lock_guard<std::mutex> lock(mutex_);
        caching_ = on;
        if (on) return;
        drop.swap(cache_);
        current_ -= cached_;
        cached_ = 0;
    }
    //! Paused: neither hands out nor keeps blocks, but keeps what it holds (overhead.py runs
    //! plain PyTorch's steps with the bridge's cache paused).
    void set_paused(bool p) {
        std::lock_guard<std::mutex> lock(mutex_);
        paused_ = p;
    }
    std::size_t cached() const {
        std::lock_guard<std::mutex> l(mutex_);
        return cached_;
    }
    std::size_t reused() const {
        std::lock_guard<std::mutex> l(mutex_);
        return reused_;
    }
    static constexpr std::size_t cache_min = 64 << 10;
    //! The wrapped allocator: the host tier's copies come from it, outside the measured peak
    //! of device-side memory (they are reported as the tier's own peak).
    c10::Allocator* base() const noexcept { return base_; }

    std::size_t current() const {
        std::lock_guard<std::mutex> l(mutex_);
        return current_;
    }
    std::size_t peak() const {
        std::lock_guard<std::mutex> l(mutex_);
        return peak_;
    }
    std::size_t total() const {
        std::lock_guard<std::mutex> l(mutex_);
        return total_;
    }
    //! A new measurement: the peak restarts from what is held now, the demand peak from what is
    //! demanded now, and the cache gives back what exceeds it.
    void reset_peak() {
        std::unordered_multimap<std::size_t, c10::DataPtr> drop;
        std::lock_guard<std::mutex> lock(mutex_);
        drop.swap(cache_);
        current_ -= cached_;
        cached_ = 0;
        peak_ = current_;
        demand_peak_ = current_;
    }

    static counting_allocator* instance;

    //! Allocations made on this thread while a zero_fill_scope lives are zero-filled (see
    //! zero_fill_scope); set_zero_fill_all(true) zero-fills every allocation of the process.
    static void set_zero_fill_all(bool on) { zero_fill_all_.store(on); }
    static bool zero_fill_all() { return zero_fill_all_.load(); }

private:
    friend class zero_fill_scope;
    static bool zero_fill_active() { return zero_fill_depth_ != 0 || zero_fill_all_.load(); }
    static inline thread_local int zero_fill_depth_ = 0;
    static inline std::atomic<bool> zero_fill_all_{false};

public:
private:
    struct entry {
        c10::DataPtr inner;
        std::size_t bytes;
    };
    bool caching_active() const { return caching_ && !paused_; }
    void note_demand() const { demand_peak_ = std::max(demand_peak_, current_ - cached_); }

    static void release(void* p) {
        counting_allocator* self = instance;
        entry e;
        {
            std::lock_guard<std::mutex> lock(self->mutex_);
            auto it = self->live_.find(p);
            if (it == self->live_.end()) return;
            e = std::move(it->second);
            self->live_.erase(it);
            if (self->caching_active() && e.bytes >= cache_min) {
                self->cached_ += e.bytes;
                self->cache_.emplace(e.bytes, std::move(e.inner));
                return; // still held: current_ unchanged
            }
            self->current_ -= e.bytes;
        }
        // e.inner frees the block through the wrapped allocator, outside the lock
    }

    c10::Allocator* base_;
    mutable std::mutex mutex_;
    mutable std::unordered_map<void*, entry> live_;
    mutable std::unordered_multimap<std::size_t, c10::DataPtr> cache_;
    mutable std::size_t cached_ = 0, reused_ = 0, current_ = 0, peak_ = 0, total_ = 0,
                        demand_peak_ = 0;
    bool caching_ = false, paused_ = false;
};

//! Zero-fills the CPU allocations of the calling thread while it lives: around the kernels that
//! read memory they never wrote (torch_compat.hpp, reads_uninitialized_scratch), so that what
//! they compute does not depend on what the heap held before.
class zero_fill_scope {
public:
    explicit zero_fill_scope(bool on) : on_(on) {
        if (on_) ++counting_allocator::zero_fill_depth_;
    }
    ~zero_fill_scope() {
        if (on_) --counting_allocator::zero_fill_depth_;
    }
    zero_fill_scope(const zero_fill_scope&) = delete;
    zero_fill_scope& operator=(const zero_fill_scope&) = delete;

private:
    bool on_;
};

//! The counting allocator, installed as PyTorch's CPU allocator on first use (the module
//! calls it when it is loaded, before anything is allocated). Never destroyed: blocks freed
//! during interpreter shutdown still find it.
counting_allocator& cpu_counter();

} // namespace dtr_torch
