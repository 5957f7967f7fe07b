// SPDX-License-Identifier: Apache-2.0
#include "counting_allocator.hpp"

#include <c10/core/CPUAllocator.h>

namespace dtr_torch {

counting_allocator* counting_allocator::instance = nullptr;

counting_allocator& cpu_counter() {
    static auto* instance = [] {
        auto* a = new counting_allocator(c10::GetCPUAllocator());
        counting_allocator::instance = a;
        c10::SetCPUAllocator(a, /*priority=*/100);
        return a;
    }();
    return *instance;
}

} // namespace dtr_torch
