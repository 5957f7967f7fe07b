// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The runtime behind a small virtual interface, so that the heuristic is chosen by name
//! at run time while the bridge's code is compiled once (each policy compiles the whole
//! runtime, in runtime_by_name.cpp).

#pragma once

#include "torch_backend.hpp"

#include <dtr/runtime.hpp>

#include <c10/core/Storage.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dtr_torch {

//! A pin on a runtime storage (its bytes stay resident while it lives).
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
    //! The handles of a call's outputs: inline for the usual one or two.
    using outputs_t = c10::SmallVector<dtr::tensor, 2>;
    virtual outputs_t call(recipe_op op, std::span<const dtr::tensor> inputs, std::size_t outputs,
                           std::vector<std::uint32_t> mutates, std::optional<dtr::cost_t> cost,
                           std::uint64_t op_key) = 0;
    //! A step of the program begins (dtr::runtime::begin_step): the bridge marks each
    //! backward pass, so that the runtime follows the training loop's step.
    virtual void begin_step() = 0;
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
    //! Whether the policy scores with the runtime's forecast now: it reads one
    //! (dtr::reads_forecast) and the runtime follows a recorded step with the forecast in
    //! force (dtr::runtime::forecast() is set).
    virtual bool scores_with_forecast() const = 0;
    virtual std::size_t storage_count() const = 0;
    virtual std::size_t operator_count() const = 0;
    virtual void check_invariants() const = 0;
    virtual block_table& table() = 0;
    virtual const char* heuristic_name() const = 0;
};

//! The runtime for the heuristic named `name` (the bridge's list of policies), over a
//! torch_backend sharing `table`. @throws std::invalid_argument for an unknown name.
std::unique_ptr<runtime_iface> make_runtime(const std::string& name, dtr::runtime_options opts,
                                            std::shared_ptr<block_table> table);

} // namespace dtr_torch
