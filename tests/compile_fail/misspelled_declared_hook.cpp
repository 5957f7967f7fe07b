// SPDX-License-Identifier: Apache-2.0
// expect: lists on_evict in its `hooks` but has no member
// A policy that declares its hooks gets misspelled ones reported.
#include <dtr/runtime.hpp>

struct declared_policy {
    struct storage_data {};
    static constexpr dtr::hook_set hooks = dtr::hook_flag::on_evict | dtr::hook_flag::on_access;
    template <class S>
    double score(const S& s, const dtr::heuristic_context&) const {
        return static_cast<double>(s.size());
    }
    template <class S>
    void on_evicted(S&, const dtr::heuristic_context&) {} // misspelled
    template <class S>
    void on_access(S&, const dtr::heuristic_context&) {}
};

int main() { dtr::runtime<dtr::host_backend, declared_policy> rt; }
