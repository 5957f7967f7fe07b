// SPDX-License-Identifier: Apache-2.0
// expect: Backend does not model dtr::backend
// execute() must take the runtime's capturing lambdas, not only function pointers.
#include <dtr/runtime.hpp>

struct fnptr_backend : dtr::host_backend {
    dtr::cost_t execute(void (*body)()) {
        body();
        return 0;
    }
};

int main() { dtr::runtime<fnptr_backend> rt; }
