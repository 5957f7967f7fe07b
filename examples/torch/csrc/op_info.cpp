// SPDX-License-Identifier: Apache-2.0
// Python.h first, as CPython requires.
// clang-format off
#include <torch/csrc/python_headers.h>
// clang-format on

#include "op_info.hpp"

#include "bridge_key.hpp"
#include "dispatch.hpp"
#include "torch_compat.hpp"

#include <ATen/Context.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace py = pybind11;

namespace dtr_torch {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::shared_ptr<const op_info> classify(const c10::OperatorHandle& op) {
    const c10::FunctionSchema& schema = op.schema();
    const std::string& name = schema.name();
    auto by_namespace = [&](op_info::kind_t kind) {
        auto i = std::make_shared<op_info>();
        i->op = op;
        i->name = name + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
        i->key = std::hash<std::string>{}(i->name) | 1U;
        i->kind = kind;
        i->return_alias.assign(schema.returns().size(), -1);
        return i;
    };
    if (starts_with(name, "profiler::")) return by_namespace(op_info::pass_through);
    // Uninitialized memory for C++ code to fill through its data pointer (torch.tensor's
    // constructor, the DataLoader's collation): a plain tensor, adopted if an operator reads it.
    static const std::unordered_set<std::string> uninitialized{
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_permuted",
        "aten::empty_quantized",
        "aten::_empty_affine_quantized",
        "aten::_empty_per_channel_affine_quantized"};
    if (uninitialized.count(name) != 0) return by_namespace(op_info::pass_through);
    if (starts_with(name, "c10d::")) return by_namespace(op_info::collective);
    if (starts_with(name, "_c10d_functional::") || starts_with(name, "c10d_functional::") ||
        starts_with(name, "_c10d_functional_autograd::"))
        return by_namespace(op_info::functional_collective);
    // Everything else from its schema and tags, by dtr_torch/schema.py (once per overload).
    py::gil_scoped_acquire gil;
    py::object info =
        py::module_::import("dtr_torch._bridge").attr("_op_info")(name, schema.overload_name());
    return info.cast<std::shared_ptr<op_info>>();
}

struct op_table {
    std::mutex mutex;
    //! Keyed by the operator's schema, whose address is the operator's for as long as it is
    //! registered.
    std::unordered_map<const c10::FunctionSchema*, std::shared_ptr<const op_info>> infos;
    std::vector<std::unique_ptr<torch::Library>> libraries;
    std::unordered_set<c10::OperatorName> claimed;
};

op_table& table() {
    static auto* t = new op_table; // used by kernels until the process ends
    return *t;
}

} // namespace

const op_info& info_of(const c10::OperatorHandle& op) {
    // A thread's own copy of what it has looked up (no lock per operator); the table behind
    // it owns the classifications for the process's lifetime.
    thread_local std::unordered_map<const c10::FunctionSchema*, const op_info*> seen;
    const c10::FunctionSchema* key = &op.schema();
    if (auto it = seen.find(key); it != seen.end()) return *it->second;
    op_table& t = table();
    const op_info* found = nullptr;
    {
        std::lock_guard<std::mutex> lock(t.mutex);
        if (auto it = t.infos.find(key); it != t.infos.end()) found = it->second.get();
    }
    if (found == nullptr) {
        std::shared_ptr<const op_info> info = classify(op); // outside the lock: it takes the GIL
        std::lock_guard<std::mutex> lock(t.mutex);
        found = t.infos.emplace(key, std::move(info)).first->second.get();
    }
    seen.emplace(key, found);
    return *found;
}

void claim_composite_operators() {
    op_table& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    c10::Dispatcher& d = c10::Dispatcher::singleton();
    std::unordered_map<std::string, torch::Library*> by_namespace;
    for (const c10::OperatorName& name : d.getAllOpNames()) {
        if (t.claimed.count(name) != 0) continue;
        auto op = d.findOp(name); // c10::optional in 1.x, std::optional in 2.x
        if (!op || !op->hasSchema()) continue;
        if (op->hasKernelForDispatchKey(bridge_key)) continue;
        bool composite = false;
        for (c10::DispatchKey k : composite_explicit_keys)
            composite = composite || op->hasKernelForDispatchKey(k);
        // A composite-implicit operator decomposes above autograd (its parts reach the bridge
        // with their own derivatives), and a kernel of ours would stand in the way: unless the
        // devices' own backends have a kernel for it, which then wins over the composite one
        // (silu_backward: its fused CPU kernel rounds differently from math_silu_backward's
        // parts, so decomposing it under the bridge alone changed efficientnet's gradients in
        // the last bits). The bridge then runs the operator whole, as plain PyTorch does.
        if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
            composite = op->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
                        (!at::hasCUDA() || op->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
        if (!composite) continue;
        const std::string& qualified = name.name;
        const auto sep = qualified.find("::");
        if (sep == std::string::npos) continue;
        const std::string ns = qualified.substr(0, sep);
        torch::Library*& lib = by_namespace[ns];
        if (lib == nullptr) {
            t.libraries.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns,
                                                                   bridge_key, __FILE__, __LINE__));
            lib = t.libraries.back().get();
        }
        const std::string local = qualified.substr(sep + 2) +
                                  (name.overload_name.empty() ? "" : "." + name.overload_name);
        lib->impl(local.c_str(), torch::CppFunction::makeFromBoxedFunction<&bridge_fallback>());
        t.claimed.insert(name);
    }
}

} // namespace dtr_torch
