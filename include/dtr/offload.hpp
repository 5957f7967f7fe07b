// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Offload, the third choice beside keeping and recomputing: the optional backend
//! capability of a second memory tier (host memory) with a transfer model, and the rule by
//! which the runtime copies a victim out instead of dropping it (runtime_options::offload).
//!
//! The capability (dtr::offloading_backend) is optional: a runtime over a backend without it
//! compiles and runs exactly as before under runtime_options::offload = off (the default;
//! asked to offload, it throws at construction), and with offload off a backend with it is
//! never asked to transfer anything. See docs/design.md,
//! "Offload", for the state a storage is in, the clock arithmetic and what the heuristics see.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/options.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

namespace dtr {

//! @brief Cost of one transfer between the tiers: `latency + bytes / bandwidth`, in the
//! runtime's cost unit (ns). 25 GB/s models PCIe 4.0 x16, 50 GB/s PCIe 5.0 x16.
struct transfer_model {
    double bandwidth = 25e9; //!< bytes per second, > 0
    cost_t latency = 0;      //!< ns added to every transfer
    [[nodiscard]] cost_t cost(std::size_t bytes) const noexcept {
        return latency + static_cast<cost_t>(static_cast<double>(bytes) / bandwidth * 1e9);
    }
};

//! @brief Settings of a backend's host tier.
struct host_tier_options {
    transfer_model transfer{};
    //! Bytes the tier may hold (host copies of offloaded and of copied-back storages).
    std::size_t capacity = std::numeric_limits<std::size_t>::max();
    //! Transfers run on a copy stream concurrently with compute: the clock waits for a
    //! copy-back only when an operator reads its bytes before it finished (false: the clock
    //! waits for every transfer when it is issued).
    bool overlap = true;
};

//! @brief What copy_out() returns: the host copy and the time (on the runtime clock) from
//! which the device block it was read from may be reused.
template <class HostCopy>
struct copy_out_result {
    HostCopy copy{};
    cost_t reusable_at = 0;
};

//! @brief Optional capability of a backend with a second memory tier.
//!
//! - `B::host_copy`: a default-constructible, movable handle to a copy in the tier;
//! - `has_host_tier()`: whether this instance has a tier (a runtime constructed with
//!   runtime_options::offload on refuses an instance without one);
//! - `host_room(n)`: whether the tier can take `n` more bytes now;
//! - `transfer_cost(n)`: the cost of moving `n` bytes either way, in the runtime's cost
//!   unit (ns), which the offload decision compares with recomputation;
//! - `transfers_overlap()`: whether transfers run concurrently with compute;
//! - `copy_out(src, n, now)`: copies `n` device bytes at `src` to a new host copy, issued at
//!   runtime clock `now`; the result says when the device block may be reused (a backend
//!   that orders this itself, e.g. with stream events, returns `now`);
//! - `copy_in(dst, copy, n, now)`: copies a host copy into the device block `dst`, issued at
//!   `now`; returns the clock time at which the bytes are there (`now` when the backend
//!   orders later work after the copy itself); the host copy stays valid;
//! - `free_host(copy, n)`: releases a host copy (noexcept).
//! copy_out and copy_in may throw (the tier's memory, a device error): the runtime then drops
//! the victim instead, or fails the read with nothing lost.
template <class B>
concept offloading_backend = backend<B> && std::default_initializable<typename B::host_copy> &&
    std::movable<typename B::host_copy> &&
    requires(B& b, const B& cb, typename B::pointer p, typename B::const_pointer cp,
             typename B::host_copy& h, std::size_t n, cost_t now) {
    { cb.has_host_tier() } -> std::convertible_to<bool>;
    { cb.host_room(n) } -> std::convertible_to<bool>;
    { cb.transfer_cost(n) } -> std::convertible_to<cost_t>;
    { cb.transfers_overlap() } -> std::convertible_to<bool>;
    { b.copy_out(cp, n, now) } -> std::same_as<copy_out_result<typename B::host_copy>>;
    { b.copy_in(p, std::as_const(h), n, now) } -> std::convertible_to<cost_t>;
    { b.free_host(h, n) }
    noexcept;
};

//! @brief Optional capability beside dtr::offloading_backend: copies out ahead of eviction
//! (runtime_options::offload_ahead), which read a block that stays in use.
//! - `copy_stream_idle(now)`: whether the copy stream has nothing in flight at clock `now`
//!   (an ahead copy is started only then, so that it delays no copy-back by more than itself);
//! - `copy_out_ahead(src, n, now)`: as copy_out(), except that later compute is not ordered
//!   after the transfer (the block stays the storage's); `reusable_at` is when the transfer
//!   has read the block;
//! - `fence_host_copy(copy)`: the block an ahead copy read is about to be freed: work that
//!   reuses it must wait until the read is done (a backend that orders this by the clock,
//!   through `reusable_at`, does nothing here) (noexcept).
template <class B>
concept copying_ahead_backend = offloading_backend<B> &&
    requires(B& b, const B& cb, typename B::const_pointer cp, const typename B::host_copy& h,
             std::size_t n, cost_t now) {
    { cb.copy_stream_idle(now) } -> std::convertible_to<bool>;
    { b.copy_out_ahead(cp, n, now) } -> std::same_as<copy_out_result<typename B::host_copy>>;
    { b.fence_host_copy(h) }
    noexcept;
};

//! @brief The bookkeeping a simulated or host tier shares: the bytes it holds against its
//! capacity, and one copy stream on which transfers run one after another (a PCIe link
//! carries one at full bandwidth), each starting when both the stream and its data are ready.
class host_tier {
public:
    host_tier() = default;
    explicit host_tier(host_tier_options options) : options_(options), enabled_(true) {}

    [[nodiscard]] bool enabled() const noexcept { return enabled_; }
    [[nodiscard]] const host_tier_options& options() const noexcept { return options_; }
    [[nodiscard]] bool room(std::size_t bytes) const noexcept {
        return enabled_ && bytes <= options_.capacity - std::min(used_, options_.capacity);
    }
    [[nodiscard]] cost_t cost(std::size_t bytes) const noexcept {
        return options_.transfer.cost(bytes);
    }
    //! @brief Issues a transfer of `bytes` at `now` whose data is ready at `after`; returns
    //! when it finishes. The stream is busy until then.
    cost_t issue(std::size_t bytes, cost_t now, cost_t after = 0) noexcept {
        const cost_t start = std::max({now, after, stream_free_at_});
        stream_free_at_ = start + cost(bytes);
        ++transfers_;
        return stream_free_at_;
    }
    void hold(std::size_t bytes) noexcept {
        used_ += bytes;
        peak_ = std::max(peak_, used_);
    }
    void release(std::size_t bytes) noexcept { used_ -= std::min(used_, bytes); }
    [[nodiscard]] std::size_t used_bytes() const noexcept { return used_; }
    [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_; }
    [[nodiscard]] std::uint64_t transfers() const noexcept { return transfers_; }
    //! @brief When the copy stream is idle again.
    [[nodiscard]] cost_t stream_free_at() const noexcept { return stream_free_at_; }

private:
    host_tier_options options_{};
    bool enabled_ = false;
    std::size_t used_ = 0;
    std::size_t peak_ = 0;
    std::uint64_t transfers_ = 0;
    cost_t stream_free_at_ = 0;
};

//! @brief The part of dtr::offloading_backend a host_tier answers by itself: a base of the
//! backends whose tier is one (host_backend, sim_backend), which add the transfers.
class host_tier_holder {
public:
    [[nodiscard]] bool has_host_tier() const noexcept { return tier_.enabled(); }
    [[nodiscard]] bool host_room(std::size_t bytes) const noexcept { return tier_.room(bytes); }
    [[nodiscard]] cost_t transfer_cost(std::size_t bytes) const noexcept {
        return tier_.cost(bytes);
    }
    [[nodiscard]] bool transfers_overlap() const noexcept { return tier_.options().overlap; }
    //! @brief Whether the modelled copy stream is idle at clock `now`.
    [[nodiscard]] bool copy_stream_idle(cost_t now) const noexcept {
        return tier_.stream_free_at() <= now;
    }
    //! @brief The tier's bookkeeping (bytes held, transfers, the copy stream).
    [[nodiscard]] const host_tier& tier() const noexcept { return tier_; }

protected:
    host_tier tier_{};
};

//! @brief Estimated cost of getting `s` back by recomputation now, the side of the offload
//! decision the heuristics' cost terms stand for: the storage's own cost plus that of the
//! evicted ancestors its recipe would have to recompute first (the upward half of the evicted
//! neighbourhood e*: evicted storages reached through evicted storages; offloaded ones come
//! back by transfer and end the walk, as resident ones do). The walk visits at most
//! `max_visits` ancestors (a lower bound beyond), without allocating.
template <class Storage, std::size_t max_visits = 64>
[[nodiscard]] cost_t recompute_estimate(const Storage& s) noexcept {
    cost_t c = s.cost();
    std::array<const Storage*, max_visits> seen{};
    std::size_t n = 0, next = 0;
    auto visit = [&](const auto& p) {
        if (p.resident() || n == max_visits) return;
        const Storage* q = &p;
        for (std::size_t i = 0; i < n; ++i)
            if (seen[i] == q) return;
        seen[n++] = q;
        c += p.cost();
    };
    s.for_each_parent(visit);
    while (next < n) seen[next++]->for_each_parent(visit); // breadth first over `seen`
    return c;
}

//! @brief What leaving by transfer is charged for a storage of `bytes` bytes, against
//! recomputing it: with a valid host copy, its copy-back times `copy_back_charge`
//! (runtime_options::copy_back_charge: the share of that wait a prefetching program does not
//! hide); without, the out-copy and the copy-back in full. The out-copy is charged in full
//! because eviction happens when an allocation needs the bytes now: the block is reused as
//! soon as the out-copy finishes and compute waits for it.
template <class B>
[[nodiscard]] cost_t transfer_charge(const B& b, std::size_t bytes, bool has_copy,
                                     double copy_back_charge) noexcept {
    const cost_t one_way = b.transfer_cost(bytes);
    return has_copy ? copy_back_charge * one_way : 2 * one_way;
}

//! @brief The decision for one victim `s`: copy it out (true) or drop it.
//! - off, or no tier: drop;
//! - a victim with a valid host copy already (copied ahead of eviction, or copied back
//!   before; storages are immutable, so the copy is still right) leaves without an
//!   out-copy: under `automatic` when its transfer_charge is below the cost of recomputing
//!   it (always, under `always`);
//! - otherwise the tier needs room; then under `always` offload, and under `automatic`
//!   offload when the out-copy plus the copy-back (transfer_charge) cost less than
//!   recomputing.
template <class B, class Storage>
[[nodiscard]] bool offload_decision(const B& b, offload_policy policy, const Storage& s,
                                    bool has_copy, double copy_back_charge = 1.0) noexcept {
    if constexpr (!offloading_backend<B>) {
        return false;
    } else {
        if (policy == offload_policy::off || !b.has_host_tier()) return false;
        const std::size_t bytes = s.size();
        if (!has_copy && !b.host_room(bytes)) return false;
        if (policy == offload_policy::always) return true;
        return transfer_charge(b, bytes, has_copy, copy_back_charge) < recompute_estimate(s);
    }
}

//! @brief What the victim search multiplies a storage's score by when offload is on: the
//! share of its recompute cost that leaving costs instead, min(1, transfer_charge /
//! estimate), the charge offload_decision compares. The policies' scores are costs over
//! size and staleness, so this replaces the cost term by the cheaper of recomputing and
//! transferring; 1 when off, without a tier, or when the tier has no room.
template <class B, class Storage>
[[nodiscard]] double offload_score_factor(const B& b, offload_policy policy, const Storage& s,
                                          bool has_copy, double copy_back_charge = 1.0) noexcept {
    if constexpr (!offloading_backend<B>) {
        return 1.0;
    } else {
        if (policy == offload_policy::off || !b.has_host_tier()) return 1.0;
        if (!has_copy && !b.host_room(s.size())) return 1.0;
        const cost_t estimate = recompute_estimate(s);
        if (!(estimate > 0)) return 1.0;
        const cost_t charge = transfer_charge(b, s.size(), has_copy, copy_back_charge);
        return std::min(1.0, static_cast<double>(charge / estimate));
    }
}

namespace detail {

//! A storage's host copy: present only on backends with a tier (empty otherwise).
template <class B, bool = offloading_backend<B>>
struct host_slot {
    [[nodiscard]] static constexpr bool valid() noexcept { return false; }
    [[nodiscard]] static constexpr cost_t ready_at() noexcept { return 0; }
    [[nodiscard]] static constexpr cost_t read_done_at() noexcept { return 0; }
};

//! On a backend with a tier: one pointer in every storage record, to state allocated at
//! the storage's first out-copy. Every call reads records, few storages are ever offloaded,
//! and the state inline (the copy, its flag, the landing time) made each record 24 bytes
//! larger on the paths that never offload.
template <class B>
class host_slot<B, true> {
public:
    //! `copy()` holds this storage's bytes.
    [[nodiscard]] bool valid() const noexcept { return state_ != nullptr && state_->valid; }
    //! Clock time at which a copy-back in flight has landed (0 if none ever ran).
    [[nodiscard]] cost_t ready_at() const noexcept {
        return state_ == nullptr ? cost_t{0} : state_->ready_at;
    }
    //! The copy; allocates the state on first use. Throws: std::bad_alloc.
    [[nodiscard]] typename B::host_copy& copy() { return state().copy; }
    //! Marks `copy()` as holding the bytes (true) or as freed (false; the copy is reset).
    //! Precondition: copy() was called (the state exists).
    void set_valid(bool v) noexcept {
        state_->valid = v;
        if (!v) state_->copy = typename B::host_copy{};
    }
    //! Precondition: the state exists (set by the copy-back of an offloaded storage).
    void set_ready_at(cost_t t) noexcept { state_->ready_at = t; }
    //! Clock time at which the out-copy that made `copy()` has read the device block (0 if
    //! none ran): the block may be reused only then.
    [[nodiscard]] cost_t read_done_at() const noexcept {
        return state_ == nullptr ? cost_t{0} : state_->read_done_at;
    }
    //! Precondition: the state exists (set by an out-copy).
    void set_read_done_at(cost_t t) noexcept { state_->read_done_at = t; }
    //! The forecast read under which an offloaded storage waits in the offloader's prefetch
    //! queue (runtime_options::prefetch_ahead); 0: not queued.
    [[nodiscard]] std::uint64_t queued_read() const noexcept {
        return state_ == nullptr ? 0 : state_->queued_read;
    }
    //! Precondition: the state exists (the storage is offloaded, or was).
    void set_queued_read(std::uint64_t stamp) noexcept { state_->queued_read = stamp; }

private:
    struct state_type {
        typename B::host_copy copy{};
        bool valid = false;
        cost_t ready_at = 0;
        cost_t read_done_at = 0;
        std::uint64_t queued_read = 0;
    };
    state_type& state() {
        if (state_ == nullptr) state_ = std::make_unique<state_type>();
        return *state_;
    }
    std::unique_ptr<state_type> state_;
};

} // namespace detail

} // namespace dtr
