// SPDX-License-Identifier: Apache-2.0
// expect: Heuristic does not model dtr::heuristic
#include <dtr/runtime.hpp>

struct idle_policy {
    struct storage_data {};
};

int main() { dtr::runtime<dtr::host_backend, idle_policy> rt; }
