// SPDX-License-Identifier: Apache-2.0
// expect: has a member named on_evict that cannot be called
// A hook without the context parameter would never be called: the runtime rejects it.
#include <dtr/runtime.hpp>

struct forgetful_policy {
    struct storage_data {};
    template <class S>
    double score(const S& s, const dtr::heuristic_context&) const {
        return static_cast<double>(s.size());
    }
    template <class S>
    void on_evict(S&) {} // the context is missing
};

int main() { dtr::runtime<dtr::host_backend, forgetful_policy> rt; }
