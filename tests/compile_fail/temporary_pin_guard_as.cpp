// SPDX-License-Identifier: Apache-2.0
// expect: as<T>() of a temporary pin guard: name the guard
// A span kept from a temporary guard: on a fixed-region backend its bytes soon belong to
// another tensor.
#include <dtr/runtime.hpp>

int main() {
    dtr::runtime<dtr::host_backend> rt;
    dtr::tensor t = rt.constant(16);
    auto floats = rt.pin(t).as<float>();
    return floats.size() == 4 ? 0 : 1;
}
