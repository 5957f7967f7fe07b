// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The PyTorch bridge: every ATen operator the Python side dispatches runs as one
//! dtr::runtime call whose recipe is the boxed ATen operator with its recorded arguments.
//!
//! One translation unit on purpose (libtorch headers are slow to compile). Pieces:
//! - counting_allocator: wraps PyTorch's CPU allocator to measure every byte ATen holds;
//! - torch_backend: a dtr::backend whose blocks are ATen storages; allocate() adopts the
//!   storage an operator just produced instead of copying it;
//! - runtime_iface / runtime_impl<H>: the runtime behind a small virtual interface, so that
//!   the heuristic is chosen by name at run time while the bridge code is compiled once;
//! - recipe: what one call records (operator handle, boxed arguments, geometry of every
//!   tensor argument, generator state for random operators) and runs, first time and when
//!   rematerializing;
//! - bridge: the Python-facing runtime (dispatch, adoption of plain tensors, pins, stats).
//! See docs/torch.md for the mapping and its limits.

// Python.h (through torch/extension.h) comes before every other header, as CPython requires.
// clang-format off
#include <torch/extension.h>
// clang-format on

#include <dtr/backend/wall_clock.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/offload.hpp>
#include <dtr/runtime.hpp>
#include <dtr/search/indexed.hpp>

#include <ATen/ScalarOps.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace dtr_torch {

//! Where the bridge's time goes (ns, cumulative; rt.stats()["profile"]): a scoped timer adds
//! its lifetime to one counter.
//! recipe_ns / recipe_kernel_ns: inside recipe::run (the operator the runtime runs: argument
//! tensors, the kernel, adopting the outputs) on first runs, and in its kernel;
//! remat_recipe_ns / remat_kernel_ns: the same for rematerializations. kernel_ns: every
//! kernel the bridge runs (recipes, views, in-place updates of constants, eager constants).
struct profile_counters {
    std::uint64_t dispatch_ns = 0, kernel_ns = 0, promote_ns = 0, promote_bytes = 0, follow_ns = 0,
                  stack_ns = 0, runtime_call_ns = 0, wrap_ns = 0, recipe_ns = 0,
                  recipe_kernel_ns = 0, remat_recipe_ns = 0, remat_kernel_ns = 0;
};
inline profile_counters prof;
//! Per operator: calls, the calling thread's CPU ns inside its kernel, and the same two for
//! its rematerializations (off unless _dtr_torch.profile_ops(True): a clock_gettime pair per
//! operator). While it is on, the counters above read the thread's CPU clock too (wall time
//! otherwise), so that both are comparable with the bench's step_cpu_ratio.
struct op_profile {
    std::uint64_t calls = 0, ns = 0, remats = 0, remat_ns = 0;
};
inline bool prof_ops = false;
inline std::unordered_map<std::string, op_profile> prof_by_op;
inline std::uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}
inline std::uint64_t steady_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}
inline std::uint64_t prof_now() { return prof_ops ? thread_cpu_ns() : steady_ns(); }
inline void boxed_call(const c10::OperatorHandle& op, torch::jit::Stack* s, bool remat = false) {
    if (!prof_ops) {
        op.callBoxed(s);
        return;
    }
    const std::uint64_t t0 = thread_cpu_ns();
    op.callBoxed(s);
    const std::uint64_t dt = thread_cpu_ns() - t0;
    auto& e =
        prof_by_op[op.schema().name() +
                   (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name())];
    ++e.calls;
    e.ns += dt;
    if (remat) {
        ++e.remats;
        e.remat_ns += dt;
    }
}
struct scoped_ns {
    std::uint64_t& into;
    std::uint64_t start = prof_now();
    ~scoped_ns() { into += prof_now() - start; }
};

// ---------------------------------------------------------------------------------------
// Allocation accounting: every byte ATen allocates on the CPU, wherever it comes from.

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
class counting_allocator final : public c10::Allocator {
public:
    explicit counting_allocator(c10::Allocator* base) : base_(base) {}

    c10::DataPtr allocate(size_t n) const override {
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

counting_allocator* counting_allocator::instance = nullptr;

counting_allocator& cpu_counter() {
    // Never destroyed: blocks freed during interpreter shutdown still find it.
    static auto* instance = [] {
        auto* a = new counting_allocator(c10::GetCPUAllocator());
        counting_allocator::instance = a;
        c10::SetCPUAllocator(a, /*priority=*/100);
        return a;
    }();
    return *instance;
}

// ---------------------------------------------------------------------------------------
// The backend: runtime blocks are ATen storages.

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
    bool in_backward = false;     //!< backward's releases are not parked (bridge::set_in_backward)
    bool keeping = false;         //!< the runtime's dealloc policy is keep_resident now
    std::size_t parked_total = 0; //!< releases of resident computed storages a recipe reads, kept
    //! Offload (Bridge host_memory): the host tier's capacity and transfer model, none without
    //! one. The copies are real and synchronous (transfers do not overlap).
    std::optional<dtr::host_tier_options> host_tier;
};

//! ATen called directly, as the kernels underneath the bridge: below the Python dispatch mode
//! (the bridge's own, which would route the call back to the runtime) and below autograd and
//! its ADInplaceOrView handling (the runtime's recipes and copies are not autograd's business).
struct below_python_mode {
    c10::impl::ExcludeDispatchKeyGuard no_python{
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
    at::AutoDispatchBelowADInplaceOrView below;
};

//! Copies `bytes` bytes between blocks on `dst_device` and `src_device` (the same device, or
//! the device and host memory): memcpy on the CPU, ATen's copy kernel where a device is
//! involved (synchronous: the bytes are there when it returns).
void copy_bytes(void* dst, c10::Device dst_device, const void* src, c10::Device src_device,
                std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_device.is_cpu() && src_device.is_cpu()) {
        std::memcpy(dst, src, bytes);
        return;
    }
    below_python_mode plain_aten;
    const auto n = static_cast<int64_t>(bytes);
    auto d = at::from_blob(dst, {n}, at::TensorOptions().dtype(at::kByte).device(dst_device));
    auto s = at::from_blob(const_cast<void*>(src), {n},
                           at::TensorOptions().dtype(at::kByte).device(src_device));
    d.copy_(s);
}

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
    c10::Storage host_storage(std::size_t bytes) const {
        const std::size_t n = std::max<std::size_t>(bytes, 1);
        if (table_->device.is_cpu())
            return c10::Storage(c10::Storage::use_byte_size_t(), n, cpu_counter().base(),
                                /*resizable=*/false);
        below_python_mode plain_aten;
        return at::empty({static_cast<int64_t>(n)},
                         at::TensorOptions().dtype(at::kByte).pinned_memory(true))
            .storage();
    }

    std::shared_ptr<block_table> table_;
};

static_assert(dtr::backend<torch_backend>);
static_assert(dtr::offloading_backend<torch_backend>);
static_assert(dtr::cost_clock<torch_backend>);

using context_t = dtr::op_context<torch_backend>;

// ---------------------------------------------------------------------------------------
// The runtime behind a virtual interface (heuristic chosen by name).

struct pinned {
    virtual ~pinned() = default;
    const std::byte* data = nullptr;
    std::size_t size = 0;
};

struct recipe;

//! The operator handed to the runtime: a shared recipe (copyable, cheap).
struct recipe_op {
    std::shared_ptr<recipe> r;
    void operator()(context_t& ctx) const;
};

class runtime_iface {
public:
    virtual ~runtime_iface() = default;
    virtual std::vector<dtr::tensor> call(recipe_op op, std::span<const dtr::tensor> inputs,
                                          std::size_t outputs, std::vector<std::uint32_t> mutates,
                                          std::optional<dtr::cost_t> cost) = 0;
    //! A constant taking over `storage` (no copy).
    virtual dtr::tensor adopt(const c10::Storage& storage) = 0;
    //! A constant holding a copy of `bytes` bytes at `src`.
    virtual dtr::tensor copy_constant(const std::byte* src, std::size_t bytes) = 0;
    virtual std::unique_ptr<pinned> pin(const dtr::tensor& t) = 0;
    //! A constant pinned to be written in place (the runtime forgets any host copy of it).
    virtual std::unique_ptr<pinned> pin_for_write(const dtr::tensor& t) = 0;
    virtual bool evict(const dtr::tensor& t) = 0;
    virtual bool drop(const dtr::tensor& t) = 0;
    virtual void allow_offload(const dtr::tensor& t, bool allowed) = 0;
    virtual bool is_rematerializable(const dtr::tensor& t) const = 0;
    virtual bool offload_allowed(const dtr::tensor& t) const = 0;
    virtual bool is_resident(const dtr::tensor& t) const = 0;
    virtual void set_budget(std::size_t bytes) = 0;
    virtual std::size_t budget() const = 0;
    virtual void set_remat_limit(double ns) = 0;
    virtual void set_dealloc(dtr::dealloc_policy policy) = 0;
    virtual const dtr::counters& stats() const = 0;
    virtual std::size_t storage_count() const = 0;
    virtual std::size_t operator_count() const = 0;
    virtual void check_invariants() const = 0;
    virtual block_table& table() = 0;
    virtual const char* heuristic_name() const = 0;
};

template <class H>
class runtime_impl final : public runtime_iface {
public:
    runtime_impl(dtr::runtime_options opts, std::shared_ptr<block_table> table)
        : table_(table), rt_(opts, torch_backend(table)) {}

    std::vector<dtr::tensor> call(recipe_op op, std::span<const dtr::tensor> inputs,
                                  std::size_t outputs, std::vector<std::uint32_t> mutates,
                                  std::optional<dtr::cost_t> cost) override {
        dtr::call_options o;
        o.mutates = std::move(mutates);
        o.cost = cost;
        return rt_.call_n(outputs, std::move(op), inputs, std::move(o));
    }
    dtr::tensor adopt(const c10::Storage& storage) override {
        block_table& t = *table_;
        t.pending = storage;
        t.has_pending = true;
        struct clear {
            block_table& t;
            ~clear() {
                t.has_pending = false;
                t.pending = c10::Storage();
            }
        } guard{t};
        return rt_.constant(storage.nbytes(), [](dtr::buffer_view<std::byte*>) {});
    }
    dtr::tensor copy_constant(const std::byte* src, std::size_t bytes) override {
        return rt_.constant(bytes, [&](dtr::buffer_view<std::byte*> b) {
            if (bytes != 0) rt_.backend().copy(b.data(), src, bytes);
        });
    }
    std::unique_ptr<pinned> pin(const dtr::tensor& t) override { return guarded(rt_.pin(t)); }
    std::unique_ptr<pinned> pin_for_write(const dtr::tensor& t) override {
        return guarded(rt_.pin_for_write(t));
    }
    bool evict(const dtr::tensor& t) override { return rt_.evict(t); }
    bool drop(const dtr::tensor& t) override { return rt_.drop(t); }
    void allow_offload(const dtr::tensor& t, bool allowed) override {
        rt_.allow_offload(t, allowed);
    }
    bool is_rematerializable(const dtr::tensor& t) const override {
        return rt_.is_rematerializable(t);
    }
    bool offload_allowed(const dtr::tensor& t) const override { return rt_.offload_allowed(t); }
    bool is_resident(const dtr::tensor& t) const override { return rt_.is_resident(t); }
    void set_budget(std::size_t bytes) override { rt_.set_budget(bytes); }
    std::size_t budget() const override { return rt_.budget(); }
    void set_remat_limit(double ns) override { rt_.set_remat_limit(ns); }
    void set_dealloc(dtr::dealloc_policy policy) override { rt_.set_dealloc(policy); }
    const dtr::counters& stats() const override { return rt_.stats(); }
    std::size_t storage_count() const override { return rt_.storage_count(); }
    std::size_t operator_count() const override { return rt_.operator_count(); }
    void check_invariants() const override { rt_.check_invariants(); }
    block_table& table() override { return *table_; }
    const char* heuristic_name() const override { return H::name; }

private:
    template <class Guard>
    static std::unique_ptr<pinned> guarded(Guard g) {
        struct holder final : pinned {
            explicit holder(Guard g) : g(std::move(g)) {}
            Guard g;
        };
        auto p = std::make_unique<holder>(std::move(g));
        p->data = reinterpret_cast<const std::byte*>(p->g.data().data());
        p->size = p->g.data().size();
        return p;
    }

    std::shared_ptr<block_table> table_;
    dtr::runtime<torch_backend, H> rt_;
};

std::unique_ptr<runtime_iface> make_runtime(const std::string& name, dtr::runtime_options opts,
                                            std::shared_ptr<block_table> table) {
    namespace h = dtr::heuristics;
    // The policies worth a bridge instantiation; each one compiles the whole runtime.
    if (name == h::dtr_eqclass::name)
        return std::make_unique<runtime_impl<h::dtr_eqclass>>(opts, table);
    if (name == h::dtr::name) return std::make_unique<runtime_impl<h::dtr>>(opts, table);
    if (name == h::dtr_local::name)
        return std::make_unique<runtime_impl<h::dtr_local>>(opts, table);
    if (name == h::dtr_held::name) return std::make_unique<runtime_impl<h::dtr_held>>(opts, table);
    if (name == h::dtr_held_bounded::name)
        return std::make_unique<runtime_impl<h::dtr_held_bounded>>(opts, table);
    using eqclass_indexed = dtr::search::indexed<h::dtr_eqclass>;
    if (name == eqclass_indexed::name)
        return std::make_unique<runtime_impl<eqclass_indexed>>(opts, table);
    if (name == h::lru::name) return std::make_unique<runtime_impl<h::lru>>(opts, table);
    if (name == h::largest::name) return std::make_unique<runtime_impl<h::largest>>(opts, table);
    if (name == h::msps::name) return std::make_unique<runtime_impl<h::msps>>(opts, table);
    throw std::invalid_argument("dtr_torch: unknown heuristic '" + name +
                                "' (the bridge offers dtr_eqclass, dtr, dtr_local, dtr_held, "
                                "dtr_held_bounded, indexed:dtr_eqclass, lru, largest, msps)");
}

// ---------------------------------------------------------------------------------------
// Geometry and recipes.

struct geometry {
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    int64_t offset = 0;
    at::ScalarType dtype = at::kFloat;
    c10::Device device{c10::kCPU};

    static geometry of(const at::Tensor& t) {
        geometry g;
        g.sizes.assign(t.sizes().begin(), t.sizes().end());
        g.strides.assign(t.strides().begin(), t.strides().end());
        g.offset = t.storage_offset();
        g.dtype = t.scalar_type();
        g.device = t.device();
        return g;
    }
    bool operator==(const geometry& o) const {
        return sizes == o.sizes && strides == o.strides && offset == o.offset && dtype == o.dtype &&
               device == o.device;
    }
};

//! A non-owning storage over runtime memory (inputs of a running operator).
c10::Storage borrowed_storage(const void* data, std::size_t bytes, c10::Device device) {
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                        c10::DataPtr(const_cast<void*>(data), device), nullptr, false);
}

//! A plain tensor with geometry `g` on `storage`.
at::Tensor tensor_on(const c10::Storage& storage, const geometry& g) {
    auto ks = c10::DispatchKeySet(c10::computeDispatchKey(g.dtype, at::kStrided, g.device));
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), ks,
                                                            c10::scalarTypeToTypeMeta(g.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(g.sizes, g.strides, g.offset);
    return t;
}

//! Where a tensor argument lives in the boxed stack.
struct arg_slot {
    enum kind_t : std::uint8_t { tensor, optional_tensor, tensor_list, optional_tensor_list } kind;
    std::size_t stack_index;
    std::vector<int32_t> tensors; //!< index into recipe::tensors per element, -1 for None
};

struct tensor_arg {
    std::uint32_t input; //!< distinct storage index among the call's inputs
    geometry geom;
};

//! Everything one call records; run by the runtime the first time and whenever one of its
//! outputs is rematerialized.
struct recipe {
    std::optional<c10::OperatorHandle> op;
    std::vector<c10::IValue> stack; //!< the arguments, with tensor slots left as None
    std::vector<arg_slot> slots;
    std::vector<tensor_arg> tensors;
    std::vector<std::uint8_t> input_mutated; //!< per distinct input
    std::vector<std::size_t> fresh_returns;  //!< return positions whose tensors are outputs
    std::size_t n_outputs = 0;
    // Random operators: the generator and its state before the first run.
    std::optional<at::Generator> generator;
    at::Tensor rng_state;
    // Filled by the first run: each output's geometry (rematerializations must agree).
    std::vector<geometry> out_geom;
    std::vector<std::uint8_t> out_defined;
    bool ran = false;
    std::size_t io_bytes = 0; //!< bytes of the outputs of the first run (physical floor)
    //! The reader counts of the input versions this recipe reads (storage_ref::readers): while
    //! the runtime keeps the record, those versions may be read again by a rematerialization.
    std::vector<std::shared_ptr<std::size_t>> reads;

    recipe() = default;
    recipe(const recipe&) = delete;
    recipe& operator=(const recipe&) = delete;
    ~recipe() {
        for (auto& c : reads) --*c;
    }

    void run(context_t& ctx);
};

[[noreturn]] void unsupported(const std::string& what) {
    throw std::runtime_error("dtr_torch: unsupported: " + what);
}

//! The Python value of an operator's results: None for none, the value itself for one, a
//! tuple for several (how ATen's Python bindings return them).
py::object python_results(std::vector<py::object> results) {
    if (results.empty()) return py::none();
    if (results.size() == 1) return results[0];
    py::tuple t(results.size());
    for (std::size_t i = 0; i < results.size(); ++i) t[i] = results[i];
    return std::move(t);
}

//! The Python values of a boxed call's stack: tensors (alone or in lists) through
//! `wrap_tensor`, everything else as the JIT converts it.
template <class WrapTensor>
std::vector<py::object> stack_values(torch::jit::Stack& s, WrapTensor&& wrap_tensor) {
    std::vector<py::object> values;
    values.reserve(s.size());
    for (c10::IValue& v : s) {
        if (v.isTensor()) {
            values.push_back(wrap_tensor(v.toTensor()));
        } else if (v.isTensorList()) {
            py::list l;
            for (const at::Tensor& t : v.toTensorList()) l.append(wrap_tensor(t));
            values.push_back(std::move(l));
        } else {
            values.push_back(torch::jit::toPyObject(std::move(v)));
        }
    }
    return values;
}

//! Puts plain tensors over `storages` (one per distinct input) into the tensor slots of `s`:
//! how a recipe, and the paths that run a kernel outside the runtime, build its arguments.
void fill_stack(torch::jit::Stack& s, const std::vector<arg_slot>& slots,
                const std::vector<tensor_arg>& tensors, const std::vector<c10::Storage>& storages) {
    auto make = [&](int32_t k) -> at::Tensor {
        const tensor_arg& ta = tensors[static_cast<std::size_t>(k)];
        return tensor_on(storages[ta.input], ta.geom);
    };
    for (const arg_slot& a : slots) {
        switch (a.kind) {
            case arg_slot::tensor:
            case arg_slot::optional_tensor:
                if (a.tensors[0] >= 0) s[a.stack_index] = make(a.tensors[0]);
                break;
            case arg_slot::tensor_list: {
                c10::List<at::Tensor> l;
                l.reserve(a.tensors.size());
                for (int32_t k : a.tensors) l.push_back(make(k));
                s[a.stack_index] = std::move(l);
                break;
            }
            case arg_slot::optional_tensor_list: {
                c10::List<c10::optional<at::Tensor>> l;
                l.reserve(a.tensors.size());
                for (int32_t k : a.tensors)
                    l.push_back(k >= 0 ? c10::optional<at::Tensor>(make(k)) : c10::nullopt);
                s[a.stack_index] = std::move(l);
                break;
            }
        }
    }
}

void recipe::run(context_t& ctx) {
    scoped_ns run_timer{ctx.rematerializing() ? prof.remat_recipe_ns : prof.recipe_ns};
    below_python_mode plain_aten;

    const std::size_t n_in = ctx.num_inputs();
    std::vector<c10::Storage> storages;
    storages.reserve(n_in);
    std::size_t in_bytes = 0;
    for (std::size_t i = 0; i < n_in; ++i) {
        const c10::Device dev = ctx.backend().table().device;
        if (input_mutated[i]) {
            auto b = ctx.inout(i);
            storages.push_back(borrowed_storage(b.data(), b.size(), dev));
            in_bytes += b.size();
        } else {
            auto b = ctx.input(i);
            storages.push_back(borrowed_storage(b.data(), b.size(), dev));
            in_bytes += b.size();
        }
    }
    std::vector<c10::IValue> s = stack;
    fill_stack(s, slots, tensors, storages);

    // Random operators see the generator state of their first run every time they run; a
    // rematerialization leaves the generator as it found it, and so does a first run that
    // fails (the retry then draws the same numbers as plain PyTorch would).
    at::Tensor saved_state;
    if (generator) {
        saved_state = generator->get_state();
        if (ran) generator->set_state(rng_state);
    }
    struct restore {
        std::optional<at::Generator>& g;
        at::Tensor& state;
        bool keep = false;
        ~restore() {
            if (g && state.defined() && !keep) g->set_state(state);
        }
    } restore_rng{generator, saved_state};

    {
        const std::uint64_t k0 = prof_now();
        boxed_call(*op, &s, ctx.rematerializing());
        const std::uint64_t kdt = prof_now() - k0;
        prof.kernel_ns += kdt;
        (ctx.rematerializing() ? prof.remat_kernel_ns : prof.recipe_kernel_ns) += kdt;
    }

    // Outputs, in return order; undefined results still occupy an (empty) output.
    block_table& table = ctx.backend().table();
    struct clear_pending {
        block_table& t;
        ~clear_pending() {
            t.has_pending = false;
            t.pending = c10::Storage();
        }
    } clear{table};
    std::size_t k = 0;
    std::size_t out_bytes = 0;
    std::vector<const c10::StorageImpl*> produced;
    auto output = [&](const at::Tensor& r) {
        if (k >= n_outputs)
            unsupported(op->schema().name() + " returned more tensors than its arguments announce");
        if (!r.defined()) {
            if (ran && out_defined[k])
                throw dtr::logic_error("dtr_torch: " + op->schema().name() +
                                       " is not deterministic (an output became undefined)");
            ctx.output(k, 0);
            if (!ran) {
                out_geom.emplace_back();
                out_defined.push_back(0);
            }
            ++k;
            return;
        }
        if (r.layout() != at::kStrided || !r.has_storage())
            unsupported(op->schema().name() + " returned a tensor with layout " +
                        c10::str(r.layout()) + " (only strided tensors are managed)");
        const c10::StorageImpl* si = r.storage().unsafeGetStorageImpl();
        for (const c10::Storage& in : storages)
            if (in.unsafeGetStorageImpl() == si ||
                (in.nbytes() != 0 && in.data_ptr().get() == r.storage().data_ptr().get()))
                unsupported(op->schema().name() +
                            " returned a tensor sharing memory with an argument "
                            "although its schema declares a fresh result");
        for (const c10::StorageImpl* p : produced)
            if (p == si)
                unsupported(op->schema().name() + " returned two results sharing one storage");
        produced.push_back(si);
        geometry g = geometry::of(r);
        if (ran) {
            if (!(g == out_geom[k]) || !out_defined[k])
                throw dtr::logic_error(
                    "dtr_torch: " + op->schema().name() +
                    " is not deterministic: a rematerialized output has another geometry");
        } else {
            out_geom.push_back(std::move(g));
            out_defined.push_back(1);
        }
        table.pending = r.storage();
        table.has_pending = true;
        const std::size_t nbytes = r.storage().nbytes();
        ctx.output(k, nbytes);
        table.has_pending = false;
        table.pending = c10::Storage();
        out_bytes += nbytes;
        ++k;
    };
    const std::size_t n_args = op->schema().arguments().size();
    (void)n_args;
    for (std::size_t ret : fresh_returns) {
        c10::IValue& v = s[ret];
        if (v.isTensor()) {
            output(v.toTensor());
        } else if (v.isTensorList()) {
            for (const at::Tensor& r : v.toTensorList()) output(r);
        } else if (v.isNone()) {
            output(at::Tensor());
        } else {
            unsupported(op->schema().name() + ": return " + std::to_string(ret) +
                        " is not a tensor");
        }
    }
    if (k != n_outputs)
        unsupported(op->schema().name() + " returned " + std::to_string(k) + " tensors, expected " +
                    std::to_string(n_outputs));
    (void)in_bytes;
    if (!ran) {
        io_bytes = out_bytes;
        if (generator) {
            rng_state = saved_state;
            restore_rng.keep = true; // the first run advances the generator, as in plain PyTorch
        }
    }
    ran = true;
}

void recipe_op::operator()(context_t& ctx) const { r->run(ctx); }

// ---------------------------------------------------------------------------------------
// Per-operator analysis (computed once per OpOverload on the Python side).

struct op_info {
    std::optional<c10::OperatorHandle> op;
    std::string name;
    enum kind_t : int {
        compute = 0,
        view = 1,
        detach_inplace = 2,
        inplace_view = 3
    } kind = compute;
    std::vector<std::pair<int, int>>
        writes;                    //!< (argument index, bool argument that must be true or -1)
    std::vector<int> return_alias; //!< per return: argument index it writes/aliases, or -1
    bool random = false;
    int generator_arg = -1;
    int first_list_arg = -1;
    //! The out-of-place form of an in-place operator (relu_ -> relu, add_.Tensor -> add.Tensor),
    //! or None: an OpInfo. See "in-place without a copy" in bridge::dispatch_impl.
    py::object functional = py::none();
};

// ---------------------------------------------------------------------------------------
// The bridge runtime.

class bridge;

//! One runtime storage as Python sees it: shared by every wrapper viewing the storage, and by
//! the plain tensors (parameters, buffers, inputs) whose storage it adopted.
struct storage_ref {
    std::shared_ptr<runtime_iface> rt;
    dtr::tensor handle;
    std::uint64_t runtime_id = 0;
    //! Plain tensors sharing this storage (adopted); they follow mutations.
    std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> plains;
    const c10::StorageImpl* plain_key = nullptr;
    //! Live recipes that read the current version (a new version gets a new count). A constant
    //! no recipe reads can be updated in place: nothing can ever need its old bytes.
    std::shared_ptr<std::size_t> readers = std::make_shared<std::size_t>(0);

    void new_version() { readers = std::make_shared<std::size_t>(0); }

    std::size_t nbytes() const { return handle.size(); }

    //! Drops this reference's handle. Under block_table::keeping, the runtime keeps the
    //! storage resident if it was the last handle and a recipe reads it; counted here when it
    //! is computed, resident and a live recipe reads this version.
    static void release(runtime_iface& rt, dtr::tensor h, const std::shared_ptr<std::size_t>& r) {
        block_table& t = rt.table();
        if (t.keeping && h && !h.orphaned() && h.use_count() == 1 && *r != 0 &&
            rt.is_rematerializable(h) && rt.is_resident(h))
            ++t.parked_total;
    }
    storage_ref() = default;
    storage_ref(const storage_ref&) = delete;
    storage_ref& operator=(const storage_ref&) = delete;
    ~storage_ref() {
        if (rt && handle) release(*rt, std::move(handle), readers);
    }
};

using ref_ptr = std::shared_ptr<storage_ref>;

//! Measures the copy between the device and host memory the host tier would use: the best
//! of a few 32 MiB copies each way gives the bandwidth, the best 4 KiB copy the latency.
dtr::transfer_model measure_transfer(c10::Device device) {
    below_python_mode plain_aten;
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

class bridge {
public:
    bridge(std::size_t budget, const std::string& heuristic, const std::string& device,
           py::object wrapper_factory, py::object oom_type, py::object thrash_type,
           const std::string& restore, const std::string& dealloc, std::size_t host_memory,
           double offload_bandwidth, double offload_latency_ns)
        : table_(std::make_shared<block_table>()),
          make_wrapper_(std::move(wrapper_factory)),
          oom_type_(std::move(oom_type)),
          thrash_type_(std::move(thrash_type)) {
        static std::uint64_t next_id = 1;
        id_ = next_id++;
        table_->device = c10::Device(device);
        if (table_->device.is_cpu()) {
            table_->allocator = &cpu_counter();
        } else {
            table_->allocator = c10::GetAllocator(table_->device.type());
        }
        dtr::runtime_options o;
        o.budget = budget;
        // Released storages are kept only where park_released says so (update_dealloc):
        // keeping them in backward too, as the runtime's default keep_once_bound would,
        // is what park_released's rule avoids.
        o.dealloc = dtr::dealloc_policy::eager_evict;
        // The in-place operators that reach the runtime's mutation (those the bridge does
        // not rewrite out of place or run on an unread constant, below) write into the old
        // version's block when nothing else holds it, instead of a copy.
        o.in_place = dtr::in_place_writes::reuse_when_unshared;
        // park_released's kept storages compete with held ones on their scores: on DenseNet
        // at 0.33 evicting them first recomputes half as much again (1091 against 696-729
        // recomputations over the bench's 3 steps), as the kept feature maps are what the
        // recomputations read (docs/results.md, "Keeping released storages").
        o.kept = dtr::kept_priority::scored;
        if (restore == "hold")
            o.restore = dtr::restore_pins::hold;
        else if (restore == "planned")
            o.restore = dtr::restore_pins::planned;
        else if (restore != "yield_when_full")
            throw std::invalid_argument(
                "dtr_torch: restore must be yield_when_full, planned or hold, not '" + restore +
                "'");
        if (dealloc == "banish") {
            o.dealloc = dtr::dealloc_policy::banish;
            banish_ = true;
        } else if (dealloc != "eager_evict")
            throw std::invalid_argument("dtr_torch: dealloc must be eager_evict or banish, not '" +
                                        dealloc + "'");
        // Parameters, buffers and inputs are PyTorch's storages, adopted: they never leave the
        // device, with or without a tier (the constants the bridge makes itself are let go one
        // by one, runtime::allow_offload). Set without a tier too, so that offload_allowed()
        // answers the same in the reference run the bench takes its bounds from.
        o.offload_constants = false;
        if (host_memory != 0) enable_offload(o, host_memory, offload_bandwidth, offload_latency_ns);
        rt_ = std::shared_ptr<runtime_iface>(make_runtime(heuristic, o, table_));
        py_device_ = py::reinterpret_steal<py::object>(THPDevice_New(table_->device));
    }

    std::uint64_t id() const noexcept { return id_; }

    //! The host tier's transfer model (bytes/s, ns per transfer); bandwidth 0 without a tier.
    dtr::transfer_model transfer() const noexcept {
        return table_->host_tier ? table_->host_tier->transfer
                                 : dtr::transfer_model{.bandwidth = 0, .latency = 0};
    }

    // ---- references ---------------------------------------------------------------------

    //! The storage_ref of a wrapper (its `_dtr_ref`), or of a plain tensor (adopting it).
    ref_ptr ref_of(const at::Tensor& t, py::handle obj) {
        py::object r = py::getattr(obj, "_dtr_ref", py::none());
        if (!t.key_set().has(c10::DispatchKey::Python)) {
            if (!r.is_none()) {
                ref_ptr ref = r.cast<ref_ptr>();
                if (ref->runtime_id == id_ && ref->plain_key == t.storage().unsafeGetStorageImpl())
                    return ref;
            }
            ref_ptr ref = adopt(t);
            // The plain tensor's Python object keeps the reference (and so the constant) alive.
            py::setattr(obj, "_dtr_ref", py::cast(ref));
            // A leaf that requires grad (a parameter): its incoming gradients become constants
            // as they arrive (see Runtime._leaf_hook).
            if (!leaf_callback_.is_none() && t.requires_grad() && !t.grad_fn())
                leaf_callback_(py::reinterpret_borrow<py::object>(obj));
            return ref;
        }
        {
            if (r.is_none())
                unsupported("a tensor subclass with __torch_dispatch__ other than dtr_torch's (" +
                            std::string(py::str(py::type::handle_of(obj))) + ")");
            ref_ptr ref = r.cast<ref_ptr>();
            if (ref->runtime_id != id_)
                unsupported(
                    "a dtr_torch tensor of another runtime used in this one; "
                    "materialize it first (dtr_torch.materialize)");
            return ref;
        }
    }

    ref_ptr adopt(const at::Tensor& t) {
        if (t.layout() != at::kStrided) unsupported("tensors with layout " + c10::str(t.layout()));
        if (!t.has_storage()) unsupported("tensors without storage (" + t.toString() + ")");
        if (t.device() != table_->device)
            unsupported("a tensor on " + t.device().str() + " in a runtime for " +
                        table_->device.str());
        const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
        auto it = adopted_.find(key);
        ref_ptr ref;
        if (it != adopted_.end()) ref = it->second.lock();
        if (!ref) {
            ref = std::make_shared<storage_ref>();
            ref->rt = rt_;
            ref->runtime_id = id_;
            ref->handle = rt_->adopt(t.storage());
            ref->plain_key = key;
            adopted_[key] = ref;
        }
        c10::TensorImpl* impl = t.unsafeGetTensorImpl();
        bool known = false;
        for (auto& w : ref->plains) {
            auto s = w.lock();
            if (s && s.get() == impl) known = true;
        }
        if (!known)
            ref->plains.emplace_back(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(impl));
        return ref;
    }

    //! Gradients of the adopted plain tensors that require grad (the leaves): as
    //! (leaf, grad) pairs, or the grads alone.
    py::list leaf_grads(bool pairs) {
        py::list out;
        for (auto& [key, weak] : adopted_) {
            ref_ptr ref = weak.lock();
            if (!ref) continue;
            for (auto& w : ref->plains) {
                auto impl = w.lock();
                if (!impl) continue;
                at::Tensor t(impl);
                if (!t.requires_grad()) continue;
                const at::Tensor& g = t.grad();
                if (!g.defined()) continue;
                py::object go = py::reinterpret_steal<py::object>(THPVariable_Wrap(g));
                if (pairs)
                    out.append(
                        py::make_tuple(py::reinterpret_steal<py::object>(THPVariable_Wrap(t)), go));
                else
                    out.append(go);
            }
        }
        return out;
    }

    //! On exit: plain tensors forget their references (so the runtime can go).
    void drop_adoption_refs() {
        for (auto& [key, weak] : adopted_) {
            ref_ptr ref = weak.lock();
            if (!ref) continue;
            for (auto& w : ref->plains) {
                auto impl = w.lock();
                if (!impl) continue;
                py::object obj =
                    py::reinterpret_steal<py::object>(THPVariable_Wrap(at::Tensor(impl)));
                if (py::hasattr(obj, "_dtr_ref")) py::delattr(obj, "_dtr_ref");
            }
        }
        adopted_.clear();
    }

    // ---- dispatch -----------------------------------------------------------------------

    //! Runs one ATen operator through the runtime (see the definition for the cases).
    //! @throws the Python OutOfMemoryError / ThrashingError types given at construction,
    //! prefixed with the operator's name; RuntimeError ("dtr_torch: unsupported: ...") for
    //! what the bridge cannot express.
    py::object dispatch(const op_info& info, py::tuple args, py::dict kwargs) {
        scoped_ns t{prof.dispatch_ns};
        if (table_->park_released) update_dealloc();
        try {
            return dispatch_impl(info, std::move(args), std::move(kwargs));
        } catch (const dtr::out_of_memory& e) {
            raise(oom_type_, info.name + ": " + e.what());
        } catch (const dtr::thrashing& e) {
            raise(thrash_type_, info.name + ": " + e.what());
        }
    }
    py::object dispatch_impl(const op_info& info, py::tuple args, py::dict kwargs);

    // ---- access -------------------------------------------------------------------------

    //! A plain tensor holding a copy of the wrapper's value (pins, recomputing if needed).
    at::Tensor materialize(const ref_ptr& ref, const geometry& g) {
        auto p = pin(ref->handle);
        below_python_mode plain_aten;
        at::Tensor view = tensor_on(borrowed_storage(p->data, p->size, table_->device), g);
        return view.clone(at::MemoryFormat::Preserve);
    }

    //! Inputs pinned for a kernel that runs outside the runtime, and plain storages over
    //! their memory (one per input, in order) to build its arguments from.
    struct pinned_inputs {
        std::vector<std::unique_ptr<pinned>> pins;
        std::vector<c10::Storage> storages;
    };
    //! With `written`, the inputs it flags are constants the kernel writes in place: pinned
    //! for writing, so that the runtime drops any host copy of their old bytes.
    pinned_inputs pin_all(const std::vector<ref_ptr>& inputs,
                          const std::vector<std::uint8_t>* written = nullptr) {
        pinned_inputs p;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            const ref_ptr& in = inputs[i];
            p.pins.push_back(written != nullptr && (*written)[i] ? pin(in->handle, true)
                                                                 : pin(in->handle));
            p.storages.push_back(
                borrowed_storage(p.pins.back()->data, p.pins.back()->size, table_->device));
        }
        return p;
    }

    std::unique_ptr<pinned> pin(const dtr::tensor& t, bool for_write = false) {
        try {
            return for_write ? rt_->pin_for_write(t) : rt_->pin(t);
        } catch (const dtr::out_of_memory& e) {
            raise(oom_type_, std::string("pin (reading a tensor): ") + e.what());
        } catch (const dtr::thrashing& e) {
            raise(thrash_type_, std::string("pin (reading a tensor): ") + e.what());
        }
    }

    //! Turns a computed storage into a constant (a copy), so that long-lived state (gradients,
    //! optimizer state) stops depending on the step that computed it.
    void promote(const ref_ptr& ref) {
        if (!rt_->is_rematerializable(ref->handle)) return;
        scoped_ns t{prof.promote_ns};
        prof.promote_bytes += ref->nbytes();
        auto p = pin(ref->handle);
        dtr::tensor c;
        // Zero copy where the runtime lets go of the storage: keep ATen's storage alive here,
        // evict the computed version (the backend drops its table entry, the budget its bytes),
        // and adopt the same storage as the constant. The runtime has no call that turns a
        // computed storage into a constant in place; this does it with evict + constant.
        const std::byte* data = p->data;
        const std::size_t size = p->size;
        c10::Storage keep;
        if (auto it = table_->blocks.find(data);
            it != table_->blocks.end() && size != 0 && it->second.nbytes() == size)
            keep = it->second;
        p.reset();
        // Dropped, not offloaded: the bytes live on in the constant, a host copy would be a
        // wasted transfer.
        if (keep && rt_->drop(ref->handle) && table_->blocks.find(data) == table_->blocks.end()) {
            try {
                c = rt_->adopt(keep);
            } catch (const dtr::out_of_memory& e) {
                raise(oom_type_, std::string("promoting state to a constant: ") + e.what());
            }
            ++promotions_zero_copy_;
        } else {
            keep = c10::Storage();
            auto q = pin(ref->handle);
            try {
                c = rt_->copy_constant(q->data, q->size);
            } catch (const dtr::out_of_memory& e) {
                raise(oom_type_, std::string("promoting state to a constant: ") + e.what());
            }
        }
        // Its bytes are the bridge's alone (a gradient, optimizer state): with a host tier it
        // may leave the device like an activation, unlike the parameters PyTorch holds.
        rt_->allow_offload(c, true);
        ref->handle = std::move(c);
        ref->new_version();
        ++promotions_;
    }
    std::size_t promotions_zero_copy() const { return promotions_zero_copy_; }

    bool is_constant(const ref_ptr& ref) const { return !rt_->is_rematerializable(ref->handle); }

    //! A plain tensor with geometry `g` over the memory of `ref`'s storage, for an operator
    //! that writes it outside the dispatcher's view (collectives: the process group writes
    //! the memory directly, possibly after the call returns). The storage becomes a constant
    //! version no recipe reads first (a copy if it was computed or is read), so writing it is
    //! never visible to a rematerialization, and it stays resident (constants are never
    //! evicted): the alias may be written until the collective's Work completes.
    at::Tensor writable_alias(const ref_ptr& ref, const geometry& g) {
        if (rt_->is_rematerializable(ref->handle)) {
            promote(ref);
        } else if (*ref->readers != 0) {
            auto p = pin(ref->handle);
            dtr::tensor c;
            try {
                c = rt_->copy_constant(p->data, p->size);
            } catch (const dtr::out_of_memory& e) {
                raise(oom_type_, std::string("a collective's buffer: ") + e.what());
            }
            p.reset();
            ref->handle = std::move(c);
            ref->new_version();
            ++promotions_;
            if (!ref->plains.empty()) follow_mutation(ref);
        }
        // The process group holds the block and writes it: it must not move to the host tier
        // meanwhile, and a host copy of its old bytes is stale (pin_for_write drops it).
        rt_->allow_offload(ref->handle, false);
        auto p = pin(ref->handle, true);
        auto it = table_->blocks.find(p->data);
        if (it == table_->blocks.end())
            throw std::logic_error("dtr_torch: constant not in the block table");
        return tensor_on(it->second, g);
    }
    std::size_t readers(const ref_ptr& ref) const { return *ref->readers; }

    //! The runtime's dealloc policy for the releases to come (block_table::park_released):
    //! keep_resident outside backward once the budget has bound, eager_evict otherwise.
    //! Called before each operator and when backward starts or ends, outside any runtime
    //! operation (the runtime handles releases made during one when it ends).
    void update_dealloc() {
        block_table& t = *table_;
        const bool keep = t.park_released && !t.in_backward && rt_->stats().victim_searches != 0;
        if (keep == t.keeping) return;
        rt_->set_dealloc(keep ? dtr::dealloc_policy::keep_resident
                              : dtr::dealloc_policy::eager_evict);
        t.keeping = keep;
    }
    void set_park_released(bool on) {
        if (on && banish_)
            throw std::invalid_argument(
                "dtr_torch: park_released keeps released storages, dealloc='banish' frees them: "
                "choose one");
        table_->park_released = on;
        update_dealloc();
    }
    void set_cost_clock(const std::string& clock) {
        if (clock != "wall" && clock != "thread_cpu")
            throw std::invalid_argument("dtr_torch: cost_clock must be wall or thread_cpu, not '" +
                                        clock + "'");
        table_->cpu_costs = clock == "thread_cpu";
    }

    runtime_iface& rt() { return *rt_; }
    //! Inside loss.backward() / autograd.grad, grad mode is off but what runs is the backward
    //! graph: its results stay rematerializable (no eager constants, no promotion).
    void set_in_backward(bool b) {
        in_backward_ = b;
        table_->in_backward = b;
        update_dealloc();
    }
    void set_deterministic_costs(bool b) { deterministic_costs_ = b; }
    void set_inplace_rewrite(bool b) { inplace_rewrite_disabled_ = !b; }
    std::size_t inplace_rewrites() const { return inplace_rewrites_; }
    std::size_t inplace_direct() const { return inplace_direct_; }
    void set_leaf_callback(py::object f) { leaf_callback_ = std::move(f); }
    std::size_t promotions() const { return promotions_; }
    std::size_t eager_constants() const { return eager_constants_; }
    std::size_t max_op_bytes() const { return max_op_bytes_; }
    const std::string& max_op_name() const { return max_op_name_; }
    std::size_t max_tier_op_bytes() const { return max_tier_op_bytes_; }
    const std::string& max_tier_op_name() const { return max_tier_op_name_; }
    std::size_t calls() const { return calls_; }

    [[noreturn]] void raise(const py::object& type, const std::string& msg) {
        PyErr_SetString(type.ptr(), msg.c_str());
        throw py::error_already_set();
    }

    py::object wrap(ref_ptr ref, const geometry& g) {
        scoped_ns t{prof.wrap_ns};
        py::tuple size(g.sizes.size()), stride(g.strides.size());
        for (std::size_t i = 0; i < g.sizes.size(); ++i) size[i] = py::int_(g.sizes[i]);
        for (std::size_t i = 0; i < g.strides.size(); ++i) stride[i] = py::int_(g.strides[i]);
        py::object dtype = py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPDtype(g.dtype)));
        return make_wrapper_(py::cast(std::move(ref)), size, stride, g.offset, dtype, py_device_);
    }

private:
    //! After a mutation: plain tensors sharing a mutated storage move to its new version.
    void follow_mutation(const ref_ptr& ref);

    //! Gives the backend a host tier of `host_memory` bytes and lets the runtime copy
    //! victims out to it when that is cheaper than recomputing them (offload_policy::
    //! automatic). `bandwidth` 0 measures the link (measure_transfer). Parameters and inputs
    //! stay on the device (adopted storages that PyTorch keeps and writes); the constants the
    //! bridge makes itself (promoted gradients and state, eager results) may leave
    //! (runtime::allow_offload), once nothing evictable is left.
    void enable_offload(dtr::runtime_options& o, std::size_t host_memory, double bandwidth,
                        double latency_ns) {
        if (!std::isfinite(bandwidth) || bandwidth < 0)
            throw std::invalid_argument(
                "dtr_torch: offload_bandwidth must be finite and >= 0 "
                "(0 measures it), not " +
                std::to_string(bandwidth));
        if (!std::isfinite(latency_ns) || latency_ns < 0)
            throw std::invalid_argument(
                "dtr_torch: offload_latency_ns must be finite and >= 0, not " +
                std::to_string(latency_ns));
        dtr::host_tier_options t;
        t.capacity = host_memory;
        t.overlap = false; // the copies are synchronous: the clock waits for each
        if (bandwidth == 0) {
            t.transfer = measure_transfer(table_->device);
        } else {
            t.transfer.bandwidth = bandwidth;
            t.transfer.latency = static_cast<dtr::cost_t>(latency_ns);
        }
        table_->host_tier = t;
        o.offload = dtr::offload_policy::automatic;
    }

    std::shared_ptr<block_table> table_;
    std::shared_ptr<runtime_iface> rt_;
    std::uint64_t id_ = 0;
    py::object make_wrapper_, oom_type_, thrash_type_, py_device_;
    std::unordered_map<const c10::StorageImpl*, std::weak_ptr<storage_ref>> adopted_;
    std::size_t promotions_ = 0;
    std::size_t eager_constants_ = 0;
    bool deterministic_costs_ = false;
    bool inplace_rewrite_disabled_ = false;
    std::size_t inplace_rewrites_ = 0;
    std::size_t inplace_direct_ = 0;
    std::size_t promotions_zero_copy_ = 0;
    py::object leaf_callback_ = py::none();
    bool in_backward_ = false; //!< autograd runs with grad mode off, but computes activations
    bool banish_ = false;      //!< dealloc="banish": released storages are never kept
    std::size_t max_op_bytes_ = 0;
    std::string max_op_name_;
    std::size_t max_tier_op_bytes_ = 0;
    std::string max_tier_op_name_;
    std::size_t calls_ = 0;

    //! The floors' "largest operator" (the bench's f and the host tier's bound), for an
    //! operator that ran on `inputs` and wrote `out_bytes` of fresh outputs; `recorded` when
    //! it ran as a runtime call. f counts its computed inputs (constants are counted once, as
    //! parameters and optimizer state) and only recorded operators. The tier's bound counts
    //! every input that could have been on the host (all but parameters, buffers and inputs,
    //! which stay) and the operators the bridge runs outside the runtime's records too:
    //! in-place updates of state (SGD's `momentum.add_(grad)` holds a gradient and a state
    //! tensor at once) and results made eagerly from constants.
    void note_operator_bytes(const std::string& name, const std::vector<ref_ptr>& inputs,
                             const std::vector<std::uint8_t>& mutated, std::size_t out_bytes,
                             bool recorded) {
        std::size_t io = out_bytes, io_tier = out_bytes;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            const dtr::tensor& h = inputs[i]->handle;
            if (rt_->is_rematerializable(h) || mutated[i]) io += inputs[i]->nbytes();
            if (rt_->offload_allowed(h) || (recorded && mutated[i])) io_tier += inputs[i]->nbytes();
        }
        if (recorded && io > max_op_bytes_) {
            max_op_bytes_ = io;
            max_op_name_ = name;
        }
        if (io_tier > max_tier_op_bytes_) {
            max_tier_op_bytes_ = io_tier;
            max_tier_op_name_ = name;
        }
    }
};

void bridge::follow_mutation(const ref_ptr& ref) {
    scoped_ns t{prof.follow_ns};
    bool any = false;
    for (auto& w : ref->plains)
        if (w.lock()) any = true;
    if (!any) return;
    auto p = rt_->pin(ref->handle); // a constant: resident, no recomputation
    auto it = table_->blocks.find(p->data);
    if (it == table_->blocks.end())
        throw std::logic_error("dtr_torch: mutated storage not in the block table");
    const c10::Storage& fresh = it->second;
    adopted_.erase(ref->plain_key);
    ref->plain_key = fresh.unsafeGetStorageImpl();
    adopted_[ref->plain_key] = ref;
    std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> alive;
    for (auto& w : ref->plains) {
        auto impl = w.lock();
        if (!impl) continue;
        const bool allow = impl->allow_tensor_metadata_change();
        impl->set_allow_tensor_metadata_change(true);
        impl->set_storage_keep_dtype(fresh);
        impl->set_allow_tensor_metadata_change(allow);
        alive.push_back(w);
    }
    ref->plains = std::move(alive);
}

// A tensor argument found in the boxed stack.
struct found_tensor {
    at::Tensor t;
    py::object obj; //!< its Python object (wrapper or plain)
    ref_ptr ref;
    int arg = -1; //!< schema argument index
};

py::object bridge::dispatch_impl(const op_info& info, py::tuple args, py::dict kwargs) {
    const c10::FunctionSchema& schema = info.op->schema();
    std::optional<scoped_ns> stack_timer;
    stack_timer.emplace(scoped_ns{prof.stack_ns});
    // __torch_dispatch__ hands wrapped numbers (Python scalars ATen turned into 0-dim tensors)
    // back as Python numbers; the boxed call needs them as wrapped-number tensors again.
    {
        const auto& sa = schema.arguments();
        py::list fixed;
        bool changed = false;
        for (std::size_t i = 0; i < args.size(); ++i) {
            py::object v = args[i];
            if (i < sa.size() && sa[i].type()->kind() == c10::TypeKind::TensorType &&
                (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()) ||
                 PyComplex_Check(v.ptr()))) {
                at::Scalar sc = torch::jit::toIValue(v, c10::NumberType::get()).toScalar();
                if (PyBool_Check(v.ptr())) sc = at::Scalar(v.cast<bool>());
                at::Tensor w = c10::scalar_to_tensor(sc);
                w.unsafeGetTensorImpl()->set_wrapped_number(true);
                v = py::reinterpret_steal<py::object>(THPVariable_Wrap(w));
                changed = true;
            }
            fixed.append(v);
        }
        if (changed) args = py::tuple(fixed);
    }
    torch::jit::Stack stack =
        torch::jit::createStackForSchema(schema, torch::jit::tuple_slice(args),
                                         py::reinterpret_borrow<py::kwargs>(kwargs), c10::nullopt);

    auto r = std::make_shared<recipe>();
    std::vector<found_tensor> found;
    std::vector<ref_ptr> inputs; // distinct storages
    auto input_of = [&](const ref_ptr& ref) -> std::uint32_t {
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (inputs[i].get() == ref.get()) return static_cast<std::uint32_t>(i);
        inputs.push_back(ref);
        return static_cast<std::uint32_t>(inputs.size() - 1);
    };
    auto take = [&](const at::Tensor& t, int arg) -> int32_t {
        if (!t.defined()) return -1;
        found_tensor f;
        f.t = t;
        f.obj = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
        f.ref = ref_of(t, f.obj);
        f.arg = arg;
        r->tensors.push_back({input_of(f.ref), geometry::of(t)});
        found.push_back(std::move(f));
        return static_cast<int32_t>(r->tensors.size() - 1);
    };
    const auto& sargs = schema.arguments();
    for (std::size_t i = 0; i < sargs.size(); ++i) {
        c10::IValue& v = stack[i];
        if (v.isTensor()) {
            const at::Tensor& t = v.toTensor();
            if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number() &&
                !t.key_set().has(c10::DispatchKey::Python)) {
                // A Python number ATen wrapped: part of the recorded arguments (by value).
                at::Tensor copy = t.clone();
                copy.unsafeGetTensorImpl()->set_wrapped_number(true);
                v = copy;
                continue;
            }
            const bool optional = sargs[i].type()->kind() == c10::TypeKind::OptionalType;
            arg_slot a{optional ? arg_slot::optional_tensor : arg_slot::tensor,
                       i,
                       {take(t, static_cast<int>(i))}};
            r->slots.push_back(std::move(a));
            v = c10::IValue();
        } else if (v.isTensorList()) {
            arg_slot a{arg_slot::tensor_list, i, {}};
            for (const at::Tensor& t : v.toTensorList())
                a.tensors.push_back(take(t, static_cast<int>(i)));
            r->slots.push_back(std::move(a));
            v = c10::IValue();
        } else if (v.isList() && sargs[i].type()->kind() == c10::TypeKind::ListType &&
                   sargs[i].type()->containedType(0)->kind() == c10::TypeKind::OptionalType &&
                   sargs[i].type()->containedType(0)->containedType(0)->kind() ==
                       c10::TypeKind::TensorType) {
            arg_slot a{arg_slot::optional_tensor_list, i, {}};
            for (const c10::IValue& e : v.toListRef())
                a.tensors.push_back(e.isNone() ? -1 : take(e.toTensor(), static_cast<int>(i)));
            r->slots.push_back(std::move(a));
            v = c10::IValue();
        } else if (v.isNone() && sargs[i].type()->kind() == c10::TypeKind::OptionalType &&
                   sargs[i].type()->containedType(0)->kind() == c10::TypeKind::TensorType) {
            // an absent optional tensor stays None
        }
    }

    stack_timer.reset();
    // Which distinct storages the call writes.
    std::vector<std::uint8_t> mutated(inputs.size(), 0);
    bool writes = false;
    for (auto [arg, cond] : info.writes) {
        if (cond >= 0) {
            const c10::IValue& c = stack[static_cast<std::size_t>(cond)];
            if (!(c.isBool() && c.toBool())) continue;
        }
        for (const found_tensor& f : found)
            if (f.arg == arg) {
                mutated[input_of(f.ref)] = 1;
                writes = true;
            }
    }

    auto arg_object = [&](int arg) -> py::object {
        // The Python object passed as argument `arg` (what an in-place operator returns).
        if (static_cast<std::size_t>(arg) < args.size()) return args[static_cast<std::size_t>(arg)];
        const std::string& n = sargs[static_cast<std::size_t>(arg)].name();
        if (kwargs.contains(n.c_str())) return kwargs[n.c_str()];
        return py::none();
    };

    const auto& rets = schema.returns();

    // ---- in place, for real: constants nothing reads -----------------------------------------
    // Copy-on-write keeps the old version for whatever may read it again. A constant (a
    // parameter, optimizer state, a gradient, a buffer such as DistributedDataParallel's
    // gradient buckets) that no live recipe reads can never be read again in its old version:
    // the operator runs on its memory, as in plain PyTorch (no new version, no fresh buffer,
    // the plain tensors and views sharing it see the update). Outside backward, under no_grad,
    // a computed storage being updated is first made a constant (long-lived state, below).
    if (writes && !inplace_rewrite_disabled_ && info.kind == op_info::compute) {
        bool ok = true;
        for (std::size_t i = 0; ok && i < rets.size(); ++i) {
            if (info.return_alias[i] >= 0) continue;
            const auto kind = rets[i].type()->kind();
            if (kind == c10::TypeKind::TensorType || kind == c10::TypeKind::OptionalType ||
                kind == c10::TypeKind::ListType)
                ok = false; // fresh results: a runtime call
        }
        const bool state_update = !c10::GradMode::is_enabled() && !in_backward_;
        for (std::size_t i = 0; ok && i < inputs.size(); ++i) {
            if (!mutated[i]) continue;
            if (rt_->is_rematerializable(inputs[i]->handle) && !state_update) ok = false;
        }
        if (ok) {
            for (std::size_t i = 0; i < inputs.size(); ++i)
                if (mutated[i] && rt_->is_rematerializable(inputs[i]->handle)) promote(inputs[i]);
            for (std::size_t i = 0; ok && i < inputs.size(); ++i)
                if (mutated[i] && *inputs[i]->readers != 0) ok = false;
        }
        if (ok) {
            const pinned_inputs held = pin_all(inputs, &mutated);
            note_operator_bytes(info.name, inputs, mutated, 0, false);
            below_python_mode plain_aten;
            torch::jit::Stack s = stack;
            fill_stack(s, r->slots, r->tensors, held.storages);
            {
                scoped_ns kt{prof.kernel_ns};
                boxed_call(*info.op, &s);
            }
            ++inplace_direct_;
            std::vector<py::object> results;
            for (std::size_t i = 0; i < rets.size(); ++i) {
                if (info.return_alias[i] >= 0)
                    results.push_back(arg_object(info.return_alias[i]));
                else
                    results.push_back(torch::jit::toPyObject(std::move(s[i])));
            }
            return python_results(std::move(results));
        }
    }

    // ---- in-place without a copy ----------------------------------------------------------
    // A copy-on-write mutation copies the old version before the operator updates it. When the
    // operator writes only `self`, `self` is the whole of a dense storage and no other argument
    // shares it, its out-of-place form computes the same bytes straight into a fresh storage:
    // the storage reference (and so every view of it, and the plain tensors sharing it) moves
    // to that result, as a mutation would move it to the new version. Same memory, no copy.
    if (writes && !info.functional.is_none() && r->slots.size() >= 1 && !found.empty() &&
        found[0].arg == 0 && !inplace_rewrite_disabled_) {
        const found_tensor& self = found[0];
        const at::Tensor& st = self.t;
        bool ok = mutated[input_of(self.ref)] && st.is_contiguous() && st.storage_offset() == 0 &&
                  static_cast<std::size_t>(st.numel()) * st.element_size() == self.ref->nbytes();
        for (std::size_t i = 1; ok && i < found.size(); ++i)
            if (found[i].ref.get() == self.ref.get() ||
                (found[i].t.dim() > 0 && found[i].t.scalar_type() != st.scalar_type()))
                ok = false;
        for (std::size_t i = 0; ok && i < inputs.size(); ++i)
            if (mutated[i] && inputs[i].get() != self.ref.get()) ok = false;
        const bool self_constant = !rt_->is_rematerializable(self.ref->handle);
        const bool state_update = !c10::GradMode::is_enabled() && !in_backward_;
        if (ok && (self_constant || state_update)) {
            // the result must come out a constant: every input a constant, under no_grad
            if (!state_update) ok = false;
            if (ok && !self_constant) promote(self.ref);
            for (std::size_t i = 0; ok && i < inputs.size(); ++i)
                if (rt_->is_rematerializable(inputs[i]->handle)) ok = false;
        }
        if (ok) {
            const op_info& f = info.functional.cast<const op_info&>();
            py::object out = dispatch_impl(f, args, kwargs);
            const at::Tensor& o = THPVariable_Unpack(out.ptr());
            ref_ptr oref = py::getattr(out, "_dtr_ref").cast<ref_ptr>();
            if (o.sizes() != st.sizes() || o.strides() != st.strides() || o.storage_offset() != 0 ||
                o.scalar_type() != st.scalar_type() || oref->nbytes() != self.ref->nbytes())
                unsupported(info.name + ": its out-of-place form " + f.name +
                            " produced another layout (report this: the rewrite's preconditions "
                            "are wrong)");
            if (self_constant && !is_constant(oref))
                unsupported(info.name +
                            ": out-of-place form of a constant's update is not a constant");
            storage_ref::release(*rt_, std::exchange(self.ref->handle, oref->handle),
                                 self.ref->readers);
            self.ref->new_version();
            ++inplace_rewrites_;
            if (!self.ref->plains.empty()) follow_mutation(self.ref);
            return arg_object(0);
        }
    }
    // ---- in-place metadata operators --------------------------------------------------------
    if (info.kind == op_info::detach_inplace) return arg_object(0);
    if (info.kind == op_info::inplace_view)
        unsupported(info.name +
                    " changes a tensor's sizes or strides in place; use the out-of-place "
                    "form (e.g. t() instead of t_())");

    // ---- views: no runtime call, the result shares the argument's storage -----------------
    if (info.kind == op_info::view) {
        below_python_mode plain_aten;
        // Metadata-only storages (no memory) with the true sizes: views never read data.
        std::vector<c10::Storage> fake;
        fake.reserve(inputs.size());
        for (const ref_ptr& in : inputs)
            fake.push_back(borrowed_storage(nullptr, in->nbytes(), table_->device));
        for (const arg_slot& a : r->slots)
            if (a.kind == arg_slot::optional_tensor_list)
                unsupported(info.name + ": a view operator with optional tensor lists");
        torch::jit::Stack s = stack;
        fill_stack(s, r->slots, r->tensors, fake);
        {
            scoped_ns kt{prof.kernel_ns};
            boxed_call(*info.op, &s);
        }
        auto wrap_view = [&](const at::Tensor& t) -> py::object {
            if (!t.defined()) return py::none();
            if (t.is_conj() || t.is_neg())
                unsupported(info.name + " produced a conjugate or negative view (complex views)");
            const c10::StorageImpl* si = t.storage().unsafeGetStorageImpl();
            for (std::size_t i = 0; i < fake.size(); ++i)
                if (fake[i].unsafeGetStorageImpl() == si) return wrap(inputs[i], geometry::of(t));
            unsupported(info.name + " is declared a view but returned a tensor on new memory");
        };
        return python_results(stack_values(s, wrap_view));
    }

    // ---- fresh results ------------------------------------------------------------------
    std::size_t n_out = 0;
    for (std::size_t i = 0; i < rets.size(); ++i) {
        if (info.return_alias[i] >= 0) continue; // returns a written argument
        const auto kind = rets[i].type()->kind();
        if (kind == c10::TypeKind::TensorType ||
            (kind == c10::TypeKind::OptionalType &&
             rets[i].type()->containedType(0)->kind() == c10::TypeKind::TensorType)) {
            r->fresh_returns.push_back(i);
            ++n_out;
        } else if (kind == c10::TypeKind::ListType &&
                   rets[i].type()->containedType(0)->kind() == c10::TypeKind::TensorType) {
            // Tensor[] results: as many as the first tensor-list argument (the _foreach_ rule).
            if (info.first_list_arg < 0)
                unsupported(info.name +
                            " returns a list of tensors whose length is unknown before it runs");
            std::size_t len = 0;
            for (const found_tensor& f : found)
                if (f.arg == info.first_list_arg) ++len;
            r->fresh_returns.push_back(i);
            n_out += len;
        }
    }

    // ---- operators that produce no tensor and write nothing: run on pinned inputs -----------
    // Under no_grad, an operator whose inputs are all constants (optimizer arithmetic on
    // parameters, gradients and state; factories) yields constants: run it at once and adopt
    // its results, so that optimizer state never depends on a step's activations.
    bool eager_constant = !writes && n_out > 0 && !c10::GradMode::is_enabled() && !in_backward_;
    if (eager_constant)
        for (const ref_ptr& in : inputs)
            if (rt_->is_rematerializable(in->handle)) eager_constant = false;
    if ((n_out == 0 && !writes) || eager_constant) {
        pinned_inputs held = pin_all(inputs);
        below_python_mode plain_aten;
        const std::vector<c10::Storage>& st = held.storages;
        torch::jit::Stack s = stack;
        fill_stack(s, r->slots, r->tensors, st);
        {
            scoped_ns kt{prof.kernel_ns};
            boxed_call(*info.op, &s);
        }
        if (!eager_constant) {
            for (c10::IValue& v : s)
                if (v.isTensor() || v.isTensorList())
                    unsupported(info.name + " returned a tensor the bridge cannot classify");
            return torch::jit::createPyObjectForStack(std::move(s));
        }
        held.pins.clear();
        std::size_t out_bytes = 0; // the results, adopted one by one below
        auto constant_of = [&](const at::Tensor& t) -> py::object {
            if (!t.defined()) return py::none();
            if (t.layout() != at::kStrided || !t.has_storage())
                unsupported(info.name + " returned a tensor with layout " + c10::str(t.layout()));
            for (const c10::Storage& in : st)
                if (in.data_ptr().get() == t.storage().data_ptr().get() && in.nbytes() != 0)
                    unsupported(info.name + " returned a tensor sharing memory with an argument");
            auto ref = std::make_shared<storage_ref>();
            ref->rt = rt_;
            ref->runtime_id = id_;
            try {
                ref->handle = rt_->adopt(t.storage());
            } catch (const dtr::out_of_memory& e) {
                raise(oom_type_, info.name + ": " + e.what());
            }
            rt_->allow_offload(ref->handle, true); // a new storage only the bridge holds
            ++eager_constants_;
            out_bytes += ref->nbytes();
            return wrap(std::move(ref), geometry::of(t));
        };
        std::vector<py::object> results = stack_values(s, constant_of);
        // Its results sat beside its inputs: the tier's bound counts them (Adam's sqrt and
        // division, a foreach optimizer's whole-list operators).
        note_operator_bytes(info.name, inputs, mutated, out_bytes, false);
        return python_results(std::move(results));
    }

    // ---- a runtime call ---------------------------------------------------------------------
    // Long-lived state: an in-place update outside autograd (optimizer steps, running
    // statistics, manual updates under no_grad) of a computed storage first turns it into a
    // constant, so that state never chains back to the steps that produced it.
    if (writes && !c10::GradMode::is_enabled() && !in_backward_)
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (mutated[i]) promote(inputs[i]);

    r->op = info.op;
    for (const ref_ptr& in : inputs) {
        ++*in->readers;
        r->reads.push_back(in->readers);
    }
    r->stack = std::move(stack);
    r->input_mutated = mutated;
    r->n_outputs = n_out;
    if (info.random) {
        at::Generator g;
        if (info.generator_arg >= 0) {
            const c10::IValue& gv = r->stack[static_cast<std::size_t>(info.generator_arg)];
            if (gv.isGenerator()) g = gv.toGenerator();
        }
        if (!g.defined()) g = at::globalContext().defaultGenerator(table_->device);
        r->generator = g;
    }
    std::vector<dtr::tensor> in_handles;
    in_handles.reserve(inputs.size());
    for (const ref_ptr& in : inputs) in_handles.push_back(in->handle);
    std::vector<std::uint32_t> mutates;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (mutated[i]) mutates.push_back(static_cast<std::uint32_t>(i));

    std::vector<dtr::tensor> outs;
    try {
        std::optional<dtr::cost_t> cost;
        if (deterministic_costs_) {
            // Reproducible runs (tests): a cost that depends on the program only, not on the
            // machine's timing: the bytes the operator reads, plus a constant per call.
            dtr::cost_t c = 4096;
            for (const ref_ptr& in : inputs) c += static_cast<dtr::cost_t>(in->nbytes());
            cost = c;
        }
        scoped_ns ct{prof.runtime_call_ns};
        outs = rt_->call(recipe_op{r}, in_handles, n_out, std::move(mutates), cost);
    } catch (const dtr::out_of_memory& e) {
        raise(oom_type_, info.name + ": " + e.what());
    } catch (const dtr::thrashing& e) {
        raise(thrash_type_, info.name + ": " + e.what());
    }
    ++calls_;
    note_operator_bytes(info.name, inputs, mutated, r->io_bytes, true);
    in_handles.clear();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (mutated[i]) {
            inputs[i]->new_version();
            follow_mutation(inputs[i]);
        }
    }

    // Python results in the schema's return structure.
    std::size_t k = 0;
    auto fresh = [&]() -> py::object {
        dtr::tensor h = std::move(outs[k]);
        const bool defined = r->out_defined[k];
        const geometry g = r->out_geom[k];
        ++k;
        if (!defined) return py::none();
        auto ref = std::make_shared<storage_ref>();
        ref->rt = rt_;
        ref->runtime_id = id_;
        ref->handle = std::move(h);
        return wrap(std::move(ref), g);
    };
    std::vector<py::object> results;
    for (std::size_t i = 0; i < rets.size(); ++i) {
        if (info.return_alias[i] >= 0) {
            results.push_back(arg_object(info.return_alias[i]));
            continue;
        }
        const auto kind = rets[i].type()->kind();
        if (kind == c10::TypeKind::ListType) {
            std::size_t len = 0;
            for (const found_tensor& f : found)
                if (f.arg == info.first_list_arg) ++len;
            py::list l;
            for (std::size_t j = 0; j < len; ++j) l.append(fresh());
            results.push_back(std::move(l));
        } else {
            results.push_back(fresh());
        }
    }
    return python_results(std::move(results));
}

} // namespace dtr_torch

// ---------------------------------------------------------------------------------------
// Python module.

PYBIND11_MODULE(_dtr_torch, m) {
    using namespace dtr_torch;
    m.doc() = "dtr_torch's C++ half: ATen operators executed through dtr::runtime";
    cpu_counter(); // install the counting allocator before anything is allocated

    py::class_<storage_ref, ref_ptr>(m, "StorageRef")
        .def_property_readonly("nbytes", &storage_ref::nbytes)
        .def_property_readonly("runtime_id", [](const storage_ref& r) { return r.runtime_id; })
        .def("resident", [](const storage_ref& r) { return r.rt->is_resident(r.handle); })
        .def("constant", [](const storage_ref& r) { return !r.rt->is_rematerializable(r.handle); })
        .def("evict", [](const storage_ref& r) { return r.rt->evict(r.handle); });

    py::class_<op_info>(m, "OpInfo")
        .def(py::init([](const std::string& name, const std::string& overload, int kind,
                         std::vector<std::pair<int, int>> writes, std::vector<int> return_alias,
                         bool random, int generator_arg, int first_list_arg,
                         py::object functional) {
            auto h = c10::Dispatcher::singleton().findSchema({name, overload});
            if (!h)
                throw std::invalid_argument("dtr_torch: no ATen operator " + name + "." + overload);
            op_info i;
            i.op = *h;
            i.name = name + (overload.empty() ? "" : "." + overload);
            i.kind = static_cast<op_info::kind_t>(kind);
            i.writes = std::move(writes);
            i.return_alias = std::move(return_alias);
            i.random = random;
            i.generator_arg = generator_arg;
            i.first_list_arg = first_list_arg;
            i.functional = std::move(functional);
            if (i.return_alias.size() != h->schema().returns().size())
                throw std::invalid_argument("dtr_torch: return_alias does not match " + i.name);
            return i;
        }))
        .def_readonly("name", &op_info::name);

    py::class_<bridge>(m, "Bridge")
        .def(py::init<std::size_t, const std::string&, const std::string&, py::object, py::object,
                      py::object, const std::string&, const std::string&, std::size_t, double,
                      double>(),
             py::arg("budget"), py::arg("heuristic"), py::arg("device"), py::arg("wrapper_factory"),
             py::arg("oom_type"), py::arg("thrash_type"), py::arg("restore") = "yield_when_full",
             py::arg("dealloc") = "eager_evict", py::arg("host_memory") = 0,
             py::arg("offload_bandwidth") = 0.0, py::arg("offload_latency_ns") = 0.0)
        .def_property_readonly("id", &bridge::id)
        .def("dispatch", &bridge::dispatch)
        .def("adopt", [](bridge& b, py::object t) { return b.adopt(THPVariable_Unpack(t.ptr())); })
        .def("materialize",
             [](bridge& b, const ref_ptr& ref, py::object w) {
                 const at::Tensor& t = THPVariable_Unpack(w.ptr());
                 at::Tensor plain = b.materialize(ref, geometry::of(t));
                 return py::reinterpret_steal<py::object>(THPVariable_Wrap(plain));
             })
        .def("promote", &bridge::promote)
        .def("writable_alias",
             [](bridge& b, const ref_ptr& ref, py::object w) {
                 const at::Tensor& t = THPVariable_Unpack(w.ptr());
                 at::Tensor plain = b.writable_alias(ref, geometry::of(t));
                 return py::reinterpret_steal<py::object>(THPVariable_Wrap(plain));
             })
        .def("readers", &bridge::readers)
        .def("set_in_backward", &bridge::set_in_backward)
        .def("set_deterministic_costs", &bridge::set_deterministic_costs)
        .def("set_inplace_rewrite", &bridge::set_inplace_rewrite)
        .def("set_park_released", &bridge::set_park_released)
        .def("set_cost_clock", &bridge::set_cost_clock)
        .def("set_leaf_callback", &bridge::set_leaf_callback)
        .def("leaf_grads", [](bridge& b) { return b.leaf_grads(false); })
        .def("leaf_grad_pairs", [](bridge& b) { return b.leaf_grads(true); })
        .def("drop_adoption_refs", &bridge::drop_adoption_refs)
        .def("set_budget",
             [](bridge& b, std::size_t bytes) {
                 try {
                     b.rt().set_budget(bytes);
                 } catch (const dtr::out_of_memory& e) {
                     throw py::value_error(std::string("set_budget: ") + e.what());
                 }
             })
        .def_property_readonly("budget", [](bridge& b) { return b.rt().budget(); })
        .def_property_readonly("heuristic",
                               [](bridge& b) { return std::string(b.rt().heuristic_name()); })
        .def("set_remat_limit", [](bridge& b, double ns) { b.rt().set_remat_limit(ns); })
        .def("check_invariants", [](bridge& b) { b.rt().check_invariants(); })
        .def("stats", [](bridge& b) {
            const dtr::counters& c = b.rt().stats();
            py::dict d;
            d["operators_run"] = c.operators_run;
            d["rematerializations"] = c.rematerializations;
            // the zero-copy promotions evict the computed version they replace: counted apart
            d["evictions"] = c.evictions - b.promotions_zero_copy();
            d["promotion_evictions"] = b.promotions_zero_copy();
            d["eager_evictions"] = c.eager_evictions;
            d["banishments"] = c.banishments;
            d["storages_freed"] = c.storages_freed;
            d["allocations"] = c.allocations;
            d["bytes_allocated"] = c.bytes_allocated;
            d["resident_bytes"] = c.resident_bytes;
            d["peak_resident_bytes"] = c.peak_resident_bytes;
            d["heuristic_evaluations"] = c.heuristic_evaluations;
            d["victim_searches"] = c.victim_searches;
            d["victim_search_ns"] = c.victim_search_ns;
            d["compute_cost_ns"] = c.compute_cost;
            d["remat_cost_ns"] = c.remat_cost;
            d["runtime_work_in_operators_ns"] = c.runtime_work_in_operators;
            d["storages"] = b.rt().storage_count();
            d["operator_records"] = b.rt().operator_count();
            d["budget"] = b.rt().budget();
            d["promotions"] = b.promotions();
            d["promotions_zero_copy"] = b.promotions_zero_copy();
            d["eager_constants"] = b.eager_constants();
            d["inplace_rewrites"] = b.inplace_rewrites();
            d["inplace_direct"] = b.inplace_direct();
            d["in_place_reuses"] = c.in_place_reuses;
            d["max_op_bytes"] = b.max_op_bytes();
            d["max_op"] = b.max_op_name();
            d["max_tier_op_bytes"] = b.max_tier_op_bytes();
            d["max_tier_op"] = b.max_tier_op_name();
            d["calls"] = b.calls();
            d["adopted_outputs"] = b.rt().table().adopted;
            d["fresh_blocks"] = b.rt().table().fresh;
            d["blocks"] = b.rt().table().blocks.size();
            d["parked_total"] = b.rt().table().parked_total;
            d["pin_yields"] = c.pin_yields;
            d["hold_releases"] = c.hold_releases;
            // offload (Runtime(host_memory=...); all 0 without a host tier)
            d["offloads"] = c.offloads;
            d["offloads_clean"] = c.offloads_clean;
            d["constant_offloads"] = c.constant_offloads; // gradients and optimizer state
            d["copy_backs"] = c.copy_backs;
            d["bytes_offloaded"] = c.bytes_offloaded;
            d["bytes_copied_back"] = c.bytes_copied_back;
            d["host_bytes"] = c.host_bytes;
            d["peak_host_bytes"] = c.peak_host_bytes;
            d["transfer_cost_ns"] = c.transfer_cost;
            d["offload_bandwidth"] = b.transfer().bandwidth;
            d["offload_latency_ns"] = b.transfer().latency;
            return d;
        });

    m.def("allocator_stats", [] {
        py::dict d;
        d["current"] = cpu_counter().current();
        d["peak"] = cpu_counter().peak();
        d["total"] = cpu_counter().total();
        d["cached"] = cpu_counter().cached();
        d["reused"] = cpu_counter().reused();
        return d;
    });
    m.def("profile", [] {
        py::dict d;
        d["dispatch_ns"] = prof.dispatch_ns;
        d["kernel_ns"] = prof.kernel_ns;
        d["promote_ns"] = prof.promote_ns;
        d["promote_bytes"] = prof.promote_bytes;
        d["follow_ns"] = prof.follow_ns;
        d["stack_ns"] = prof.stack_ns;
        d["runtime_call_ns"] = prof.runtime_call_ns;
        d["wrap_ns"] = prof.wrap_ns;
        d["recipe_ns"] = prof.recipe_ns;
        d["recipe_kernel_ns"] = prof.recipe_kernel_ns;
        d["remat_recipe_ns"] = prof.remat_recipe_ns;
        d["remat_kernel_ns"] = prof.remat_kernel_ns;
        d["clock"] = prof_ops ? "thread_cpu" : "wall";
        return d;
    });
    m.def("reset_profile", [] {
        prof = profile_counters{};
        prof_by_op.clear();
    });
    m.def("profile_ops", [](bool on) { prof_ops = on; });
    m.def("profile_by_op", [] {
        py::dict d;
        for (auto& [k, v] : prof_by_op)
            d[py::str(k)] = py::make_tuple(v.calls, v.ns, v.remats, v.remat_ns);
        return d;
    });
    m.def("reset_allocator_peak", [] { cpu_counter().reset_peak(); });
    m.def("set_allocator_caching", [](bool on) { cpu_counter().set_caching(on); });
    m.def("pause_allocator_cache", [](bool on) { cpu_counter().set_paused(on); });
    m.attr("cuda_compiled") = false;
}
