// SPDX-License-Identifier: Apache-2.0
//! The Python module `_dtr_torch`: the bridge's C++ half, as dtr_torch/_bridge.py uses it.

// Python.h (through torch/extension.h) comes before every other header, as CPython requires.
// clang-format off
#include <torch/extension.h>
// clang-format on

#include "bridge.hpp"
#include "bridge_key.hpp"
#include "counting_allocator.hpp"
#include "dispatch.hpp"
#include "errors.hpp"
#include "profile.hpp"
#include "torch_compat.hpp"

#include <torch/library.h>

namespace py = pybind11;
using namespace dtr_torch;

namespace {

std::shared_ptr<bridge> owner_of(const at::Tensor& t) {
    managed_tensor_impl* m = managed_impl(t);
    return m != nullptr ? m->ref()->owner : nullptr;
}

py::dict stats_of(bridge& b) {
    const dtr::counters& c = b.rt().stats();
    const bridge::counters& own = b.stats();
    block_table& table = b.rt().table();
    py::dict d;
    d["operators_run"] = c.operators_run;
    d["rematerializations"] = c.rematerializations;
    // the zero-copy promotions evict the computed version they replace: counted apart
    d["evictions"] = c.evictions - own.promotions_zero_copy;
    d["promotion_evictions"] = own.promotions_zero_copy;
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
    d["steps_marked"] = c.steps_marked;
    d["steps_learned"] = c.steps_learned;
    d["step_divergences"] = c.step_divergences;
    d["step_insertions"] = c.step_insertions;
    d["forecast_calls"] = c.forecast_calls;
    d["forecast_withheld"] = c.forecast_withheld;
    d["storages"] = b.rt().storage_count();
    d["operator_records"] = b.rt().operator_count();
    d["budget"] = b.rt().budget();
    d["dispatched"] = own.dispatched; // every operator that reached the bridge
    d["calls"] = own.calls;           // of which runtime calls
    d["promotions"] = own.promotions;
    d["promotions_zero_copy"] = own.promotions_zero_copy;
    d["eager_constants"] = own.eager_constants;
    d["views"] = own.views;                     // view operators (no runtime call) ...
    d["view_cache_hits"] = own.view_cache_hits; // ... of which geometries from the view cache
    d["inplace_rewrites"] = own.inplace_rewrites;
    d["inplace_direct"] = own.inplace_direct;
    d["collectives"] = own.collectives;
    d["in_place_reuses"] = c.in_place_reuses;
    d["max_op_bytes"] = own.max_op_bytes;
    d["max_op"] = own.max_op;
    d["max_tier_op_bytes"] = own.max_tier_op_bytes;
    d["max_tier_op"] = own.max_tier_op;
    d["adopted_outputs"] = table.adopted;
    d["fresh_blocks"] = table.fresh;
    d["blocks"] = table.blocks.size();
    d["parked_total"] = table.parked_total;
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
}

} // namespace

PYBIND11_MODULE(_dtr_torch, m) {
    m.doc() = "dtr_torch's C++ half: ATen operators executed through dtr::runtime";
    cpu_counter(); // install the counting allocator before anything is allocated
    // Every operator that reaches one of the bridge's keys and has no kernel of its own for it
    // (all but the composite operators claimed by name: op_info.cpp).
    // Never destroyed: kernels may run while the interpreter shuts down.
    for (c10::DispatchKey k : bridge_runtime_keys)
        (new torch::Library(torch::Library::IMPL, "_", k, __FILE__, __LINE__))
            ->fallback(torch::CppFunction::makeFromBoxedFunction<&bridge_fallback>());
    // Autograd for operators with no autograd kernel of their own (torch.distributed's, a
    // library's custom operators) passes through to the bridge, as it passes through to the CPU
    // kernel for a CPU tensor; PyTorch registers that fallback for its own backends only.
    if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(
            c10::DispatchKey::AutogradPrivateUse3))
        (new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::AutogradPrivateUse3,
                            __FILE__, __LINE__))
            ->fallback(torch::CppFunction::makeFallthrough());

    py::class_<storage_ref, ref_ptr>(m, "StorageRef")
        .def_property_readonly("nbytes", &storage_ref::nbytes)
        .def_property_readonly("runtime_id",
                               [](const storage_ref& r) { return r.owner ? r.owner->id() : 0; });

    py::class_<op_info, std::shared_ptr<op_info>>(m, "OpInfo")
        .def(py::init([](const std::string& name, const std::string& overload, int kind,
                         std::vector<std::pair<int, int>> writes, std::vector<int> return_alias,
                         bool random, int generator_arg, int first_list_arg,
                         std::shared_ptr<op_info> functional) {
                 auto h = c10::Dispatcher::singleton().findSchema({name, overload});
                 if (!h)
                     throw std::invalid_argument("dtr_torch: no operator " + name + "." + overload);
                 auto i = std::make_shared<op_info>();
                 i->op = *h;
                 i->name = name + (overload.empty() ? "" : "." + overload);
                 if (kind < op_info::compute || kind > op_info::resize ||
                     (kind > op_info::inplace_view && kind < op_info::resize))
                     throw std::invalid_argument("dtr_torch: OpInfo kind " + std::to_string(kind));
                 i->kind = static_cast<op_info::kind_t>(kind);
                 i->writes = std::move(writes);
                 i->return_alias = std::move(return_alias);
                 i->random = random;
                 i->generator_arg = generator_arg;
                 i->first_list_arg = first_list_arg;
                 i->functional = std::move(functional);
                 i->zero_scratch = reads_uninitialized_scratch(name);
                 if (i->return_alias.size() != h->schema().returns().size())
                     throw std::invalid_argument("dtr_torch: return_alias does not match " +
                                                 i->name);
                 return i;
             }),
             py::arg("name"), py::arg("overload"), py::arg("kind"), py::arg("writes"),
             py::arg("return_alias"), py::arg("random"), py::arg("generator_arg"),
             py::arg("first_list_arg"), py::arg("functional").none(true))
        .def_readonly("name", &op_info::name);

    py::class_<bridge, std::shared_ptr<bridge>>(m, "Bridge")
        .def(py::init([](std::size_t budget, const std::string& heuristic,
                         const std::string& device, const std::string& restore,
                         const std::string& dealloc, std::size_t host_memory,
                         double offload_bandwidth, double offload_latency_ns, bool guard_forecast,
                         bool guard_charges_search, const std::string& repeat_costs) {
                 bridge_options o;
                 o.budget = budget;
                 o.heuristic = heuristic;
                 o.device = device;
                 o.restore = restore;
                 o.dealloc = dealloc;
                 o.host_memory = host_memory;
                 o.offload_bandwidth = offload_bandwidth;
                 o.offload_latency_ns = offload_latency_ns;
                 o.guard_forecast = guard_forecast;
                 o.guard_charges_search = guard_charges_search;
                 o.repeat_costs = repeat_costs;
                 return std::make_shared<bridge>(o);
             }),
             py::arg("budget"), py::arg("heuristic"), py::arg("device"),
             py::arg("restore") = "yield_when_full", py::arg("dealloc") = "eager_evict",
             py::arg("host_memory") = 0, py::arg("offload_bandwidth") = 0.0,
             py::arg("offload_latency_ns") = 0.0, py::arg("guard_forecast") = true,
             py::arg("guard_charges_search") = false, py::arg("repeat_costs") = "lowest")
        .def_property_readonly("id", &bridge::id)
        .def("enter", &bridge::enter)
        .def("exit", &bridge::exit)
        .def("owns", [](bridge& b, const at::Tensor& t) { return owner_of(t).get() == &b; })
        .def("materialize", &bridge::materialize, py::call_guard<py::gil_scoped_release>())
        .def("promote", &bridge::promote_tensor, py::call_guard<py::gil_scoped_release>())
        .def("promote_leaf_grads", &bridge::promote_leaf_grads,
             py::call_guard<py::gil_scoped_release>())
        .def("leaf_grad_pairs", &bridge::leaf_grads)
        .def("drop_adoption_refs", &bridge::drop_adoption_refs,
             py::call_guard<py::gil_scoped_release>())
        .def("readers",
             [](bridge& b, const at::Tensor& t) -> std::size_t {
                 managed_tensor_impl* mi = managed_impl(t);
                 return mi != nullptr ? b.readers(mi->ref()) : 0;
             })
        .def("evict",
             [](bridge& b, const at::Tensor& t) {
                 managed_tensor_impl* mi = managed_impl(t);
                 return mi != nullptr && mi->ref()->owner.get() == &b &&
                        b.rt().evict(mi->ref()->handle);
             })
        .def("resident",
             [](bridge& b, const at::Tensor& t) {
                 managed_tensor_impl* mi = managed_impl(t);
                 return mi != nullptr && b.rt().is_resident(mi->ref()->handle);
             })
        .def("is_constant",
             [](bridge& b, const at::Tensor& t) {
                 managed_tensor_impl* mi = managed_impl(t);
                 return mi != nullptr && b.is_constant(mi->ref());
             })
        .def("set_in_backward", &bridge::set_in_backward)
        .def("set_deterministic_costs", &bridge::set_deterministic_costs)
        .def("set_inplace_rewrite", &bridge::set_inplace_rewrite)
        .def("set_park_released", &bridge::set_park_released)
        .def("set_cost_clock", &bridge::set_cost_clock)
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
        .def("begin_step", [](bridge& b) { b.rt().begin_step(); })
        .def("begin_step_at_next_call", &bridge::begin_step_at_next_call)
        .def("set_remat_limit", [](bridge& b, double ns) { b.rt().set_remat_limit(ns); })
        .def("check_invariants", [](bridge& b) { b.rt().check_invariants(); })
        .def("stats", &stats_of);

    m.def(
        "is_managed", [](const at::Tensor& t) { return managed_impl(t) != nullptr; },
        "Whether `t` is a tensor a dtr_torch runtime manages.");
    m.def("owner", &owner_of, "The Bridge that manages `t`, or None.");
    m.def("set_error_types",
          [](py::object oom, py::object thrash) { set_error_types(oom.ptr(), thrash.ptr()); });
    m.def(
        "set_included",
        [](bool on) {
            const bool was = bridge_included();
            set_bridge_included(on);
            return was;
        },
        "Routes the calling thread's operators to the active runtime, or not; returns the "
        "previous state (dtr_torch's `outside()`).");
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
    m.def("set_zero_fill", &counting_allocator::set_zero_fill_all,
          "Zero-fill every CPU allocation of the process (a reference run that must not depend "
          "on what the heap held; the bridge zero-fills inside the kernels that need it).");
    m.def("pause_allocator_cache", [](bool on) { cpu_counter().set_paused(on); });
    m.attr("torch_version") = py::make_tuple(torch_major, torch_minor);
}
