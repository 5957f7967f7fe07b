// SPDX-License-Identifier: Apache-2.0
#include "view_cache.hpp"

#include <cstring>
#include <type_traits>

namespace dtr_torch {
namespace {

template <class T>
void put(std::string& k, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    k.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_ints(std::string& k, c10::ArrayRef<int64_t> v) {
    put(k, v.size());
    k.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

//! Appends `v` to `k`; false for a kind the key does not spell. Each kind has its own tag, so
//! that different arguments never spell the same bytes.
bool put_value(std::string& k, const c10::IValue& v) {
    if (v.isNone()) {
        k.push_back('n');
    } else if (v.isInt()) {
        k.push_back('i');
        put(k, v.toInt());
    } else if (v.isBool()) {
        k.push_back('b');
        put(k, v.toBool());
    } else if (v.isDouble()) {
        k.push_back('d');
        put(k, v.toDouble());
    } else if (v.isIntList()) {
        k.push_back('l');
        put_ints(k, v.toIntVector());
    } else if (v.isString()) {
        k.push_back('s');
        const std::string& s = v.toStringRef();
        put(k, s.size());
        k.append(s);
    } else {
        return false;
    }
    return true;
}

} // namespace

std::optional<std::string> view_cache::key_of(const op_info& info,
                                              const std::vector<c10::IValue>& stack,
                                              c10::ArrayRef<arg_slot> slots,
                                              c10::ArrayRef<tensor_arg> tensors,
                                              c10::ArrayRef<ref_ptr> inputs) {
    std::string k;
    k.reserve(160);
    put(k, &info); // one op_info per operator overload, for the life of the process
    // Tensor slots are None in the recipe's stack; the slots say where tensors go.
    for (const arg_slot& s : slots) {
        put(k, s.stack_index);
        put(k, s.kind);
        put(k, s.tensors.size());
        for (int32_t t : s.tensors) put(k, t);
    }
    for (const tensor_arg& t : tensors) {
        put(k, t.input);
        put(k, inputs[t.input]->nbytes());
        put_ints(k, t.geom.sizes);
        put_ints(k, t.geom.strides);
        put(k, t.geom.offset);
        put(k, t.geom.dtype);
        put(k, t.geom.device.type());
        put(k, t.geom.device.index());
    }
    for (const c10::IValue& v : stack)
        if (!put_value(k, v)) return std::nullopt;
    return k;
}

view_cache& view_cache::local() {
    thread_local view_cache cache;
    return cache;
}

} // namespace dtr_torch
