// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief fault_injecting_backend: an adaptor around any dtr::backend that makes a chosen
//! fraction of allocations fail, of operator executions throw and, on a backend with a host
//! tier, of transfers between the tiers throw, reproducibly from a seed.
//!
//! Why. The runtime promises that a failed allocation (the backend refusing a block) is
//! handled by evicting and retrying or by a dtr::out_of_memory that loses nothing, and that
//! an operator that throws, at any depth of a rematerialization, leaves no trace. Those
//! paths are rare in ordinary runs; the property tests run their random programs under this
//! adaptor so that they are taken thousands of times, at random points, with the results
//! still compared bit for bit against an undisturbed run.
//!
//! What is injected:
//! - allocate() (also the placed allocate(bytes, placement) of the arena backends): with
//!   probability `allocation_fault_rate` the call returns the null pointer without asking the
//!   wrapped backend, exactly what a full or fragmented device does;
//! - execute(body): with probability `execution_fault_rate` the call throws
//!   dtr::injected_fault, either before the body runs (nothing of it happened) or after the
//!   wrapped backend ran it (its outputs were written, then the operator failed), the share
//!   of the latter being `after_body_share`;
//! - on a backend with a host tier (dtr::offloading_backend, and dtr::copying_ahead_backend),
//!   copy_out(), copy_out_ahead() and copy_in(): with probability `transfer_fault_rate` the
//!   call throws dtr::injected_fault without asking the wrapped backend, as a failed transfer
//!   or a full host tier would (the runtime then drops the victim it was copying out, or
//!   fails the read that was copying a storage back, losing nothing).
//! deallocate(), copy(), free_host() and fence_host_copy() are never disturbed (freeing
//! cannot fail; copy-on-write copies run inside the operator body, so an execution fault
//! covers them).
//!
//! Reproducibility: allocations, executions and transfers each draw from their own SplitMix64
//! stream seeded from `seed`, one draw per call while injection is enabled (an execution
//! fault takes a second draw for its site). The n-th call of each kind therefore fails or not
//! regardless of the other kinds, of the platform's standard library, and of the rate: with
//! the same seed, a lower rate fails a subset of the calls a higher rate fails.
#pragma once

#include <dtr/arena.hpp>
#include <dtr/backend/host.hpp>
#include <dtr/backend/host_arena.hpp>
#include <dtr/backend/sim.hpp>
#include <dtr/concepts.hpp>
#include <dtr/cost_clock.hpp>
#include <dtr/deferred_cost.hpp>
#include <dtr/error.hpp>
#include <dtr/memory_report.hpp>
#include <dtr/offload.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace dtr {

//! @brief Where an injected fault was thrown.
enum class fault_site : std::uint8_t {
    before_body, //!< execute(): the operator body did not run
    after_body,  //!< execute(): the wrapped backend ran the body, then the execution failed
    copy_out,    //!< copy_out() or copy_out_ahead(): nothing was copied to the host tier
    copy_in,     //!< copy_in(): nothing was copied back from the host tier
};

//! @brief The exception fault_injecting_backend throws for an injected fault in an execution
//! or a transfer. A std::runtime_error (not a dtr::logic_error nor an out_of_memory), as a
//! failing kernel or a device error would be: to the runtime it is whatever an operator, or
//! the backend's tier, throws.
class injected_fault : public std::runtime_error {
public:
    //! @brief The fault of call number `index` of its kind (execute() calls for the body
    //! sites, transfers for the copy sites), thrown at `site`; what() names both.
    injected_fault(fault_site site, std::uint64_t index)
        : std::runtime_error(describe(site, index)), site_(site), index_(index) {}
    //! @brief Returns: where it was thrown: before or after an operator's body, or in a
    //! transfer out to or back from the host tier.
    [[nodiscard]] fault_site site() const noexcept { return site_; }
    //! @brief Returns: for the body sites, the index of the failed execute() call, counting
    //! from 0 for this backend (fault_counters::executions before the call); for the copy
    //! sites, that of the failed transfer (fault_counters::transfers before it).
    [[nodiscard]] std::uint64_t execution() const noexcept { return index_; }

private:
    static std::string describe(fault_site site, std::uint64_t index) {
        const std::string n = std::to_string(index);
        if (site == fault_site::before_body || site == fault_site::after_body)
            return std::string("dtr: injected fault ") +
                   (site == fault_site::before_body ? "before" : "after") +
                   " the body of execution #" + n + " (fault_injecting_backend)";
        return "dtr: injected fault in transfer #" + n + ", a copy " +
               (site == fault_site::copy_out ? "out to" : "back from") +
               " the host tier (fault_injecting_backend)";
    }

    fault_site site_;
    std::uint64_t index_;
};

//! @brief What fault_injecting_backend injects. Rates are probabilities in [0, 1].
struct fault_options {
    std::uint64_t seed = 0;           //!< seeds the allocation, execution and transfer streams
    double allocation_fault_rate = 0; //!< share of allocate() calls answered with null
    double execution_fault_rate = 0;  //!< share of execute() calls that throw injected_fault
    double after_body_share = 0.5;    //!< share of execution faults thrown after the body ran
    //! Share of transfers between the tiers (copy_out, copy_out_ahead, copy_in) that throw
    //! injected_fault; used only on a backend with a host tier.
    double transfer_fault_rate = 0;
};

//! @brief Calls seen and faults injected by a fault_injecting_backend.
struct fault_counters {
    std::uint64_t allocations = 0;        //!< allocate() calls
    std::uint64_t allocation_faults = 0;  //!< of which answered with null by injection
    std::uint64_t executions = 0;         //!< execute() calls
    std::uint64_t faults_before_body = 0; //!< injected_fault thrown before the body
    std::uint64_t faults_after_body = 0;  //!< injected_fault thrown after the body
    std::uint64_t transfers = 0;          //!< copy_out(), copy_out_ahead() and copy_in() calls
    std::uint64_t copy_out_faults = 0;    //!< injected_fault thrown by copy_out(_ahead)
    std::uint64_t copy_in_faults = 0;     //!< injected_fault thrown by copy_in()
    //! @brief Returns: the injected_fault exceptions thrown, before and after the body.
    [[nodiscard]] std::uint64_t execution_faults() const noexcept {
        return faults_before_body + faults_after_body;
    }
    //! @brief Returns: the injected_fault exceptions thrown by transfers, out and back.
    [[nodiscard]] std::uint64_t transfer_faults() const noexcept {
        return copy_out_faults + copy_in_faults;
    }
    //! @brief Returns: every fault injected: allocations, executions and transfers.
    [[nodiscard]] std::uint64_t total() const noexcept {
        return allocation_faults + execution_faults() + transfer_faults();
    }
};

namespace detail {
//! The wrapped backend's host_copy type, where it has a host tier (dtr::offloading_backend).
template <class Backend, bool = offloading_backend<Backend>>
struct forwarded_host_copy {};
template <class Backend>
struct forwarded_host_copy<Backend, true> {
    using host_copy = typename Backend::host_copy;
};
//! `Copy` is the host_copy of `Backend`, a backend with a host tier. A concept, so that the
//! adaptor's members that take one name Backend::host_copy only where it exists.
template <class Copy, class Backend>
concept host_copy_of =
    offloading_backend<Backend> && std::same_as<Copy, typename Backend::host_copy>;
} // namespace detail

//! @brief `Backend` with faults injected into its allocations, executions and transfers (see
//! the file comment). Models dtr::backend whenever Backend does, and forwards the optional
//! members the runtime detects: memory_info() (dtr::reports_memory), collect_costs()
//! (dtr::deferred_costs), the region's layout (dtr::reports_layout), the cost clock
//! (dtr::cost_clock) and the host tier (dtr::offloading_backend, dtr::copying_ahead_backend);
//! also the statistics and device-access members of this library's backends (capacity,
//! used_bytes, peak_bytes, refusals, layout, base, stream, device, upload, download,
//! synchronize, measurements_in_flight) where Backend has them. Anything else: upstream(),
//! which an operator reaches as `ctx.backend().upstream()`.
//!
//! Not thread-safe, like the runtime that owns it. Movable when Backend is.
template <class Backend>
class fault_injecting_backend : public detail::forwarded_host_copy<Backend> {
public:
    //! The wrapped backend's address types.
    using pointer = typename Backend::pointer;
    using const_pointer = typename Backend::const_pointer;
    //! The wrapped backend's type.
    using upstream_type = Backend;

    //! @brief Wraps `upstream` (moved in) with the given fault rates and seed; injection is
    //! enabled and every counter is 0.
    //! Throws: dtr::logic_error when a rate is not in [0, 1]; what moving `upstream` throws.
    explicit fault_injecting_backend(fault_options options = {}, Backend upstream = Backend{})
        : upstream_(std::move(upstream)) {
        set_options(options);
    }

    // ---- the dtr::backend contract --------------------------------------------------------

    //! @brief A block from the wrapped backend, unless a fault is injected.
    //!
    //! Effects: counts the call (fault_counters::allocations); while enabled(), takes one
    //! draw from the allocation stream.
    //! Returns: with probability fault_options::allocation_fault_rate, the null pointer
    //! without asking the wrapped backend (counted in fault_counters::allocation_faults);
    //! otherwise upstream().allocate(bytes).
    //! Throws: whatever the wrapped backend's allocate() throws.
    //! Complexity: the wrapped allocate()'s, plus O(1).
    [[nodiscard]] pointer allocate(std::size_t bytes) {
        ++counters_.allocations;
        if (enabled_ && draw(allocation_state_) < options_.allocation_fault_rate) {
            ++counters_.allocation_faults;
            return pointer{};
        }
        return upstream_.allocate(bytes);
    }

    //! @brief The placed allocation of the arena backends (runtime_options::placement),
    //! forwarded where Backend has it, with the same injected refusals as allocate(bytes).
    //! Effects, Returns, Throws: as allocate(bytes), with upstream().allocate(bytes, where).
    [[nodiscard]] pointer allocate(std::size_t bytes, arena::placement where) requires
        requires(Backend& b, std::size_t n, arena::placement w) {
        { b.allocate(n, w) } -> std::same_as<pointer>;
    }
    {
        ++counters_.allocations;
        if (enabled_ && draw(allocation_state_) < options_.allocation_fault_rate) {
            ++counters_.allocation_faults;
            return pointer{};
        }
        return upstream_.allocate(bytes, where);
    }

    //! @brief Effects: upstream().deallocate(p, bytes); never disturbed.
    void deallocate(pointer p, std::size_t bytes) noexcept { upstream_.deallocate(p, bytes); }

    //! @brief Effects: upstream().copy(dst, src, bytes); never disturbed.
    //! Throws: what the wrapped copy() throws (noexcept when it is).
    decltype(auto) copy(pointer dst, const_pointer src, std::size_t bytes) noexcept(
        noexcept(std::declval<Backend&>().copy(dst, src, bytes))) {
        return upstream_.copy(dst, src, bytes);
    }

    //! @brief Runs `body` on the wrapped backend, unless a fault is injected before it.
    //!
    //! Effects: counts the call (fault_counters::executions; the count before it is the
    //! call's index); while enabled(), takes one draw from the execution stream and, for a
    //! fault (probability fault_options::execution_fault_rate), a second for its site
    //! (after the body with probability fault_options::after_body_share). Then, unless the
    //! fault is before the body, runs upstream().execute(body).
    //! On a backend with deferred costs, a fault after the body discards the measurement the
    //! wrapped execute() started, so that (as the protocol requires) a throwing execute()
    //! starts none: collect_costs() never hands it over.
    //! Returns: the wrapped execute()'s cost.
    //! Throws: dtr::injected_fault, before the body (which then did not run) or after the
    //!         wrapped execute() returned, counted in fault_counters::faults_before_body or
    //!         faults_after_body; whatever the body or the wrapped execute() throws (a fault
    //!         drawn for after such a body is then neither thrown nor counted); with deferred
    //!         costs, std::bad_alloc before the body runs when the measurement to discard
    //!         cannot be recorded.
    template <class Body>
    cost_t execute(Body&& body) {
        const std::uint64_t index = counters_.executions++;
        bool fault = false, after = false;
        if (enabled_ && draw(execution_state_) < options_.execution_fault_rate) {
            fault = true;
            after = draw(execution_state_) < options_.after_body_share;
        }
        if (fault && !after) {
            ++counters_.faults_before_body;
            throw injected_fault(fault_site::before_body, index);
        }
        if constexpr (deferred_costs<Backend>) {
            // Recorded before the wrapped execute() starts a measurement: a bad_alloc here
            // leaves nothing started.
            if (fault) discarded_.push_back(measurements_started_);
            cost_t cost{};
            try {
                cost = upstream_.execute(std::forward<Body>(body));
            } catch (...) {
                if (fault) discarded_.pop_back(); // it started none
                throw;
            }
            ++measurements_started_;
            if (fault) {
                ++counters_.faults_after_body;
                throw injected_fault(fault_site::after_body, index);
            }
            return cost;
        } else {
            const cost_t cost = upstream_.execute(std::forward<Body>(body));
            if (fault) {
                ++counters_.faults_after_body;
                throw injected_fault(fault_site::after_body, index);
            }
            return cost;
        }
    }

    // ---- optional members the runtime detects ---------------------------------------------

    //! @brief Returns: the wrapped backend's report, its `refusals` including the injected
    //! ones (the allocate() calls answered with null, as the runtime saw them).
    [[nodiscard]] std::optional<memory_report> memory_info() const noexcept requires
        reports_memory<Backend> {
        std::optional<memory_report> r = upstream_.memory_info();
        if (r) r->refusals += counters_.allocation_faults;
        return r;
    }

    //! @brief Returns: the wrapped backend's cost clock (dtr::cost_clock).
    [[nodiscard]] cost_t cost_clock() const noexcept requires dtr::cost_clock<Backend> {
        return upstream_.cost_clock();
    }

    //! @brief Effects: the wrapped backend's collect_costs(), less the measurements of
    //! executions failed after their body (see execute()): those never reach `sink`.
    //! Returns: how many costs reached `sink`.
    //! Throws: what the wrapped collect_costs() throws.
    template <class Sink>
    std::size_t collect_costs(Sink&& sink, cost_collection mode) requires deferred_costs<Backend> {
        std::size_t forwarded = 0;
        upstream_.collect_costs(
            [&](cost_t cost) noexcept {
                const std::uint64_t n = measurements_handed_++;
                if (!discarded_.empty() && discarded_.front() == n) {
                    discarded_.pop_front();
                    return;
                }
                ++forwarded;
                sink(cost);
            },
            mode);
        return forwarded;
    }

    //! @brief dtr::reports_layout, forwarded: the wrapped backend's region. (An injected
    //! refusal may then come while a free block would hold the request; the runtime copes as
    //! with any refusal the layout does not explain: it evicts in heuristic order and retries.)
    //! Returns: upstream().has_layout().
    [[nodiscard]] bool has_layout() const noexcept requires reports_layout<Backend> {
        return upstream_.has_layout();
    }
    //! @brief Returns: upstream().layout_alignment().
    [[nodiscard]] std::size_t layout_alignment() const noexcept requires reports_layout<Backend> {
        return upstream_.layout_alignment();
    }
    //! @brief Returns: upstream().region_offset(p).
    [[nodiscard]] std::size_t region_offset(const_pointer p) const noexcept requires
        reports_layout<Backend> {
        return upstream_.region_offset(p);
    }
    //! @brief Effects: upstream().for_each_block(fn).
    //! Throws: what `fn` throws.
    template <class Fn>
    void for_each_block(Fn&& fn) const requires reports_layout<Backend> {
        upstream_.for_each_block(std::forward<Fn>(fn));
    }

    // ---- dtr::offloading_backend and dtr::copying_ahead_backend, forwarded --------------
    // The questions are never disturbed; the transfers take one draw each from the transfer
    // stream and, for a fault, throw injected_fault without asking the wrapped backend.

    //! @brief Returns: upstream().has_host_tier().
    [[nodiscard]] bool has_host_tier() const noexcept requires offloading_backend<Backend> {
        return upstream_.has_host_tier();
    }
    //! @brief Returns: upstream().host_room(bytes).
    [[nodiscard]] bool host_room(std::size_t bytes) const noexcept requires
        offloading_backend<Backend> {
        return upstream_.host_room(bytes);
    }
    //! @brief Returns: upstream().transfer_cost(bytes).
    [[nodiscard]] cost_t transfer_cost(std::size_t bytes) const noexcept requires
        offloading_backend<Backend> {
        return upstream_.transfer_cost(bytes);
    }
    //! @brief Returns: upstream().transfers_overlap().
    [[nodiscard]] bool transfers_overlap() const noexcept requires offloading_backend<Backend> {
        return upstream_.transfers_overlap();
    }
    //! @brief upstream().copy_out(src, bytes, now), unless a fault is injected.
    //! Effects: counts the call (fault_counters::transfers); while enabled(), one draw from
    //! the transfer stream.
    //! Throws: dtr::injected_fault (fault_site::copy_out) with probability
    //! fault_options::transfer_fault_rate, nothing copied; what the wrapped copy_out throws.
    [[nodiscard]] auto copy_out(const_pointer src, std::size_t bytes,
                                cost_t now) requires offloading_backend<Backend> {
        inject_transfer_fault(fault_site::copy_out);
        return upstream_.copy_out(src, bytes, now);
    }
    //! @brief upstream().copy_out_ahead(src, bytes, now), unless a fault is injected.
    //! Effects, Throws: as copy_out().
    [[nodiscard]] auto copy_out_ahead(const_pointer src, std::size_t bytes,
                                      cost_t now) requires copying_ahead_backend<Backend> {
        inject_transfer_fault(fault_site::copy_out);
        return upstream_.copy_out_ahead(src, bytes, now);
    }
    //! @brief upstream().copy_in(dst, copy, bytes, now), unless a fault is injected.
    //! Effects: as copy_out().
    //! Throws: dtr::injected_fault (fault_site::copy_in) with probability
    //! fault_options::transfer_fault_rate, nothing copied; what the wrapped copy_in throws.
    template <detail::host_copy_of<Backend> HostCopy>
    cost_t copy_in(pointer dst, const HostCopy& copy, std::size_t bytes, cost_t now) {
        inject_transfer_fault(fault_site::copy_in);
        return upstream_.copy_in(dst, copy, bytes, now);
    }
    //! @brief Effects: upstream().free_host(copy, bytes); never disturbed.
    template <detail::host_copy_of<Backend> HostCopy>
    void free_host(HostCopy& copy, std::size_t bytes) noexcept {
        upstream_.free_host(copy, bytes);
    }
    //! @brief Returns: upstream().copy_stream_idle(now).
    [[nodiscard]] bool copy_stream_idle(cost_t now) const noexcept requires
        copying_ahead_backend<Backend> {
        return upstream_.copy_stream_idle(now);
    }
    //! @brief Effects: upstream().fence_host_copy(copy); never disturbed.
    template <detail::host_copy_of<Backend> HostCopy>
    void fence_host_copy(const HostCopy& copy) noexcept requires copying_ahead_backend<Backend> {
        upstream_.fence_host_copy(copy);
    }

    // ---- fault control ----------------------------------------------------------------

    //! @brief Effects: new rates and seed; both streams restart from the new seed (the
    //! counters and enabled() are unchanged).
    //! Throws: dtr::logic_error when a rate is not in [0, 1] (options unchanged).
    void set_options(const fault_options& options) {
        auto check = [](double rate, const char* name) {
            DTR_EXPECTS(rate >= 0.0 && rate <= 1.0, std::string("fault_injecting_backend: ") +
                                                        name + " must be in [0, 1], not " +
                                                        std::to_string(rate));
        };
        check(options.allocation_fault_rate, "allocation_fault_rate");
        check(options.execution_fault_rate, "execution_fault_rate");
        check(options.after_body_share, "after_body_share");
        check(options.transfer_fault_rate, "transfer_fault_rate");
        options_ = options;
        allocation_state_ = options.seed ^ 0x6a09e667f3bcc908ULL;
        execution_state_ = options.seed ^ 0xbb67ae8584caa73bULL;
        transfer_state_ = options.seed ^ 0x3c6ef372fe94f82bULL;
    }
    //! @brief Returns: the options in force.
    [[nodiscard]] const fault_options& options() const noexcept { return options_; }

    //! @brief Effects: stops (false) or resumes (true) injecting. While stopped the backend
    //! behaves exactly as the wrapped one and the streams do not advance; calls are still
    //! counted. Enabled at construction.
    void set_enabled(bool on) noexcept { enabled_ = on; }
    //! @brief Returns: whether faults are being injected.
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

    //! @brief Returns: the calls seen and faults injected so far.
    [[nodiscard]] const fault_counters& faults() const noexcept { return counters_; }

    //! @brief Returns: the wrapped backend. Calls made on it directly are neither counted
    //! nor disturbed.
    [[nodiscard]] Backend& upstream() noexcept { return upstream_; }
    [[nodiscard]] const Backend& upstream() const noexcept { return upstream_; }

    // ---- forwarded statistics and device access -------------------------------------------
    // Each exists only where Backend has the member, and forwards to it, never disturbed.

    //! @brief Returns: upstream().capacity().
    [[nodiscard]] decltype(auto) capacity() const noexcept requires requires(const Backend& b) {
        b.capacity();
    }
    { return upstream_.capacity(); }
    //! @brief Returns: upstream().used_bytes().
    [[nodiscard]] decltype(auto) used_bytes() const noexcept requires requires(const Backend& b) {
        b.used_bytes();
    }
    { return upstream_.used_bytes(); }
    //! @brief Returns: upstream().peak_bytes().
    [[nodiscard]] decltype(auto) peak_bytes() const noexcept requires requires(const Backend& b) {
        b.peak_bytes();
    }
    { return upstream_.peak_bytes(); }
    //! @brief Returns: upstream().refusals(): the wrapped backend's own refusals (not the
    //! injected ones: faults()).
    [[nodiscard]] decltype(auto) refusals() const noexcept requires requires(const Backend& b) {
        b.refusals();
    }
    { return upstream_.refusals(); }
    //! @brief Returns: upstream().layout().
    [[nodiscard]] decltype(auto) layout() const noexcept requires requires(const Backend& b) {
        b.layout();
    }
    { return upstream_.layout(); }
    //! @brief Returns: upstream().base().
    [[nodiscard]] decltype(auto) base() const noexcept requires requires(const Backend& b) {
        b.base();
    }
    { return upstream_.base(); }
    //! @brief Returns: upstream().stream().
    [[nodiscard]] decltype(auto) stream() const noexcept requires requires(const Backend& b) {
        b.stream();
    }
    { return upstream_.stream(); }
    //! @brief Returns: upstream().device().
    [[nodiscard]] decltype(auto) device() const noexcept requires requires(const Backend& b) {
        b.device();
    }
    { return upstream_.device(); }
    //! @brief Returns: upstream().measurements_in_flight() (measurements to be discarded
    //! included).
    [[nodiscard]] decltype(auto) measurements_in_flight() const noexcept requires
        requires(const Backend& b) {
        b.measurements_in_flight();
    }
    { return upstream_.measurements_in_flight(); }
    //! @brief Effects: upstream().upload(args...).
    //! Throws: what it throws.
    template <class... Args>
    decltype(auto) upload(Args&&... args) requires requires(Backend& b) {
        b.upload(std::forward<Args>(args)...);
    }
    { return upstream_.upload(std::forward<Args>(args)...); }
    //! @brief Effects: upstream().download(args...).
    //! Throws: what it throws.
    template <class... Args>
    decltype(auto) download(Args&&... args) requires requires(Backend& b) {
        b.download(std::forward<Args>(args)...);
    }
    { return upstream_.download(std::forward<Args>(args)...); }
    //! @brief Effects: upstream().synchronize().
    //! Throws: what it throws.
    decltype(auto) synchronize() requires requires(Backend& b) { b.synchronize(); }
    { return upstream_.synchronize(); }

private:
    //! SplitMix64: one uniform double in [0, 1) per call, identical on every platform.
    static double draw(std::uint64_t& state) noexcept {
        std::uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        x ^= x >> 31;
        return static_cast<double>(x >> 11) * 0x1.0p-53;
    }

    //! Counts a transfer and, while enabled, throws the fault the transfer stream draws.
    void inject_transfer_fault(fault_site site) {
        const std::uint64_t index = counters_.transfers++;
        if (!enabled_ || !(draw(transfer_state_) < options_.transfer_fault_rate)) return;
        ++(site == fault_site::copy_in ? counters_.copy_in_faults : counters_.copy_out_faults);
        throw injected_fault(site, index);
    }

    Backend upstream_;
    fault_options options_{};
    fault_counters counters_{};
    std::uint64_t allocation_state_ = 0;
    std::uint64_t execution_state_ = 0;
    std::uint64_t transfer_state_ = 0;
    bool enabled_ = true;
    // Deferred costs: indices (in the wrapped backend's execute() order) of measurements to
    // drop, ascending, and how many measurements were started and handed over so far.
    std::deque<std::uint64_t> discarded_;
    std::uint64_t measurements_started_ = 0;
    std::uint64_t measurements_handed_ = 0;
};

static_assert(backend<fault_injecting_backend<host_backend>>);
static_assert(backend<fault_injecting_backend<host_arena_backend>>);
static_assert(reports_memory<fault_injecting_backend<host_arena_backend>>);
static_assert(reports_layout<fault_injecting_backend<host_arena_backend>>);
static_assert(backend<fault_injecting_backend<sim_backend>>);
static_assert(reports_memory<fault_injecting_backend<sim_backend>>);
static_assert(reports_layout<fault_injecting_backend<sim_backend>>);
static_assert(!reports_memory<fault_injecting_backend<host_backend>>);
static_assert(!deferred_costs<fault_injecting_backend<host_backend>>);
static_assert(!reports_layout<fault_injecting_backend<host_backend>>);
static_assert(cost_clock<fault_injecting_backend<host_backend>>);
static_assert(!cost_clock<fault_injecting_backend<sim_backend>>);
static_assert(copying_ahead_backend<fault_injecting_backend<host_backend>>);
static_assert(copying_ahead_backend<fault_injecting_backend<sim_backend>>);
static_assert(!offloading_backend<fault_injecting_backend<host_arena_backend>>);

} // namespace dtr
