// SPDX-License-Identifier: Apache-2.0
// Quick start: the smallest useful program, shown in the README.
#include <dtr/runtime.hpp>

#include <cstdio>

int main() {
    // A runtime on host memory that never holds more than 4 KiB of tensors.
    dtr::runtime<dtr::host_backend> rt({.budget = 4096});

    // A constant (parameter or input), filled once.
    dtr::tensor x = rt.constant(1024, [](auto bytes) {
        for (auto& b : bytes.span()) b = std::byte{1};
    });

    // An operator: a pure function of its inputs that asks the context for its outputs.
    auto twice = [](dtr::op_context<dtr::host_backend>& ctx) {
        auto in = ctx.input(0).as<unsigned char>();
        auto out = ctx.output(0, in.size()).as<unsigned char>();
        for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<unsigned char>(2 * in[i]);
    };

    // Eight calls need 9 KiB: the runtime evicts under the budget...
    dtr::tensor y = x;
    std::vector<dtr::tensor> history;
    for (int i = 0; i < 8; ++i) history.push_back(y = rt.call(twice, {y}));

    // ...and recomputes whatever is read again, bit for bit.
    auto first = rt.pin(history[0]);
    std::printf(
        "history[0][0] = %d, peak resident %zu bytes of a %zu-byte budget, %llu evictions, "
        "%llu recomputations\n",
        static_cast<int>(first.as<unsigned char>()[0]), rt.stats().peak_resident_bytes, rt.budget(),
        static_cast<unsigned long long>(rt.stats().evictions),
        static_cast<unsigned long long>(rt.stats().rematerializations));
}
