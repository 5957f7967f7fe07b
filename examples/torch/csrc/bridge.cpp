// SPDX-License-Identifier: Apache-2.0
// Python.h first, as CPython requires.
// clang-format off
#include <torch/csrc/python_headers.h>
// clang-format on

#include "bridge.hpp"

#include "bridge_key.hpp"
#include "counting_allocator.hpp"
#include "errors.hpp"
#include "profile.hpp"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include <atomic>
#include <cmath>
#include <stdexcept>

namespace py = pybind11;

namespace dtr_torch {
namespace {
std::atomic<bridge*> active_bridge{nullptr};
} // namespace

bridge::bridge(const bridge_options& opts) : table_(std::make_shared<block_table>()) {
    static std::atomic<std::uint64_t> next_id{1};
    id_ = next_id++;
    table_->device = c10::Device(opts.device);
    table_->allocator =
        table_->device.is_cpu() ? &cpu_counter() : c10::GetAllocator(table_->device.type());
    keys_ = managed_keys(table_->device);
    dtr::runtime_options o;
    o.budget = opts.budget;
    // Released storages are kept only where park_released says so (update_dealloc): keeping
    // them in backward too, as the runtime's default keep_once_bound would, is what
    // park_released's rule avoids.
    o.dealloc = dtr::dealloc_policy::eager_evict;
    // The in-place operators that reach the runtime's mutation (those the bridge does not
    // rewrite out of place or run on an unread constant) write into the old version's block
    // when nothing else holds it, instead of a copy.
    o.in_place = dtr::in_place_writes::reuse_when_unshared;
    // park_released's kept storages compete with held ones on their scores: on DenseNet at
    // 0.33 evicting them first recomputes half as much again (docs/results.md, "Keeping
    // released storages"), as the kept feature maps are what the recomputations read.
    o.kept = dtr::kept_priority::scored;
    if (opts.restore == "hold")
        o.restore = dtr::restore_pins::hold;
    else if (opts.restore == "planned")
        o.restore = dtr::restore_pins::planned;
    else if (opts.restore != "yield_when_full")
        throw std::invalid_argument(
            "dtr_torch: restore must be yield_when_full, planned or hold, not '" + opts.restore +
            "'");
    if (opts.dealloc == "banish") {
        o.dealloc = dtr::dealloc_policy::banish;
        banish_ = true;
    } else if (opts.dealloc != "eager_evict") {
        throw std::invalid_argument("dtr_torch: dealloc must be eager_evict or banish, not '" +
                                    opts.dealloc + "'");
    }
    // Parameters, buffers and inputs are PyTorch's storages, adopted: they never leave the
    // device, with or without a tier (the constants the bridge makes itself are let go one by
    // one, runtime::allow_offload). Set without a tier too, so that offload_allowed() answers
    // the same in the reference run the bench takes its bounds from.
    o.offload_constants = false;
    o.guard_forecast = opts.guard_forecast;
    o.guard_charges_search = opts.guard_charges_search;
    if (opts.repeat_costs == "measured")
        o.repeat_costs = dtr::repeat_cost::measured;
    else if (opts.repeat_costs != "lowest")
        throw std::invalid_argument("dtr_torch: repeat_costs must be lowest or measured, not '" +
                                    opts.repeat_costs + "'");
    if (opts.host_memory != 0)
        enable_offload(o, opts.host_memory, opts.offload_bandwidth, opts.offload_latency_ns);
    rt_ = std::shared_ptr<runtime_iface>(make_runtime(opts.heuristic, o, table_));
}

bridge::~bridge() {
    bridge* self = this;
    active_bridge.compare_exchange_strong(self, nullptr);
}

dtr::transfer_model bridge::transfer() const noexcept {
    return table_->host_tier ? table_->host_tier->transfer
                             : dtr::transfer_model{.bandwidth = 0, .latency = 0};
}

// ---- the context ----------------------------------------------------------------------------

void bridge::enter() {
    bridge* none = nullptr;
    if (!active_bridge.compare_exchange_strong(none, this))
        throw std::runtime_error(
            "dtr_torch: a Runtime context is already active (they do not nest)");
    try {
        claim_composite_operators();
    } catch (...) {
        active_bridge = nullptr;
        throw;
    }
    set_bridge_included(true);
}

void bridge::exit() {
    set_bridge_included(false);
    bridge* self = this;
    active_bridge.compare_exchange_strong(self, nullptr);
}

bridge* bridge::active() noexcept { return active_bridge.load(); }

// ---- references -----------------------------------------------------------------------------

ref_ptr bridge::ref_of(const at::Tensor& t) {
    if (managed_tensor_impl* m = managed_impl(t)) {
        if (m->ref()->owner.get() != this)
            unsupported(
                "a dtr_torch tensor of another runtime used in this one; materialize it first "
                "(dtr_torch.materialize)");
        return m->ref();
    }
    if (t.key_set().has(c10::DispatchKey::Python))
        unsupported("a tensor subclass with __torch_dispatch__ mixed with dtr_torch's tensors");
    return adopt(t);
}

ref_ptr bridge::adopt(const at::Tensor& t) {
    if (t.layout() != at::kStrided) unsupported("tensors with layout " + c10::str(t.layout()));
    if (!t.has_storage()) unsupported("tensors without storage (" + t.toString() + ")");
    if (t.device() != table_->device)
        unsupported("a tensor on " + t.device().str() + " in a runtime for " +
                    table_->device.str());
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    ref_ptr ref;
    if (auto it = adopted_.find(key); it != adopted_.end()) ref = it->second.lock();
    if (!ref) {
        ref = std::make_shared<storage_ref>();
        ref->owner = shared_from_this();
        ref->handle = rt_->adopt(t.storage()); // dtr::out_of_memory: the caller names the operator
        ref->plain_key = key;
        ref->plain_data = t.storage().data_ptr().get();
        adopted_[key] = ref;
    } else if (t.storage().data_ptr().get() != ref->plain_data ||
               t.storage().nbytes() != ref->nbytes()) {
        unsupported(
            "a tensor the runtime adopted was given other memory outside the dispatcher "
            "(Tensor.untyped_storage().resize_() or set_ on its storage; FullyShardedDataParallel "
            "frees and reallocates its parameters this way): the runtime's records would read "
            "freed memory");
    }
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    for (auto& w : ref->plains)
        if (auto s = w.lock(); s && s.get() == impl) return ref;
    ref->plains.emplace_back(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(impl));
    attach(t, ref);
    return ref;
}

void bridge::attach(const at::Tensor& t, const ref_ptr& ref) {
    {
        // The plain tensor's Python object holds the reference, so the constant lives as long
        // as the tensor (PyTorch keeps a tensor's Python object, created here if need be, for
        // the tensor's lifetime).
        py::gil_scoped_acquire gil;
        py::object obj = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
        py::setattr(obj, "_dtr_ref", py::cast(ref));
    }
    // A leaf that requires grad (a parameter): its incoming gradients become constants as
    // autograd delivers them. Left rematerializable, a weight gradient is a cheap eviction
    // candidate while backward runs (unused until the optimizer step), but recomputing it
    // afterwards needs the whole backward chain again, its inputs released by then.
    if (t.requires_grad() && !t.grad_fn()) {
        std::weak_ptr<bridge> weak = weak_from_this();
        const unsigned pos = t.register_hook([weak](const at::TensorBase& grad) {
            if (auto b = weak.lock()) b->promote_tensor(at::Tensor(grad));
        });
        leaf_hooks_.emplace_back(
            c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(t.unsafeGetTensorImpl()), pos);
    }
}

at::Tensor bridge::wrap(ref_ptr ref, const geometry& g) {
    scoped_ns timer{prof.wrap_ns};
    return make_managed(std::move(ref), keys_, g);
}

void bridge::release(dtr::tensor h, const std::shared_ptr<std::size_t>& readers) {
    block_table& t = *table_;
    if (t.keeping && h && !h.orphaned() && h.use_count() == 1 && *readers != 0 &&
        rt_->is_rematerializable(h) && rt_->is_resident(h))
        ++t.parked_total;
}

// ---- access ---------------------------------------------------------------------------------

at::Tensor bridge::materialize(const at::Tensor& managed) {
    managed_tensor_impl* m = managed_impl(managed);
    if (m == nullptr) return managed;
    auto p = pin(m->ref()->handle);
    plain_aten plain;
    at::Tensor view =
        tensor_on(borrowed_storage(p->data, p->size, table_->device), geometry::of(managed));
    return view.clone(at::MemoryFormat::Preserve);
}

bridge::pinned_inputs bridge::pin_all(c10::ArrayRef<ref_ptr> inputs,
                                      c10::ArrayRef<std::uint8_t> written) {
    pinned_inputs p;
    p.pins.reserve(inputs.size());
    p.storages.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const ref_ptr& in = inputs[i];
        p.pins.push_back(pin(in->handle, !written.empty() && written[i]));
        p.storages.push_back(
            borrowed_storage(p.pins.back()->data, p.pins.back()->size, table_->device));
    }
    return p;
}

std::unique_ptr<pinned> bridge::pin(const dtr::tensor& t, bool for_write) {
    try {
        return for_write ? rt_->pin_for_write(t) : rt_->pin(t);
    } catch (const dtr::out_of_memory& e) {
        raise_out_of_memory(std::string("pin (reading a tensor): ") + e.what());
    } catch (const dtr::thrashing& e) {
        raise_thrashing(std::string("pin (reading a tensor): ") + e.what());
    }
}

void bridge::promote(const ref_ptr& ref) {
    if (!rt_->is_rematerializable(ref->handle)) return;
    scoped_ns timer{prof.promote_ns};
    prof.promote_bytes += ref->nbytes();
    auto p = pin(ref->handle);
    dtr::tensor c;
    // Zero copy where the runtime lets go of the storage: keep ATen's storage alive here,
    // evict the computed version (the backend drops its table entry, the budget its bytes),
    // and adopt the same storage as the constant.
    const std::byte* data = p->data;
    const std::size_t size = p->size;
    c10::Storage keep;
    if (auto it = table_->blocks.find(data);
        it != table_->blocks.end() && size != 0 && it->second.nbytes() == size)
        keep = it->second;
    p.reset();
    // Dropped, not offloaded: the bytes live on in the constant, a host copy would be a wasted
    // transfer.
    if (keep && rt_->drop(ref->handle) && table_->blocks.find(data) == table_->blocks.end()) {
        try {
            c = rt_->adopt(keep);
        } catch (const dtr::out_of_memory& e) {
            raise_out_of_memory(std::string("promoting state to a constant: ") + e.what());
        }
        ++counters_.promotions_zero_copy;
    } else {
        keep = c10::Storage();
        auto q = pin(ref->handle);
        try {
            c = rt_->copy_constant(q->data, q->size);
        } catch (const dtr::out_of_memory& e) {
            raise_out_of_memory(std::string("promoting state to a constant: ") + e.what());
        }
    }
    // Its bytes are the bridge's alone (a gradient, optimizer state): with a host tier it may
    // leave the device like an activation, unlike the parameters PyTorch holds.
    rt_->allow_offload(c, true);
    ref->handle = std::move(c);
    ref->new_version();
    ++counters_.promotions;
}

void bridge::promote_tensor(const at::Tensor& t) {
    if (managed_tensor_impl* m = managed_impl(t); m != nullptr && m->ref()->owner.get() == this)
        promote(m->ref());
}

void bridge::follow_mutation(const ref_ptr& ref) {
    scoped_ns timer{prof.follow_ns};
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
    ref->plain_data = fresh.data_ptr().get();
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

// ---- parameters and their gradients ---------------------------------------------------------

std::vector<std::pair<at::Tensor, at::Tensor>> bridge::leaf_grads() {
    std::vector<std::pair<at::Tensor, at::Tensor>> out;
    for (auto& [key, weak] : adopted_) {
        ref_ptr ref = weak.lock();
        if (!ref) continue;
        for (auto& w : ref->plains) {
            auto impl = w.lock();
            if (!impl) continue;
            at::Tensor t(impl);
            if (!t.requires_grad()) continue;
            const at::Tensor& g = t.grad();
            if (g.defined()) out.emplace_back(t, g);
        }
    }
    return out;
}

void bridge::promote_leaf_grads() {
    for (auto& [leaf, grad] : leaf_grads()) promote_tensor(grad);
}

void bridge::drop_adoption_refs() {
    for (auto& [weak, pos] : leaf_hooks_)
        if (auto impl = weak.lock()) at::Tensor(impl).remove_hook(pos);
    leaf_hooks_.clear();
    py::gil_scoped_acquire gil;
    for (auto& [key, weak] : adopted_) {
        ref_ptr ref = weak.lock();
        if (!ref) continue;
        for (auto& w : ref->plains) {
            auto impl = w.lock();
            if (!impl) continue;
            py::object obj = py::reinterpret_steal<py::object>(THPVariable_Wrap(at::Tensor(impl)));
            if (py::hasattr(obj, "_dtr_ref")) py::delattr(obj, "_dtr_ref");
        }
    }
    adopted_.clear();
}

// ---- switches -------------------------------------------------------------------------------

void bridge::update_dealloc() {
    block_table& t = *table_;
    const bool keep = t.park_released && !t.in_backward && rt_->stats().victim_searches != 0 &&
                      (!t.park_only_following || rt_->scores_with_forecast());
    if (keep == t.keeping) return;
    rt_->set_dealloc(keep ? dtr::dealloc_policy::keep_resident : dtr::dealloc_policy::eager_evict);
    t.keeping = keep;
}

void bridge::set_park_released(const std::string& mode) {
    if (mode != "off" && mode != "always" && mode != "following")
        throw std::invalid_argument(
            "dtr_torch: park_released must be False, True, 'off', 'always' "
            "or 'following', got '" +
            mode + "'");
    const bool on = mode != "off";
    if (on && banish_)
        throw std::invalid_argument(
            "dtr_torch: park_released keeps released storages, dealloc='banish' frees them: "
            "choose one");
    table_->park_released = on;
    table_->park_only_following = mode == "following";
    update_dealloc();
}

void bridge::set_cost_clock(const std::string& clock) {
    if (clock != "wall" && clock != "thread_cpu")
        throw std::invalid_argument("dtr_torch: cost_clock must be wall or thread_cpu, not '" +
                                    clock + "'");
    table_->cpu_costs = clock == "thread_cpu";
}

void bridge::set_in_backward(bool b) {
    in_backward_ = b;
    table_->in_backward = b;
    update_dealloc();
}

void bridge::enable_offload(dtr::runtime_options& o, std::size_t host_memory, double bandwidth,
                            double latency_ns) {
    if (!std::isfinite(bandwidth) || bandwidth < 0)
        throw std::invalid_argument(
            "dtr_torch: offload_bandwidth must be finite and >= 0 (0 measures it), not " +
            std::to_string(bandwidth));
    if (!std::isfinite(latency_ns) || latency_ns < 0)
        throw std::invalid_argument("dtr_torch: offload_latency_ns must be finite and >= 0, not " +
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

// The floors' "largest operator" (the bench's f and the host tier's bound), for an operator
// that ran on `inputs` and wrote `out_bytes` of fresh outputs; `recorded` when it ran as a
// runtime call. f counts its computed inputs (constants are counted once, as parameters and
// optimizer state) and only recorded operators. The tier's bound counts every input that
// could have been on the host (all but parameters, buffers and inputs, which stay) and the
// operators the bridge runs outside the runtime's records too: in-place updates of state
// (SGD's `momentum.add_(grad)` holds a gradient and a state tensor at once) and results made
// eagerly from constants.
void bridge::note_operator_bytes(const std::string& name, c10::ArrayRef<ref_ptr> inputs,
                                 c10::ArrayRef<std::uint8_t> mutated, std::size_t out_bytes,
                                 bool recorded) {
    std::size_t io = out_bytes, io_tier = out_bytes;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const dtr::tensor& h = inputs[i]->handle;
        if (rt_->is_rematerializable(h) || mutated[i]) io += inputs[i]->nbytes();
        if (rt_->offload_allowed(h) || (recorded && mutated[i])) io_tier += inputs[i]->nbytes();
    }
    if (recorded && io > counters_.max_op_bytes) {
        counters_.max_op_bytes = io;
        counters_.max_op = name;
    }
    if (io_tier > counters_.max_tier_op_bytes) {
        counters_.max_tier_op_bytes = io_tier;
        counters_.max_tier_op = name;
    }
}

} // namespace dtr_torch
