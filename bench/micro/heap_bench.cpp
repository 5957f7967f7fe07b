// SPDX-License-Identifier: Apache-2.0
// heap_bench: Boost.Heap's mutable heaps against the structures dtr::search::indexed uses
// (issue 11, item 7). Two workloads, each replayed identically on every structure:
//
// 1. Bucket order. indexed keeps each key bucket's members in order of last access in a
//    Boost.Intrusive multiset (red-black tree) and, per decision, walks a bucket from its
//    oldest member until the bound stops it. The workload: a bucket of n members whose
//    order keys are access times; each step is an access (the member moves to the newest
//    end), a leave-and-rejoin (eviction then rematerialization: erase, later insert with a
//    new time), or a decision (visit the k oldest members in order). The same steps run on
//    the multiset and on mutable Boost.Heap heaps (d_ary_heap arity 2 and 4, pairing_heap,
//    fibonacci_heap), where an access is update() on the member's handle, leave/rejoin is
//    erase()/push(), and the in-order visit uses the heaps' ordered iterators.
// 2. Bucket heads. Per decision indexed computes one bound per non-empty bucket and visits
//    buckets in increasing bound: std::make_heap + pop_heap on a reused vector. Against it:
//    boost::heap::d_ary_heap (arity 2, 4) and priority_queue filled and popped the same way.
//
// Each structure's visits are folded into a checksum: equal checksums mean the structure
// visits the same members in the same order (behaviour-identical), so only speed differs.
// With --ties T > 1 members share access times: the multiset keeps them in arrival order, a
// heap in no defined order, and the checksums say whether the visits still agree.
// Prints a table (median ns per step over --reps runs) and writes JSON with --json FILE.
//   heap_bench [--members N]... [--steps S] [--visit K] [--ties T] [--buckets B]... [--pops P]
//              [--reps R] [--seed X] [--json FILE]
#include <dtr_tools/cli.hpp>

#include <boost/heap/d_ary_heap.hpp>
#include <boost/heap/fibonacci_heap.hpp>
#include <boost/heap/pairing_heap.hpp>
#include <boost/heap/priority_queue.hpp>
#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace bi = boost::intrusive;
namespace bh = boost::heap;

// ---- workload 1: one bucket ---------------------------------------------------------------

enum class op : std::uint8_t { access, leave, rejoin, visit };
struct step {
    op kind;
    std::uint32_t member;
};

// A deterministic step sequence over n members: 60 % accesses, 15 % leaves, 15 % rejoins,
// 10 % decisions. Times are a global counter, so order keys are distinct.
std::vector<step> make_steps(std::uint32_t n, std::size_t count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<bool> in(n, true);
    std::vector<std::uint32_t> out;
    std::vector<step> steps;
    steps.reserve(count);
    while (steps.size() < count) {
        const auto r = rng() % 100;
        const auto m = static_cast<std::uint32_t>(rng() % n);
        if (r < 60) {
            if (in[m]) steps.push_back({op::access, m});
        } else if (r < 75) {
            if (in[m] && out.size() + 1 < n) {
                in[m] = false;
                out.push_back(m);
                steps.push_back({op::leave, m});
            }
        } else if (r < 90) {
            if (!out.empty()) {
                const auto i = static_cast<std::size_t>(rng() % out.size());
                const std::uint32_t back = out[i];
                out[i] = out.back();
                out.pop_back();
                in[back] = true;
                steps.push_back({op::rejoin, back});
            }
        } else {
            steps.push_back({op::visit, 0});
        }
    }
    return steps;
}

std::uint64_t fold(std::uint64_t sum, std::uint32_t id) { return sum * 1000003u + id + 1; }

// Access times. With tick > 1 the time advances only every tick-th event, so several members
// share a time, as the outputs of one operator share the runtime's clock.
struct clock {
    std::uint32_t tick;
    std::uint64_t events = 0;
    double operator++() { return static_cast<double>(++events / tick); }
};

// The current structure: an intrusive multiset ordered by the access time.
struct tree_node : bi::set_base_hook<bi::link_mode<bi::normal_link>> {
    double order = 0;
    std::uint32_t id = 0;
    friend bool operator<(const tree_node& a, const tree_node& b) { return a.order < b.order; }
};

std::uint64_t run_tree(std::uint32_t n, const std::vector<step>& steps, std::uint32_t visit,
                       std::uint32_t tick) {
    std::vector<tree_node> nodes(n);
    bi::multiset<tree_node, bi::constant_time_size<false>> tree;
    clock now{tick};
    for (std::uint32_t i = 0; i < n; ++i) {
        nodes[i].id = i;
        nodes[i].order = ++now;
        tree.insert(tree.end(), nodes[i]);
    }
    std::uint64_t sum = 0;
    for (const step& s : steps) {
        tree_node& x = nodes[s.member];
        switch (s.kind) {
            case op::access:
                tree.erase(tree.iterator_to(x));
                x.order = ++now;
                tree.insert(tree.end(), x); // the newest: the end, as indexed does
                break;
            case op::leave:
                tree.erase(tree.iterator_to(x));
                break;
            case op::rejoin:
                x.order = ++now;
                tree.insert(tree.end(), x);
                break;
            case op::visit: {
                std::uint32_t k = 0;
                for (auto it = tree.begin(); it != tree.end() && k < visit; ++it, ++k)
                    sum = fold(sum, it->id);
                break;
            }
        }
    }
    tree.clear();
    return sum;
}

// A mutable Boost.Heap heap of member indices, the oldest on top.
struct heap_item {
    double order;
    std::uint32_t id;
};
struct newer {
    bool operator()(const heap_item& a, const heap_item& b) const { return a.order > b.order; }
};

// Repush: an access erases and pushes again (a new insertion stamp for a stable heap, which
// then pops equal times in arrival order, as the multiset keeps them) instead of update().
template <class Heap, bool Repush = false>
std::uint64_t run_heap(std::uint32_t n, const std::vector<step>& steps, std::uint32_t visit,
                       std::uint32_t tick) {
    Heap heap;
    std::vector<typename Heap::handle_type> handles(n);
    clock now{tick};
    for (std::uint32_t i = 0; i < n; ++i) handles[i] = heap.push({++now, i});
    std::uint64_t sum = 0;
    for (const step& s : steps) {
        auto& h = handles[s.member];
        switch (s.kind) {
            case op::access:
                if constexpr (Repush) {
                    heap.erase(h);
                    h = heap.push(heap_item{++now, s.member});
                } else {
                    heap.decrease(h,
                                  heap_item{++now, s.member}); // later in the order: lower priority
                }
                break;
            case op::leave:
                heap.erase(h);
                break;
            case op::rejoin:
                h = heap.push({++now, s.member});
                break;
            case op::visit: {
                std::uint32_t k = 0;
                for (auto it = heap.ordered_begin(); it != heap.ordered_end() && k < visit;
                     ++it, ++k)
                    sum = fold(sum, it->id);
                break;
            }
        }
    }
    return sum;
}

using dary2 = bh::d_ary_heap<heap_item, bh::arity<2>, bh::mutable_<true>, bh::compare<newer>>;
using dary4 = bh::d_ary_heap<heap_item, bh::arity<4>, bh::mutable_<true>, bh::compare<newer>>;
using dary4_stable = bh::d_ary_heap<heap_item, bh::arity<4>, bh::mutable_<true>, bh::stable<true>,
                                    bh::compare<newer>>;
using pairing = bh::pairing_heap<heap_item, bh::compare<newer>>;
using fibonacci = bh::fibonacci_heap<heap_item, bh::compare<newer>>;

// ---- workload 2: bucket heads ---------------------------------------------------------------

struct head {
    double bound;
    std::uint32_t bucket;
};
struct later {
    bool operator()(const head& x, const head& y) const { return x.bound > y.bound; }
};

// decisions x (B bounds, pop the first `pops`): the same draws for every structure.
std::vector<head> make_heads(std::uint32_t buckets, std::size_t decisions, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<head> all;
    all.reserve(buckets * decisions);
    for (std::size_t d = 0; d < decisions; ++d)
        for (std::uint32_t b = 0; b < buckets; ++b) all.push_back({u(rng), b});
    return all;
}

std::uint64_t run_std_heap(const std::vector<head>& all, std::uint32_t buckets,
                           std::uint32_t pops) {
    std::vector<head> heads;
    std::uint64_t sum = 0;
    for (std::size_t d = 0; d < all.size(); d += buckets) {
        heads.assign(all.begin() + static_cast<std::ptrdiff_t>(d),
                     all.begin() + static_cast<std::ptrdiff_t>(d + buckets));
        std::make_heap(heads.begin(), heads.end(), later{});
        for (std::uint32_t p = 0; p < pops && !heads.empty(); ++p) {
            std::pop_heap(heads.begin(), heads.end(), later{});
            sum = fold(sum, heads.back().bucket);
            heads.pop_back();
        }
    }
    return sum;
}

template <class Heap>
std::uint64_t run_boost_heads(const std::vector<head>& all, std::uint32_t buckets,
                              std::uint32_t pops) {
    Heap heap;
    heap.reserve(buckets);
    std::uint64_t sum = 0;
    for (std::size_t d = 0; d < all.size(); d += buckets) {
        heap.clear();
        for (std::size_t i = d; i < d + buckets; ++i) heap.push(all[i]);
        for (std::uint32_t p = 0; p < pops && !heap.empty(); ++p) {
            sum = fold(sum, heap.top().bucket);
            heap.pop();
        }
    }
    return sum;
}

// Boost's pairing/fibonacci heaps have no reserve(): the heads workload rebuilds per decision.
template <class Heap>
std::uint64_t run_boost_node_heads(const std::vector<head>& all, std::uint32_t buckets,
                                   std::uint32_t pops) {
    std::uint64_t sum = 0;
    for (std::size_t d = 0; d < all.size(); d += buckets) {
        Heap heap;
        for (std::size_t i = d; i < d + buckets; ++i) heap.push(all[i]);
        for (std::uint32_t p = 0; p < pops && !heap.empty(); ++p) {
            sum = fold(sum, heap.top().bucket);
            heap.pop();
        }
    }
    return sum;
}

using heads_dary2 = bh::d_ary_heap<head, bh::arity<2>, bh::compare<later>>;
using heads_dary4 = bh::d_ary_heap<head, bh::arity<4>, bh::compare<later>>;
using heads_pq = bh::priority_queue<head, bh::compare<later>>;
using heads_pairing = bh::pairing_heap<head, bh::compare<later>>;

// ---- measurement ----------------------------------------------------------------------------

struct result {
    std::string workload, structure;
    std::uint32_t size;
    double ns_per_step;
    double vs_current; // ratio to the current structure's time (< 1: faster)
    bool identical;    // same checksum as the current structure
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
std::pair<double, std::uint64_t> time_it(std::size_t reps, std::size_t steps, F&& f) {
    std::vector<double> ns;
    std::uint64_t sum = 0;
    for (std::size_t r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        sum = f();
        const auto t1 = std::chrono::steady_clock::now();
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                     static_cast<double>(steps));
    }
    return {median(ns), sum};
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::uint32_t> members{64, 1024, 16384};
    std::vector<std::uint32_t> buckets{16, 64, 256};
    std::size_t steps = 400000, reps = 5;
    std::uint32_t visit = 4, pops = 2, tick = 1;
    std::uint64_t seed = 1;
    std::string json;

    CLI::App app{
        "heap_bench: Boost.Heap's mutable heaps against dtr::search::indexed's structures"};
    app.add_option("--members", members, "bucket sizes of workload 1 (repeat the flag)")
        ->check(dtr::tools::positive);
    app.add_option("--buckets", buckets, "non-empty buckets per decision in workload 2 (repeat)")
        ->check(dtr::tools::positive);
    app.add_option("--steps", steps, "steps per run (workload 1) and decisions / 8 (workload 2)")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--visit", visit, "members visited per decision (workload 1)")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--ties", tick,
                   "workload 1: the clock advances every TIES-th event (1: no ties)")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--pops", pops, "buckets visited per decision (workload 2)")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--reps", reps, "runs per cell; the median is reported")
        ->check(dtr::tools::positive)
        ->capture_default_str();
    app.add_option("--seed", seed, "seed of the step sequences")->capture_default_str();
    app.add_option("--json", json, "write the results as JSON to FILE");
    if (auto status = dtr::tools::parse_command_line(app, argc, argv)) return *status;

    std::vector<result> results;
    for (std::uint32_t n : members) {
        const auto seq = make_steps(n, steps, seed);
        const auto [base_ns, base_sum] =
            time_it(reps, seq.size(), [&] { return run_tree(n, seq, visit, tick); });
        results.push_back({"bucket order", "intrusive multiset (current)", n, base_ns, 1.0, true});
        auto add = [&](const char* name, auto&& f) {
            const auto [ns, sum] = time_it(reps, seq.size(), f);
            results.push_back({"bucket order", name, n, ns, ns / base_ns, sum == base_sum});
        };
        add("d_ary_heap<2> mutable", [&] { return run_heap<dary2>(n, seq, visit, tick); });
        add("d_ary_heap<4> mutable", [&] { return run_heap<dary4>(n, seq, visit, tick); });
        add("d_ary_heap<4> mutable stable, repush",
            [&] { return run_heap<dary4_stable, true>(n, seq, visit, tick); });
        add("pairing_heap", [&] { return run_heap<pairing>(n, seq, visit, tick); });
        add("fibonacci_heap", [&] { return run_heap<fibonacci>(n, seq, visit, tick); });
    }
    const std::size_t decisions = std::max<std::size_t>(1, steps / 8);
    for (std::uint32_t b : buckets) {
        const auto all = make_heads(b, decisions, seed);
        const auto [base_ns, base_sum] =
            time_it(reps, decisions, [&] { return run_std_heap(all, b, pops); });
        results.push_back(
            {"bucket heads", "std::make_heap/pop_heap (current)", b, base_ns, 1.0, true});
        auto add = [&](const char* name, auto&& f) {
            const auto [ns, sum] = time_it(reps, decisions, f);
            results.push_back({"bucket heads", name, b, ns, ns / base_ns, sum == base_sum});
        };
        add("d_ary_heap<2>", [&] { return run_boost_heads<heads_dary2>(all, b, pops); });
        add("d_ary_heap<4>", [&] { return run_boost_heads<heads_dary4>(all, b, pops); });
        add("priority_queue", [&] { return run_boost_heads<heads_pq>(all, b, pops); });
        add("pairing_heap", [&] { return run_boost_node_heads<heads_pairing>(all, b, pops); });
    }

    std::printf("%-13s %-36s %7s %12s %10s %9s\n", "workload", "structure", "size", "ns/step",
                "vs current", "identical");
    for (const result& r : results)
        std::printf("%-13s %-36s %7u %12.1f %10.2f %9s\n", r.workload.c_str(), r.structure.c_str(),
                    r.size, r.ns_per_step, r.vs_current, r.identical ? "yes" : "NO");
    std::printf(
        "(bucket order: ns per step of a 60/15/15/10 access/leave/rejoin/visit-%u mix; "
        "bucket heads: ns per decision popping %u of the buckets)\n",
        visit, pops);

    if (!json.empty()) {
        std::ofstream out(json);
        if (!out) {
            std::fprintf(stderr, "heap_bench: --json: cannot write %s\n", json.c_str());
            return 1;
        }
        out << "[\n";
        for (std::size_t i = 0; i < results.size(); ++i) {
            const result& r = results[i];
            char line[512];
            std::snprintf(line, sizeof line,
                          "  {\"workload\": \"%s\", \"structure\": \"%s\", \"size\": %u, "
                          "\"ns_per_step\": %.2f, "
                          "\"vs_current\": %.3f, \"identical\": %s, \"steps\": %zu, \"visit\": %u, "
                          "\"pops\": %u, "
                          "\"ties\": %u, \"reps\": %zu, \"seed\": %llu}%s\n",
                          r.workload.c_str(), r.structure.c_str(), r.size, r.ns_per_step,
                          r.vs_current, r.identical ? "true" : "false", steps, visit, pops, tick,
                          reps, static_cast<unsigned long long>(seed),
                          i + 1 < results.size() ? "," : "");
            out << line;
        }
        out << "]\n";
    }
    return 0;
}
