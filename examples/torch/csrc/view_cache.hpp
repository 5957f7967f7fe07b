// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The geometries of view operators' results, remembered per operator, argument
//! geometries and other arguments.
//!
//! A view costs no runtime call, but the bridge learns its result's geometry by running the
//! view operator on memoryless storages: a whole dispatch, 8-14 µs per view on PyTorch 2.6,
//! where a small GPT's training step runs over a hundred views. A training loop runs the same
//! views on the same geometries every step, and a view's result geometry follows from those
//! alone (sizes, strides, offset, dtype of each tensor argument, the size of its storage, and
//! the non-tensor arguments), so the second time the bridge looks it up instead.
//! Thread-local (no lock on the per-operator path); at most `capacity` entries per thread,
//! cleared when full.

#pragma once

#include "managed_tensor.hpp"
#include "op_info.hpp"
#include "recipe.hpp"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtr_torch {

//! A view call's results: per return, the tensors (one, or a list's), each as the index of the
//! call's input storage it views and its geometry (input -1: an undefined tensor).
//! Non-tensor returns are kept as they were (none of ATen's views has one).
struct view_results {
    struct view_of {
        int32_t input = -1;
        geometry geom;
    };
    struct returned {
        bool list = false;
        std::vector<view_of> tensors;
        std::optional<c10::IValue> other; //!< a return that is not a tensor, as it was
    };
    std::vector<returned> returns;
};

class view_cache {
public:
    static constexpr std::size_t capacity = 1U << 14;

    //! The key of a view call, or nullopt when one of its non-tensor arguments is of a kind
    //! the key does not spell (then the call runs the view operator, uncached).
    static std::optional<std::string> key_of(const op_info& info,
                                             const std::vector<c10::IValue>& stack,
                                             c10::ArrayRef<arg_slot> slots,
                                             c10::ArrayRef<tensor_arg> tensors,
                                             c10::ArrayRef<ref_ptr> inputs);

    const view_results* find(const std::string& key) const {
        auto it = map_.find(key);
        return it == map_.end() ? nullptr : &it->second;
    }
    void insert(std::string key, view_results r) {
        if (map_.size() >= capacity) map_.clear();
        map_.emplace(std::move(key), std::move(r));
    }

    //! This thread's cache.
    static view_cache& local();

private:
    std::unordered_map<std::string, view_results> map_;
};

} // namespace dtr_torch
