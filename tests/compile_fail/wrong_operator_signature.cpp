// SPDX-License-Identifier: Apache-2.0
// expect: the operator must be callable as op(dtr::op_context<Backend>&)
#include <dtr/runtime.hpp>

int main() {
    dtr::runtime<dtr::host_backend> rt;
    dtr::tensor x = rt.constant(16);
    (void)rt.call([](int) {}, {x});
}
