// SPDX-License-Identifier: Apache-2.0
// expect: compiles
// The control of the temporary_pin_guard_* snippets: the same accessors on named guards, read
// and write, const and not, and a temporary guard's handle (a copy), compile and run.
#include <dtr/runtime.hpp>

#include <cstddef>

int main() {
    dtr::runtime<dtr::host_backend> rt;
    dtr::tensor t = rt.constant(16);
    {
        auto w = rt.pin_for_write(t);
        for (auto& b : w.span()) b = std::byte{1};
        w.as<unsigned char>()[0] = 2;
    }
    unsigned sum = 0;
    {
        const auto guard = rt.pin(t);
        for (std::byte b : guard.span()) sum += std::to_integer<unsigned>(b);
        sum += guard.as<unsigned char>()[1] + static_cast<unsigned>(guard.data().size());
    }
    const dtr::tensor same = rt.pin(t).handle();
    return sum == 17 + 1 + 16 && same == t ? 0 : 1;
}
