// SPDX-License-Identifier: Apache-2.0
// expect: span() of a temporary pin guard: name the guard
// The loop of examples/train_mlp.cpp before issue 34: in C++20 the guard is destroyed before
// the loop body runs, so the body read bytes nothing pinned.
#include <dtr/runtime.hpp>

#include <cstddef>

int main() {
    dtr::runtime<dtr::host_backend> rt;
    dtr::tensor t = rt.constant(16, [](auto bytes) {
        for (auto& b : bytes.span()) b = std::byte{1};
    });
    unsigned sum = 0;
    for (std::byte b : rt.pin(t).span()) sum += std::to_integer<unsigned>(b);
    return sum == 16 ? 0 : 1;
}
