// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What one runtime call records and runs: the operator with its boxed arguments, where
//! each tensor argument sits and its geometry, the generator state of a random operator; the
//! first run records its outputs' geometry and every rematerialization must reproduce it.

#pragma once

#include "runtime_iface.hpp"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtr_torch {

//! A tensor's view of its storage: sizes, strides, offset, dtype, device.
struct geometry {
    c10::SmallVector<int64_t, 5> sizes;
    c10::SmallVector<int64_t, 5> strides;
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
c10::Storage borrowed_storage(const void* data, std::size_t bytes, c10::Device device);

//! A plain tensor with geometry `g` on `storage`.
at::Tensor tensor_on(const c10::Storage& storage, const geometry& g);

//! Refuses (dtr_torch::unsupported, naming `op`) a return of `op` that is not one of its
//! tensor results but holds a defined tensor somewhere inside it (lists, tuples, dicts,
//! nested; a value of type Any or of a type variable): that tensor would leave the bridge
//! unmanaged, outside the budget, or be lost.
void refuse_hidden_tensors(const std::string& op, const c10::IValue& v);

//! Where a tensor argument lives in the boxed stack.
struct arg_slot {
    enum kind_t : std::uint8_t { tensor, optional_tensor, tensor_list, optional_tensor_list } kind;
    std::size_t stack_index;
    c10::SmallVector<int32_t, 2> tensors; //!< index into recipe::tensors per element, -1 for None
};

struct tensor_arg {
    std::uint32_t input; //!< distinct storage index among the call's inputs
    geometry geom;
};

//! Everything one call records; run by the runtime the first time and whenever one of its
//! outputs is rematerialized. Its lists are inline for the common sizes (an operator has a
//! few tensor arguments and results): each heap block would be a malloc and a free per
//! operator, where plain PyTorch spends about 1 us on a whole small CPU operator.
struct recipe {
    std::optional<c10::OperatorHandle> op;
    std::vector<c10::IValue> stack; //!< the arguments, with tensor slots left as None
    c10::SmallVector<arg_slot, 3> slots;
    c10::SmallVector<tensor_arg, 3> tensors;
    c10::SmallVector<std::uint8_t, 4> input_mutated; //!< per distinct input
    c10::SmallVector<std::size_t, 2> fresh_returns;  //!< return positions whose tensors are outputs
    std::size_t n_outputs = 0;
    bool zero_scratch = false; //!< op_info::zero_scratch
    // Random operators: the generator and its state before the first run.
    std::optional<at::Generator> generator;
    at::Tensor rng_state;
    // Filled by the first run: each output's geometry (rematerializations must agree).
    c10::SmallVector<geometry, 1> out_geom;
    c10::SmallVector<std::uint8_t, 2> out_defined;
    //! The first run's returns that are neither tensors nor written arguments (the sizes an
    //! attention kernel returns beside its tensors), by return position; empty where there
    //! is none.
    std::vector<c10::IValue> other_returns;
    bool ran = false;
    //! Grad mode at the first run: a kernel may decide on it what to return (2.x's oneDNN
    //! LSTM returns its workspace only with grad mode on), and a recomputation in backward,
    //! where grad mode is off, must return what the first run did.
    bool grad_mode = true;
    std::size_t io_bytes = 0; //!< bytes of the outputs of the first run (physical floor)
    //! The reader counts of the input versions this recipe reads (storage_ref::readers): while
    //! the runtime keeps the record, those versions may be read again by a rematerialization.
    c10::SmallVector<std::shared_ptr<std::size_t>, 3> reads;

    recipe() = default;
    recipe(const recipe&) = delete;
    recipe& operator=(const recipe&) = delete;
    ~recipe() {
        for (auto& c : reads) --*c;
    }

    void run(context_t& ctx);
};

//! Puts plain tensors over `storages` (one per distinct input) into the tensor slots of `s`:
//! how a recipe, and the paths that run a kernel outside the runtime, build its arguments.
void fill_stack(std::vector<c10::IValue>& s, c10::ArrayRef<arg_slot> slots,
                c10::ArrayRef<tensor_arg> tensors, c10::ArrayRef<c10::Storage> storages);

} // namespace dtr_torch
