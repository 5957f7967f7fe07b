// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief How the bridge executes each operator: its classification (computed once per
//! operator overload from its schema, by dtr_torch/schema.py, the trace recorder's too) and
//! the table that caches it for the dispatch path.

#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtr_torch {

struct op_info {
    std::optional<c10::OperatorHandle> op;
    std::string name; //!< "aten::add.Tensor"
    //! The name's hash (never 0): the call's dtr::call_options::op_key, so that the runtime's
    //! step tracker tells operators apart although every call runs the same recipe type.
    std::uint64_t key = 1;
    enum kind_t : int {
        compute = 0,        //!< fresh results and/or writes: a runtime call (or run in place)
        view = 1,           //!< results alias arguments: no runtime call
        detach_inplace = 2, //!< detach_: autograd's business only
        inplace_view = 3,   //!< changes sizes or strides in place: the tensor's geometry
        pass_through = 4,   //!< profiler markers: run as they are
        collective = 5,     //!< c10d:: (torch.distributed's process-group operators)
        functional_collective = 6, //!< _c10d_functional:: (2.x): fresh results written later
        resize = 7,                //!< set_, resize_: other memory in place: refused
    } kind = compute;
    //! (argument index, bool argument that must be true for the write, or -1)
    std::vector<std::pair<int, int>> writes;
    std::vector<int> return_alias; //!< per return: argument index it writes/aliases, or -1
    bool random = false;
    int generator_arg = -1;
    int first_list_arg = -1;
    //! Its kernel may read scratch memory it never wrote: zero-fill what it allocates
    //! (torch_compat.hpp, reads_uninitialized_scratch).
    bool zero_scratch = false;
    //! The out-of-place form of an in-place operator (relu_ -> relu, add_.Tensor ->
    //! add.Tensor), or null. See "in-place without a copy" in dispatch.cpp.
    std::shared_ptr<const op_info> functional;
};

//! The classification of `op`, computed on first sight (Python, under the GIL: once per
//! operator overload in the process) and cached.
const op_info& info_of(const c10::OperatorHandle& op);

//! Registers the bridge's kernel by name for every operator whose kernel below autograd is a
//! composite one (CompositeExplicitAutograd and its non-functional variant), and for every
//! composite-implicit one that the CPU (and CUDA, where built) backends implement themselves;
//! either would otherwise decompose the operator before the bridge's fallback sees it: under
//! the bridge every operator is recorded whole, as its caller called it. Idempotent; operators registered
//! since the last call (a library imported later) are claimed by the next.
void claim_composite_operators();

} // namespace dtr_torch
