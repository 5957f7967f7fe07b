// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The bridge: one dtr::runtime and what PyTorch needs around it — adoption of plain
//! tensors as constants, promotion of long-lived state to constants, pins for kernels that run
//! outside the runtime, the release policy, and the dispatch of every operator (dispatch.cpp,
//! collectives.cpp).

#pragma once

#include "managed_tensor.hpp"
#include "op_info.hpp"
#include "runtime_iface.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtr_torch {

//! What dtr_torch.Runtime(...) passes to the bridge.
struct bridge_options {
    std::size_t budget = ~std::size_t{0};
    std::string heuristic = "dtr_eqclass";
    std::string device = "cpu";
    std::string restore = "yield_when_full";
    std::string dealloc = "eager_evict";
    std::size_t host_memory = 0;  //!< 0: no host tier
    double offload_bandwidth = 0; //!< bytes/s; 0 measures the link
    double offload_latency_ns = 0;
    bool guard_forecast = true;          //!< runtime_options::guard_forecast
    bool guard_charges_search = false;   //!< runtime_options::guard_charges_search
    std::string repeat_costs = "lowest"; //!< runtime_options::repeat_costs
};

class bridge : public std::enable_shared_from_this<bridge> {
public:
    explicit bridge(const bridge_options& o);
    ~bridge();
    bridge(const bridge&) = delete;
    bridge& operator=(const bridge&) = delete;

    std::uint64_t id() const noexcept { return id_; }
    c10::Device device() const noexcept { return table_->device; }
    //! The host tier's transfer model (bytes/s, ns per transfer); bandwidth 0 without a tier.
    dtr::transfer_model transfer() const noexcept;

    // ---- the context ------------------------------------------------------------------------
    //! Routes the calling thread's operators to this bridge (its key in the thread's included
    //! dispatch keys; autograd carries them to its worker threads), claims the composite
    //! operators. @throws std::runtime_error if a context is active already.
    void enter();
    void exit();
    //! The bridge whose context is active, or null.
    static bridge* active() noexcept;

    // ---- dispatch (dispatch.cpp) ------------------------------------------------------------
    //! Runs one operator through the runtime: pops its arguments from `stack`, pushes its
    //! results. @throws OutOfMemoryError / ThrashingError (Python), prefixed with the
    //! operator's name; RuntimeError ("dtr_torch: unsupported: ...") for what the bridge
    //! cannot express.
    void dispatch(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);

    // ---- references -------------------------------------------------------------------------
    //! The reference of a managed tensor of this bridge, or of a plain tensor (adopting it).
    //! @throws dtr::out_of_memory when the budget cannot hold an adopted tensor.
    ref_ptr ref_of(const at::Tensor& t);
    //! A managed tensor with geometry `g` on `ref`'s storage.
    at::Tensor wrap(ref_ptr ref, const geometry& g);
    //! A reference's handle is dropped (storage_ref's destructor). Under park_released the
    //! runtime keeps a storage resident if it was the last handle and a recipe reads it:
    //! counted here.
    void release(dtr::tensor handle, const std::shared_ptr<std::size_t>& readers);
    std::size_t readers(const ref_ptr& ref) const { return *ref->readers; }
    bool is_constant(const ref_ptr& ref) const { return !rt_->is_rematerializable(ref->handle); }

    // ---- access -----------------------------------------------------------------------------
    //! A plain tensor holding a copy of a managed tensor's value (pins, recomputing if needed).
    at::Tensor materialize(const at::Tensor& managed);
    //! Turns a computed storage into a constant (without a copy where the runtime lets go of
    //! the block), so that long-lived state stops depending on the step that computed it.
    void promote(const ref_ptr& ref);
    //! promote() for the managed tensor `t` of this bridge; nothing for anything else.
    void promote_tensor(const at::Tensor& t);

    // ---- collectives (collectives.cpp) ------------------------------------------------------
    //! A plain tensor with geometry `g` over the memory of `ref`'s storage, for an operator
    //! that writes it outside the runtime's view (collectives).
    at::Tensor writable_alias(const ref_ptr& ref, const geometry& g);
    //! Whether a live recipe reads the plain tensor `t`'s storage (adopted and read).
    bool reads_plain(const at::Tensor& t) const;
    //! A fresh plain tensor of the runtime's device adopted as a constant that stays resident.
    at::Tensor adopt_result(const at::Tensor& t);

    // ---- parameters and their gradients -----------------------------------------------------
    //! (leaf, gradient) for every adopted leaf that requires grad and has a gradient.
    std::vector<std::pair<at::Tensor, at::Tensor>> leaf_grads();
    //! After backward: the leaves' gradients become constants.
    void promote_leaf_grads();
    //! On leaving the context: hooks removed, plain tensors forget their references.
    void drop_adoption_refs();

    // ---- switches ---------------------------------------------------------------------------
    void set_in_backward(bool b);
    //! "off", "always" or "following" (keep only while the policy scores with the forecast).
    void set_park_released(const std::string& mode);
    void set_cost_clock(const std::string& clock);
    void set_deterministic_costs(bool b) { deterministic_costs_ = b; }
    void set_inplace_rewrite(bool b) { inplace_rewrite_disabled_ = !b; }
    //! The next operator call begins a step (dtr::runtime::begin_step). The optimizer hook
    //! marks this way: what the loop does between the optimizer step and its next operator
    //! (reading the loss to log it) is the end of the step that made it, and the step the
    //! runtime records is the same from the first iteration on.
    void begin_step_at_next_call() { step_pending_ = true; }

    runtime_iface& rt() { return *rt_; }
    const runtime_iface& rt() const { return *rt_; }

    //! The bridge's own counters (rt.stats() adds the runtime's).
    struct counters {
        std::size_t calls = 0, dispatched = 0, promotions = 0, promotions_zero_copy = 0,
                    eager_constants = 0, inplace_rewrites = 0, inplace_direct = 0, collectives = 0,
                    max_op_bytes = 0, max_tier_op_bytes = 0, views = 0, view_cache_hits = 0;
        std::string max_op, max_tier_op;
    };
    const counters& stats() const noexcept { return counters_; }

private:
    friend class dispatcher_call;

    //! Pins for a kernel that runs outside the runtime, and plain storages over their memory
    //! (one per input, in order) to build its arguments from.
    struct pinned_inputs {
        std::vector<std::unique_ptr<pinned>> pins;
        std::vector<c10::Storage> storages;
    };
    //! With `written`, the inputs it flags are constants the kernel writes in place: pinned
    //! for writing, so that the runtime drops any host copy of their old bytes.
    pinned_inputs pin_all(c10::ArrayRef<ref_ptr> inputs, c10::ArrayRef<std::uint8_t> written = {});
    std::unique_ptr<pinned> pin(const dtr::tensor& t, bool for_write = false);

    ref_ptr adopt(const at::Tensor& t);
    //! Keeps `ref` alive for as long as the plain tensor `t` lives (its Python object holds
    //! it), and makes a parameter's incoming gradients constants as autograd delivers them.
    void attach(const at::Tensor& t, const ref_ptr& ref);
    //! After a mutation: plain tensors sharing a mutated storage move to its new version.
    void follow_mutation(const ref_ptr& ref);
    //! The runtime's dealloc policy for the releases to come (park_released).
    void update_dealloc();
    void enable_offload(dtr::runtime_options& o, std::size_t host_memory, double bandwidth,
                        double latency_ns);
    void note_operator_bytes(const std::string& name, c10::ArrayRef<ref_ptr> inputs,
                             c10::ArrayRef<std::uint8_t> mutated, std::size_t out_bytes,
                             bool recorded);

    void run_collective(const op_info& info, std::vector<c10::IValue>* stack);

    std::shared_ptr<block_table> table_;
    std::shared_ptr<runtime_iface> rt_;
    std::uint64_t id_ = 0;
    c10::DispatchKeySet keys_; //!< of the managed tensors it makes
    std::unordered_map<const c10::StorageImpl*, std::weak_ptr<storage_ref>> adopted_;
    //! Gradient hooks on adopted leaves: (leaf, hook position), removed on leaving.
    std::vector<std::pair<c10::weak_intrusive_ptr<c10::TensorImpl>, unsigned>> leaf_hooks_;
    counters counters_;
    bool deterministic_costs_ = false;
    bool inplace_rewrite_disabled_ = false;
    bool in_backward_ = false;  //!< autograd runs with grad mode off, but computes activations
    bool banish_ = false;       //!< dealloc="banish": released storages are never kept
    bool step_pending_ = false; //!< begin_step_at_next_call() was called
};

} // namespace dtr_torch
