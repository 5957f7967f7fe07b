// SPDX-License-Identifier: Apache-2.0
// expect: compiles
// The control: a correct policy with hooks, so that a broken include path or compiler
// cannot make the failures above pass.
#include <dtr/runtime.hpp>

struct counting_policy {
    struct storage_data {};
    static constexpr dtr::hook_set hooks = dtr::hook_flag::on_evict;
    int evictions = 0;
    template <class S>
    double score(const S& s, const dtr::heuristic_context&) const {
        return static_cast<double>(s.size());
    }
    template <class S>
    void on_evict(S&, const dtr::heuristic_context&) {
        ++evictions;
    }
};

int main() {
    dtr::runtime<dtr::host_backend, counting_policy> rt({.budget = 64});
    dtr::tensor x = rt.constant(16);
    auto copy = [](auto& ctx) { ctx.output(0, ctx.input(0).size()); };
    dtr::tensor a = rt.call(copy, {x}, {.cost = 1.0});
    dtr::tensor b = rt.call(copy, {a}, {.cost = 1.0});
    dtr::tensor c = rt.call(copy, {b}, {.cost = 1.0});
    dtr::tensor d = rt.call(copy, {c}, {.cost = 1.0});
    return rt.heuristic().evictions > 0 ? 0 : 1;
}
