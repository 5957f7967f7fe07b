// SPDX-License-Identifier: Apache-2.0
// expect: data() of a temporary pin guard: name the guard
// A device address kept from a temporary guard (the cuda_backend's way to reach the bytes).
#include <dtr/runtime.hpp>

int main() {
    dtr::runtime<dtr::sim_backend> rt;
    dtr::tensor t = rt.constant(16);
    const auto view = rt.pin(t).data();
    return view.size() == 16 ? 0 : 1;
}
