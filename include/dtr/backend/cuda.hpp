// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief cuda_backend: CUDA device memory from one region reserved up front, operators on a
//! user-supplied stream, costs measured with CUDA events and read back lazily.
//!
//! Why one region. DTR exists to fit training into device memory, so the budget must hold
//! physically. Earlier DTR systems counted live bytes while the device allocator underneath
//! fragmented, and overshot (7.77 GB on a 6 GB budget). Here cudaMalloc is called once, at
//! construction, and every block is placed in that region by dtr::arena (best fit, 256-byte
//! alignment): the device never holds more than the region, and when the region is too
//! fragmented for a request the budget allows, allocate() says so and the runtime evicts and
//! retries.
//!
//! Why lazy costs. Operators enqueue work on the stream and return at once. Learning each
//! one's cost by synchronizing would serialize host and device. Instead execute() records a
//! pair of CUDA events around the operator in a ring of slots and returns a provisional
//! cost: the host time spent enqueueing. collect_costs() (dtr::deferred_costs) later turns
//! finished event pairs into true costs, in execute() order, and the runtime corrects what it
//! recorded. The only waits are bounded: when every slot is in flight, the next execute()
//! waits for the oldest measurement (the device is then more than timing_slots operators
//! behind the host), and runtime::settle_costs() waits for all of them.
//!
//! Only <cuda_runtime_api.h> is needed: this header compiles with the host compiler and links
//! against cudart. Kernels, compiled by nvcc, are the operators' business.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/backend/cuda_error.hpp>
#include <dtr/backend/device_pointer.hpp>
#include <dtr/concepts.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/error.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/offload.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtr {

//! @brief Construction-time settings of a cuda_backend beyond its size and stream.
struct cuda_backend_options {
    //! Event pairs measuring operators in flight. More slots let the host run further ahead
    //! of the device before execute() waits for the oldest measurement; 0 turns event
    //! timing off (costs are then the host's enqueue time, final at once).
    std::size_t timing_slots = 256;
    //! A host tier of pinned host memory (cudaHostAlloc) for offload
    //! (runtime_options::offload), with its own copy stream; off by default. Its transfer
    //! model is what the offload decision compares with recomputation; the true transfer
    //! times reach the clock through the operators that wait for them.
    bool host_tier = false;
    //! The host tier's capacity and transfer model (used only with `host_tier`). Its
    //! `overlap` is ignored: transfers always run on the copy stream (transfers_overlap()).
    host_tier_options tier{};
};

//! @brief CUDA device memory for dtr::runtime.
//!
//! Contract:
//! - Memory: one region of `capacity` bytes (rounded down to 256) reserved with cudaMalloc
//!   on the device current at construction, freed at destruction. Blocks are 256-byte
//!   aligned. allocate() returns a null pointer when no free block is large enough.
//! - Streams: every operation the backend issues (operator timing, copies) is ordered on
//!   stream(), and operators must launch their work on it (`ctx.backend().stream()`). A
//!   freed block is reused at once by the next allocation: stream order is what makes that
//!   safe, so work touching runtime memory on another stream must first be joined to
//!   stream() (cudaStreamWaitEvent).
//! - Device: the device current at construction must be current whenever the backend (or
//!   the runtime owning it) is used.
//! - Errors: CUDA failures throw dtr::cuda_error naming the call; failing to reserve the
//!   region throws dtr::cuda_out_of_memory (a dtr::out_of_memory), as does any call that
//!   reports cudaErrorMemoryAllocation. A kernel launch that fails inside an operator fails
//!   that call (the runtime discards its outputs). Asynchronous errors (a faulting kernel)
//!   surface in whichever later call reports them.
//!
//! - Offload (with cuda_backend_options::host_tier; dtr::offloading_backend): host copies are
//!   pinned host blocks (cudaHostAlloc). Transfers run on a copy stream of the backend's
//!   own, ordered with stream() by events: a transfer waits for the work already on
//!   stream() (the block it reads or fills may still be in use), and stream() waits for the
//!   transfer before anything enqueued after it (the block is reused, or read). So transfers
//!   overlap the compute enqueued before them, and copy_out/copy_in return `now`: the wait
//!   shows in the measured cost of the operators behind them.
//!
//! Not thread-safe, like the runtime that owns it. Move-only.
class cuda_backend {
public:
    //! A device address (dtr::device_pointer): host code cannot dereference it.
    using pointer = device_pointer<std::byte>;
    using const_pointer = device_pointer<const std::byte>;

    //! Alignment of the region and of every block.
    static constexpr std::size_t alignment = 256;

    //! @brief Reserves `capacity` bytes (rounded down to 256) on the current device and
    //! prepares `options.timing_slots` event pairs for measuring operators on `stream`.
    //! @param stream the stream operators run on; the backend does not own it, and it must
    //!        outlive the backend (0 is the legacy default stream).
    //! Effects: one cudaMalloc for the region; with `options.host_tier`, also creates the
    //! copy stream (non-blocking) and its two events. On a throw, whatever was created is
    //! released again.
    //! Throws: dtr::logic_error when the capacity is below 256 bytes;
    //!         dtr::cuda_out_of_memory when the device cannot provide the region (info():
    //!         the bytes requested and the device's free bytes);
    //!         dtr::cuda_error when there is no usable device, the stream is invalid, or an
    //!         event or the copy stream cannot be created; std::bad_alloc for the slots.
    //! Complexity: O(options.timing_slots) event creations.
    cuda_backend(std::size_t capacity, cudaStream_t stream, cuda_backend_options options = {})
        : stream_(stream), arena_(capacity, alignment) {
        DTR_EXPECTS(arena_.capacity() != 0, "cuda_backend: a region of " +
                                                std::to_string(capacity) +
                                                " bytes holds no 256-byte block");
        DTR_CUDA_TRY(cudaGetDevice(&device_));
        // A bad stream fails here, named, rather than at the first operator.
        if (const cudaError_t e = cudaStreamQuery(stream);
            e != cudaSuccess && e != cudaErrorNotReady)
            detail::throw_cuda_error(
                e, "cudaStreamQuery(stream) (checking the stream given to cuda_backend)", __FILE__,
                __LINE__);
        reserve_region();
        try {
            slots_.resize(options.timing_slots);
            for (timing_slot& s : slots_) {
                DTR_CUDA_TRY(cudaEventCreateWithFlags(&s.start, cudaEventDefault));
                DTR_CUDA_TRY(cudaEventCreateWithFlags(&s.stop, cudaEventDefault));
            }
            ready_.reserve(slots_.empty() ? 64 : slots_.size());
            if (options.host_tier) {
                tier_ = host_tier(options.tier);
                DTR_CUDA_TRY(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
                DTR_CUDA_TRY(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
                DTR_CUDA_TRY(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming));
            }
        } catch (...) {
            release();
            throw;
        }
    }

    //! @brief Effects: takes over `other`'s region, events, copy stream and measurements in
    //! flight (no CUDA call); `other` is left with none of them, so destroying it makes no
    //! CUDA call.
    cuda_backend(cuda_backend&& other) noexcept
        : stream_(other.stream_),
          device_(other.device_),
          arena_(std::move(other.arena_)),
          base_(std::exchange(other.base_, nullptr)),
          slots_(std::move(other.slots_)),
          head_(std::exchange(other.head_, 0)),
          in_flight_(std::exchange(other.in_flight_, 0)),
          ready_(std::move(other.ready_)),
          refusals_(other.refusals_),
          tier_(other.tier_),
          copy_stream_(std::exchange(other.copy_stream_, nullptr)),
          compute_done_(std::exchange(other.compute_done_, nullptr)),
          copy_done_(std::exchange(other.copy_done_, nullptr)) {
        other.slots_.clear();
        other.ready_.clear();
    }
    cuda_backend& operator=(cuda_backend&&) = delete;
    cuda_backend(const cuda_backend&) = delete;
    cuda_backend& operator=(const cuda_backend&) = delete;

    //! @brief Effects: waits for the copy stream and destroys it, waits for stream() (its
    //! kernels may still use the region), then frees the events and the region. Errors are
    //! ignored, and cleared: a destructor cannot report them, and a device that failed has
    //! already reported through the calls that saw it. Pinned host copies are not freed
    //! here: that is free_host()'s job.
    ~cuda_backend() { release(); }

    // ---- the dtr::backend contract --------------------------------------------------------

    //! @brief A new block, the best fit in the region. No CUDA call: the region is already
    //! reserved.
    //!
    //! Returns: `bytes` bytes, 256-aligned (a zero-byte request gets a distinct block), or a
    //! null pointer when no free block is large enough (counted in refusals()).
    //! Throws: std::bad_alloc only if the arena's host-side bookkeeping cannot grow (nothing
    //! changed).
    //! Complexity: O(log blocks).
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        const std::optional<std::size_t> offset = arena_.allocate(bytes);
        if (!offset) {
            ++refusals_;
            return pointer{};
        }
        return pointer(base_ + *offset);
    }

    //! @brief Effects: gives back a block obtained from allocate(bytes) (`bytes` is not
    //! checked), without a CUDA call or a wait. It may be reused by the next allocate(),
    //! which is safe for work ordered on stream(). A pointer that is not the start of a live
    //! block is a bug in the caller and terminates (the arena throws in a noexcept function).
    //! Complexity: O(log blocks).
    void deallocate(pointer p, std::size_t /*bytes*/) noexcept {
        arena_.deallocate(static_cast<std::size_t>(p.get() - base_));
    }

    //! @brief Effects: enqueues a device-to-device copy of `bytes` bytes on stream() and
    //! returns without waiting (no CUDA call for zero bytes).
    //! Throws: dtr::cuda_error when cudaMemcpyAsync fails.
    void copy(pointer dst, const_pointer src, std::size_t bytes) {
        if (bytes != 0)
            DTR_CUDA_TRY(
                cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_));
    }

    //! @brief Effects: runs the operator body on the calling thread (it enqueues work on
    //! stream()) and starts a measurement of that work with a pair of events recorded on
    //! stream(). If every timing slot is in flight, first waits for the oldest one to finish
    //! (cudaEventSynchronize). With timing off (no slots) the host time is final at once.
    //! Returns: the provisional cost: the host time the body took, in nanoseconds, on
    //! std::chrono::steady_clock. The true cost follows through collect_costs().
    //! Throws: dtr::cuda_error when waiting for the oldest measurement reports an error,
    //!         when recording an event fails, or when a launch inside the body failed
    //!         (cudaGetLastError after the body; a launch error left pending before the body
    //!         is cleared first, not reported); whatever the body throws. A throwing
    //!         execute() starts no measurement.
    template <class Body>
    cost_t execute(Body&& body) {
        // A launch error left pending by code outside the runtime is not this operator's.
        (void)cudaGetLastError();
        timing_slot* slot = nullptr;
        if (!slots_.empty()) {
            slot = &claim_slot();
            DTR_CUDA_TRY(cudaEventRecord(slot->start, stream_));
        }
        // After claim_slot(): waiting for an old measurement is not this operator's cost.
        const auto start = std::chrono::steady_clock::now();
        body();
        // cudaErrorNotReady is no launch error: an event or stream query inside the body (a
        // victim search collecting costs) may leave it behind.
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess && e != cudaErrorNotReady)
            detail::throw_cuda_error(
                e, "the operator's kernel launches (cudaGetLastError after the body)", __FILE__,
                __LINE__);
        if (slot != nullptr) DTR_CUDA_TRY(cudaEventRecord(slot->stop, stream_));
        const auto host = static_cast<cost_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - start)
                                                  .count());
        if (slot != nullptr)
            ++in_flight_; // the measurement starts only now that nothing can throw
        else
            ready_.push_back(host); // timing off: the provisional cost is final
        return host;
    }

    //! @brief Effects: hands the true cost (ns, from the events) of each finished
    //! measurement to `sink(cost_t)`, oldest first, each once (dtr::deferred_costs).
    //! - routine: queries the events only when at least half the slots are in flight (one
    //!   cudaEventQuery per finished slot plus one); hands over what has been read back;
    //! - ready: queries until the oldest in flight has not finished, never waits;
    //! - wait: waits for every measurement in flight (cudaEventSynchronize), then hands all
    //!   over.
    //! With timing off, every mode hands over the host times at once, with no CUDA call.
    //! Returns: how many costs reached `sink`.
    //! Throws: dtr::cuda_error when the device reports an error (e.g. a faulting kernel
    //!         earlier on the stream); then nothing reaches `sink`, and measurements not
    //!         handed over stay pending.
    template <class Sink>
    std::size_t collect_costs(Sink&& sink, cost_collection mode) {
        if (mode != cost_collection::routine || 2 * in_flight_ >= slots_.size())
            while (in_flight_ != 0 && retire_oldest(mode == cost_collection::wait)) {}
        const std::size_t handed = ready_.size();
        for (const cost_t c : ready_) sink(c);
        ready_.clear();
        return handed;
    }

    //! @brief Returns: the region's layout now, never std::nullopt (the region is fixed);
    //! its `refusals` is refusals(). No CUDA call.
    //! Complexity: O(1).
    [[nodiscard]] std::optional<memory_report> memory_info() const noexcept {
        return memory_report_of(arena_, refusals_);
    }

    // ---- device access --------------------------------------------------------------------

    //! @brief Returns: the stream operators must launch on (the one given at construction).
    [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
    //! @brief Returns: the device holding the region (current at construction).
    [[nodiscard]] int device() const noexcept { return device_; }

    //! @brief Effects: enqueues a copy of `bytes` host bytes into device memory on stream()
    //! (no CUDA call for zero bytes). From pageable memory `src` may be reused as soon as
    //! this returns; from page-locked memory it must stay valid until the stream reaches the
    //! copy.
    //! Throws: dtr::cuda_error when cudaMemcpyAsync fails.
    void upload(pointer dst, const void* src, std::size_t bytes) {
        if (bytes != 0)
            DTR_CUDA_TRY(cudaMemcpyAsync(dst.get(), src, bytes, cudaMemcpyHostToDevice, stream_));
    }

    //! @brief Effects: copies `bytes` device bytes to host memory after the work already on
    //! stream(), and waits for it (one stream synchronization, even for zero bytes): `dst`
    //! holds the bytes on return.
    //! Throws: dtr::cuda_error when the copy fails or the synchronization reports an error
    //! of any work on stream().
    void download(void* dst, const_pointer src, std::size_t bytes) {
        if (bytes != 0)
            DTR_CUDA_TRY(cudaMemcpyAsync(dst, src.get(), bytes, cudaMemcpyDeviceToHost, stream_));
        synchronize();
    }

    //! @brief Effects: waits for all work enqueued on stream() so far (cudaStreamSynchronize),
    //! which includes the transfers stream() was ordered after.
    //! Throws: dtr::cuda_error when the synchronization reports an error.
    void synchronize() { DTR_CUDA_TRY(cudaStreamSynchronize(stream_)); }

    // ---- statistics -----------------------------------------------------------------------

    // None of these makes a CUDA call.

    //! @brief Returns: the bytes of the region (the constructor's capacity rounded down to
    //! 256).
    [[nodiscard]] std::size_t capacity() const noexcept { return arena_.capacity(); }
    //! @brief Returns: the region's bytes in live blocks (requests rounded up to 256).
    [[nodiscard]] std::size_t used_bytes() const noexcept { return arena_.used_bytes(); }
    //! @brief Returns: the highest used_bytes() so far: the device memory the runtime really
    //! needed.
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return arena_.peak_used_bytes(); }
    //! @brief Returns: the number of allocate() calls answered with a null pointer so far.
    [[nodiscard]] std::uint64_t refusals() const noexcept { return refusals_; }
    //! @brief Returns: the measurements started whose cost has not been read back from their
    //! events yet (at most cuda_backend_options::timing_slots).
    [[nodiscard]] std::size_t measurements_in_flight() const noexcept { return in_flight_; }
    //! @brief Returns: the allocator (e.g. to walk the blocks in a test).
    [[nodiscard]] const arena& layout() const noexcept { return arena_; }
    //! @brief Returns: the start of the region; block addresses are base() + arena offset.
    [[nodiscard]] const_pointer base() const noexcept { return const_pointer(base_); }

    //! @brief As allocate(bytes), placed as `where` says (runtime_options::placement).
    //! Returns: the block, or a null pointer when no free block is large enough (counted in
    //! refusals()).
    //! Throws: std::bad_alloc only if the arena's host-side bookkeeping cannot grow (nothing
    //! changed).
    //! Complexity: O(log blocks) for arena::placement::best_fit; O(blocks) worst case for
    //! arena::placement::high.
    [[nodiscard]] pointer allocate(std::size_t bytes, arena::placement where) {
        const std::optional<std::size_t> offset = arena_.allocate(bytes, where);
        if (!offset) {
            ++refusals_;
            return pointer{};
        }
        return pointer(base_ + *offset);
    }

    // ---- dtr::reports_layout: the region's blocks, for fragmentation-aware eviction --------
    //! @brief Returns: true (the region is fixed, so the runtime may search it for windows).
    [[nodiscard]] bool has_layout() const noexcept { return true; }
    //! @brief Returns: 256, the arena's alignment.
    [[nodiscard]] std::size_t layout_alignment() const noexcept { return arena_.alignment(); }
    //! @brief Returns: the region offset of the block allocate() returned as `p` (host
    //! arithmetic on the address; the device is not touched).
    [[nodiscard]] std::size_t region_offset(const_pointer p) const noexcept {
        return static_cast<std::size_t>(p.get() - base_);
    }
    //! @brief Effects: calls `fn(offset, size, is_free)` for every block of the region in
    //! address order (host-side bookkeeping; no CUDA call).
    //! Throws: what `fn` throws.
    //! Complexity: O(blocks).
    template <class Fn>
    void for_each_block(Fn&& fn) const {
        arena_.for_each_block(fn);
    }

    // ---- dtr::offloading_backend: pinned host memory and a copy stream ------------------------
    //! A pinned host block (cudaHostAlloc) holding a storage's bytes; null once freed.
    struct host_copy {
        void* bytes = nullptr;
    };
    //! @brief Returns: whether the backend was built with cuda_backend_options::host_tier
    //! (it then has a copy stream).
    [[nodiscard]] bool has_host_tier() const noexcept { return copy_stream_ != nullptr; }
    //! @brief Returns: whether there is a host tier and `bytes` more fit in its
    //! host_tier_options::capacity. Pinned memory itself may still run out: copy_out() then
    //! throws.
    [[nodiscard]] bool host_room(std::size_t bytes) const noexcept {
        return has_host_tier() && tier_.room(bytes);
    }
    //! @brief Returns: the modelled cost in ns of moving `bytes` either way
    //! (cuda_backend_options::tier's transfer model, the default one without a tier; not a
    //! measurement), which the offload decision compares with recomputation.
    [[nodiscard]] cost_t transfer_cost(std::size_t bytes) const noexcept {
        return tier_.cost(bytes);
    }
    //! @brief Returns: true: transfers run on the copy stream, concurrently with compute.
    [[nodiscard]] bool transfers_overlap() const noexcept { return true; }
    //! @brief A new host copy of the device block `src` (host tier only).
    //!
    //! Effects: allocates a pinned host block (cudaHostAlloc; one byte for zero bytes) and
    //! enqueues the device-to-host copy on the copy stream after the work already on
    //! stream(); stream() waits for it before anything enqueued later, so the device block
    //! may be reused at once. The host does not wait. host_room() is not checked: the
    //! runtime checks it first.
    //! Returns: the copy, and `now` as the time the block is reusable: the wait shows in the
    //! measured cost of the operators behind it.
    //! Throws: dtr::cuda_out_of_memory when pinned host memory runs out; dtr::cuda_error
    //! when an event or the copy cannot be enqueued (the pinned block is then freed).
    [[nodiscard]] copy_out_result<host_copy> copy_out(const_pointer src, std::size_t bytes,
                                                      cost_t now) {
        void* p = nullptr;
        DTR_CUDA_TRY(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
        try {
            transfer(p, src.get(), bytes, cudaMemcpyDeviceToHost);
        } catch (...) {
            (void)cudaFreeHost(p);
            throw;
        }
        tier_.hold(bytes);
        return {host_copy{p}, now};
    }
    //! @brief Returns: whether the copy stream has nothing in flight (cudaStreamQuery);
    //! false without a host tier. `now` is unused: the stream itself answers.
    [[nodiscard]] bool copy_stream_idle(cost_t /*now*/) const noexcept {
        if (copy_stream_ == nullptr) return false;
        const cudaError_t e = cudaStreamQuery(copy_stream_);
        if (e != cudaSuccess && e != cudaErrorNotReady) (void)cudaGetLastError();
        return e == cudaSuccess;
    }
    //! @brief A new host copy of the device block `src`, which stays in use
    //! (runtime_options::offload_ahead; host tier only).
    //!
    //! Effects: as copy_out(), except that stream() does not wait for the transfer: the
    //! compute enqueued later overlaps it. Before the block is freed, fence_host_copy()
    //! orders its reuse after the transfer.
    //! Returns: the copy, and `now`.
    //! Throws: as copy_out().
    [[nodiscard]] copy_out_result<host_copy> copy_out_ahead(const_pointer src, std::size_t bytes,
                                                            cost_t now) {
        void* p = nullptr;
        DTR_CUDA_TRY(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
        try {
            transfer(p, src.get(), bytes, cudaMemcpyDeviceToHost, false);
        } catch (...) {
            (void)cudaFreeHost(p);
            throw;
        }
        tier_.hold(bytes);
        return {host_copy{p}, now};
    }
    //! @brief Effects: makes stream() wait for the transfers issued so far (the last one
    //! recorded on the copy stream, which runs them in order), so that the block an ahead
    //! copy reads is reused only after it has been read. CUDA errors are ignored and cleared.
    void fence_host_copy(const host_copy& /*copy*/) noexcept {
        if (copy_stream_ == nullptr) return;
        if (cudaStreamWaitEvent(stream_, copy_done_, 0) != cudaSuccess) (void)cudaGetLastError();
    }
    //! @brief Effects: enqueues the copy of a host copy into the device block `dst` on the
    //! copy stream, after the work already on stream(); stream() waits for it before
    //! anything enqueued later (the operators that read `dst`). The host does not wait, and
    //! the host copy stays valid (free_host() frees it). Host tier only.
    //! Returns: `now`: the wait shows in the measured cost of the operators behind it.
    //! Throws: dtr::cuda_error when an event or the copy cannot be enqueued.
    cost_t copy_in(pointer dst, const host_copy& copy, std::size_t bytes, cost_t now) {
        transfer(dst.get(), copy.bytes, bytes, cudaMemcpyHostToDevice);
        return now;
    }
    //! @brief Effects: for a copy that holds a block, waits for the copy stream (a transfer
    //! may still read or fill the block), frees it (cudaFreeHost), nulls `copy.bytes` and
    //! gives `bytes` back to the tier; nothing for a null copy. CUDA errors are ignored and
    //! cleared.
    //! Complexity: one synchronization of the copy stream.
    void free_host(host_copy& copy, std::size_t bytes) noexcept {
        if (copy.bytes == nullptr) return;
        (void)cudaStreamSynchronize(copy_stream_);
        (void)cudaFreeHost(copy.bytes);
        (void)cudaGetLastError();
        copy.bytes = nullptr;
        tier_.release(bytes);
    }
    //! @brief Returns: the stream transfers run on, owned by the backend (null without a
    //! host tier).
    [[nodiscard]] cudaStream_t copy_stream() const noexcept { return copy_stream_; }
    //! @brief Returns: the bytes held in pinned host copies now (the sizes copied out, not
    //! the pinned blocks' sizes).
    [[nodiscard]] std::size_t host_bytes() const noexcept { return tier_.used_bytes(); }

private:
    //! One transfer on the copy stream, ordered after stream()'s work; `compute_waits`:
    //! and before stream()'s next work (false for copies ahead of eviction).
    void transfer(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                  bool compute_waits = true) {
        DTR_CUDA_TRY(cudaEventRecord(compute_done_, stream_));
        DTR_CUDA_TRY(cudaStreamWaitEvent(copy_stream_, compute_done_, 0));
        if (bytes != 0) DTR_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, copy_stream_));
        DTR_CUDA_TRY(cudaEventRecord(copy_done_, copy_stream_));
        if (compute_waits) DTR_CUDA_TRY(cudaStreamWaitEvent(stream_, copy_done_, 0));
    }

    struct timing_slot {
        cudaEvent_t start = nullptr;
        cudaEvent_t stop = nullptr;
    };

    void reserve_region() {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, arena_.capacity());
        if (e == cudaSuccess) {
            base_ = static_cast<std::byte*>(p);
            return;
        }
        if (e != cudaErrorMemoryAllocation)
            detail::throw_cuda_error(e, "cudaMalloc(region)", __FILE__, __LINE__);
        (void)cudaGetLastError();
        std::size_t free = 0, total = 0;
        if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
            (void)cudaGetLastError();
            free = total = 0;
        }
        out_of_memory::details d;
        d.requested = arena_.capacity();
        d.free_total = free;
        throw cuda_out_of_memory("dtr: cuda_backend: cannot reserve a region of " +
                                     std::to_string(arena_.capacity()) + " bytes on device " +
                                     std::to_string(device_) + " (" + std::to_string(free) +
                                     " of " + std::to_string(total) + " bytes free): CUDA error " +
                                     detail::cuda_error_text(e) + " in cudaMalloc(region) [" +
                                     detail::cuda_error_location(__FILE__, __LINE__) + ']',
                                 d);
    }

    //! The slot for the next measurement; waits for the oldest when all are in flight.
    timing_slot& claim_slot() {
        if (in_flight_ == slots_.size()) retire_oldest(true);
        return slots_[(head_ + in_flight_) % slots_.size()];
    }

    //! Turns the oldest measurement into a cost in ready_, waiting for it if `wait`;
    //! false (and nothing changed) when it has not finished and `wait` is false.
    bool retire_oldest(bool wait) {
        timing_slot& s = slots_[head_];
        if (wait) {
            DTR_CUDA_TRY(cudaEventSynchronize(s.stop));
        } else if (const cudaError_t e = cudaEventQuery(s.stop); e == cudaErrorNotReady) {
            return false;
        } else if (e != cudaSuccess) {
            detail::throw_cuda_error(e, "cudaEventQuery(stop) (an operator measured earlier)",
                                     __FILE__, __LINE__);
        }
        float ms = 0.0F;
        DTR_CUDA_TRY(cudaEventElapsedTime(&ms, s.start, s.stop));
        ready_.push_back(static_cast<cost_t>(ms) * 1e6); // before the slot is released
        head_ = (head_ + 1) % slots_.size();
        --in_flight_;
        return true;
    }

    void release() noexcept {
        if (copy_stream_ != nullptr) {
            (void)cudaStreamSynchronize(copy_stream_);
            (void)cudaStreamDestroy(copy_stream_);
            copy_stream_ = nullptr;
        }
        if (compute_done_ != nullptr) (void)cudaEventDestroy(compute_done_);
        if (copy_done_ != nullptr) (void)cudaEventDestroy(copy_done_);
        compute_done_ = copy_done_ = nullptr;
        if (base_ == nullptr && slots_.empty()) return; // moved from: no CUDA call at all
        if (base_ != nullptr) (void)cudaStreamSynchronize(stream_);
        for (timing_slot& s : slots_) {
            if (s.start != nullptr) (void)cudaEventDestroy(s.start);
            if (s.stop != nullptr) (void)cudaEventDestroy(s.stop);
        }
        slots_.clear();
        if (base_ != nullptr) (void)cudaFree(base_);
        base_ = nullptr;
        (void)cudaGetLastError(); // leave no error of ours pending for the caller
    }

    cudaStream_t stream_;
    int device_ = 0;
    arena arena_;
    std::byte* base_ = nullptr;
    std::vector<timing_slot> slots_; //!< ring: [head_, head_ + in_flight_) are in flight
    std::size_t head_ = 0;
    std::size_t in_flight_ = 0;
    std::vector<cost_t> ready_; //!< finished, not yet handed over, oldest first
    std::uint64_t refusals_ = 0;
    // Offload: the host tier's bookkeeping, the copy stream and the events ordering it.
    host_tier tier_{};
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t compute_done_ = nullptr;
    cudaEvent_t copy_done_ = nullptr;
};

static_assert(backend<cuda_backend>, "cuda_backend must model dtr::backend");
static_assert(deferred_costs<cuda_backend>, "cuda_backend hands over its costs lazily");
static_assert(reports_memory<cuda_backend>, "cuda_backend reports its region");
static_assert(reports_layout<cuda_backend>, "cuda_backend describes its region's blocks");
static_assert(offloading_backend<cuda_backend>, "cuda_backend offers a pinned host tier");

} // namespace dtr
