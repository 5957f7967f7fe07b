// SPDX-License-Identifier: Apache-2.0
// The program every consumer project (Meson subproject, pkg-config, CMake) builds against dtr:
// a chain of operators under a budget too small for it, so that the runtime evicts and
// recomputes; it checks the value read back and exits non-zero on a mismatch. Compiled by the
// consumers with strict warnings and -Werror: dtr's headers must reach it as system headers.
#include <dtr/runtime.hpp>

#include <cstdio>
#include <vector>

int main() {
    dtr::runtime<dtr::host_backend> rt({.budget = 4096});
    dtr::tensor x = rt.constant(1024, [](auto bytes) {
        for (auto& b : bytes.span()) b = std::byte{1};
    });
    auto plus_one = [](dtr::op_context<dtr::host_backend>& ctx) {
        auto in = ctx.input(0).as<unsigned char>();
        auto out = ctx.output(0, in.size()).as<unsigned char>();
        for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<unsigned char>(in[i] + 1);
    };
    std::vector<dtr::tensor> chain{x};
    for (int i = 0; i < 8; ++i) chain.push_back(rt.call(plus_one, {chain.back()}));

    // Reading the first results again recomputes them (they were evicted to fit the rest).
    auto first = rt.pin(chain[1]);
    const int value = first.as<unsigned char>()[0];
    const auto evictions = static_cast<unsigned long long>(rt.stats().evictions);
    std::printf("consumer: chain[1][0] = %d (expected 2), %llu evictions\n", value, evictions);
    return value == 2 && evictions > 0 ? 0 : 1;
}
