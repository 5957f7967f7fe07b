// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief DTR as an offline planner: runs a static graph through dtr::runtime on the
//! simulator and records what the runtime executed as a dtr::graph::schedule.
//!
//! The program is the graph's topological schedule (nodes 0..n-1 of a topologically indexed
//! graph: forward, then loss and backward), each node one `runtime::call` with the node's
//! supplied cost and one output of `output_bytes`, each handle dropped right after the last
//! call that reads it (a node nothing reads is dropped right after its own call, as
//! checkpoint-all does). The runtime decides everything else: which storages to evict under
//! the budget and what to rematerialise when an evicted tensor is needed again.
//!
//! ## Recording
//!
//! - `compute v`: every operator callable captures its node id and appends `compute v` each
//!   time the runtime runs it (the first call and every rematerialisation), right after its
//!   output has been allocated, so that the evictions that allocation caused come first.
//! - `free v`: the heuristic is wrapped in a thin observer (recording_policy) that forwards
//!   every member the runtime uses (score, choose, every hook) to the wrapped policy and, on
//!   the way, sees `on_create` / `on_rematerialize` (the storage becomes resident; the node
//!   is the operator that just ran), `on_evict` (heuristic or eager eviction: free) and
//!   `on_destroy` (a storage freed for good: free if it was resident). A storage's node is
//!   recorded when it is created and checked at every rematerialisation.
//!
//! ## Memory model
//!
//! The runtime's budget counts the sizes of resident storages plus the output being
//! allocated; inputs of the running operator are pinned (resident). That is the checker's
//! model (resident tensors + the output being computed), node for node: every node's output
//! is exactly one storage, there are no constants, aliases, in-place updates or workspaces.
//! The returned schedule is meant to be verified with graph::check_schedule() under the same
//! budget; its cost there equals `compute_cost` (the runtime's counters), which the tests
//! assert.
#pragma once

#include <dtr/backend/sim.hpp>
#include <dtr/concepts.hpp>
#include <dtr/error.hpp>
#include <dtr/hooks.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/graph/schedule.hpp>
#include <dtr_tools/graph/static_graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtr::graph {

//! @brief What the recording adapter collects: the event list and which node each storage
//! holds.
struct dtr_recording {
    schedule events;
    node_id running = 0;    //!< the node whose operator ran last
    node_id attempting = 0; //!< the node whose operator last asked for its output
    bool pending = false;   //!< an operator ran and its storage is not yet installed
    struct storage_state {
        node_id node = 0;
        bool resident = false;
    };
    std::unordered_map<std::uint64_t, storage_state> storages; //!< by storage id
    std::string inconsistency; //!< first mismatch seen (empty: none)

    void note(std::string what) {
        if (inconsistency.empty()) inconsistency = std::move(what);
    }
};

//! @brief A heuristic H that also records residency changes into a dtr_recording.
//!
//! Forwards score() (and its bounded form, dtr/bounded_score.hpp), choose() (when H has it),
//! every hook H has, and whether H reads the forecast (dtr::reads_forecast: the runtime then
//! leaves the order of kept storages to H's scores); decisions are H's alone.
template <class H>
class recording_policy {
public:
    using storage_data = typename H::storage_data;
    static constexpr bool reads_forecast = ::dtr::reads_forecast<H>;

    recording_policy() = default;
    explicit recording_policy(H inner) : inner_(std::move(inner)) {}

    // Declared return types: the heuristic concept checks these against an archetype
    // storage without instantiating the bodies. score() exists only when H scores (a
    // choosing policy such as random has none), so the wrapper meets the same concept as H.
    template <class S, class Inner = H>
        requires requires(Inner& h, const S& s, const heuristic_context& c) { h.score(s, c); }
    double score(const S& s, const heuristic_context& c) {
        return static_cast<double>(inner_.score(s, c));
    }
    template <class S, class Inner = H>
        requires requires(Inner& h, const S& s, const heuristic_context& c, double b) {
            h.score(s, c, b);
        }
    double score(const S& s, const heuristic_context& c, double bound) {
        return static_cast<double>(inner_.score(s, c, bound));
    }
    template <class Pool, class Inner = H>
        requires requires(Inner& h, Pool& p, const heuristic_context& c) { h.choose(p, c); }
    auto choose(Pool& pool, const heuristic_context& c)
        -> decltype(std::declval<Inner&>().choose(pool, c)) {
        return inner_.choose(pool, c);
    }

    template <class S>
    void on_create(S& s, const heuristic_context& c) {
        hook::on_create_t::invoke(inner_, s, c);
        if (!log_.pending) {
            log_.note("storage #" + std::to_string(s.id()) + " created without an operator run");
            return;
        }
        log_.pending = false;
        log_.storages[s.id()] = {log_.running, true};
    }
    template <class S>
    void on_rematerialize(S& s, const heuristic_context& c) {
        hook::on_rematerialize_t::invoke(inner_, s, c);
        auto it = log_.storages.find(s.id());
        if (!log_.pending || it == log_.storages.end() || it->second.node != log_.running ||
            it->second.resident) {
            log_.note("storage #" + std::to_string(s.id()) +
                      " rematerialised by an operator that did not create it");
            return;
        }
        log_.pending = false;
        it->second.resident = true;
    }
    template <class S>
    void on_evict(S& s, const heuristic_context& c) {
        hook::on_evict_t::invoke(inner_, s, c);
        drop(s.id(), "evicted");
    }
    template <class S>
    void on_destroy(S& s, const heuristic_context& c) {
        hook::on_destroy_t::invoke(inner_, s, c);
        auto it = log_.storages.find(s.id());
        if (it == log_.storages.end()) return;
        if (it->second.resident) log_.events.free(it->second.node);
        log_.storages.erase(it);
    }
    template <class S>
    void on_access(S& s, const heuristic_context& c) {
        hook::on_access_t::invoke(inner_, s, c);
    }
    template <class S>
    void on_release(S& s, const heuristic_context& c) {
        hook::on_release_t::invoke(inner_, s, c);
    }
    template <class S>
    void on_pool_insert(S& s, const heuristic_context& c) {
        hook::on_pool_insert_t::invoke(inner_, s, c);
    }
    template <class S>
    void on_pool_erase(S& s, const heuristic_context& c) {
        hook::on_pool_erase_t::invoke(inner_, s, c);
    }

    //! Called by the operator of node v before it allocates its output.
    void attempt(node_id v) noexcept { log_.attempting = v; }

    //! Called by the operator of node v after its output is allocated.
    void ran(node_id v) {
        if (log_.pending)
            log_.note("operator of " + std::to_string(v) +
                      " ran before the last one's output was installed");
        log_.events.compute(v);
        log_.running = v;
        log_.pending = true;
    }

    [[nodiscard]] dtr_recording& recording() noexcept { return log_; }
    [[nodiscard]] H& inner() noexcept { return inner_; }

private:
    void drop(std::uint64_t id, const char* how) {
        auto it = log_.storages.find(id);
        if (it == log_.storages.end() || !it->second.resident) {
            log_.note("storage #" + std::to_string(id) + " " + how +
                      " while not recorded as resident");
            return;
        }
        it->second.resident = false;
        log_.events.free(it->second.node);
    }

    H inner_{};
    dtr_recording log_;
};

//! @brief One DTR run on a static graph.
struct dtr_run {
    //! "ok"; "oom" (dtr::out_of_memory: the budget cannot hold some operator with everything
    //! else evicted); "thrashing" (over options.remat_limit); "inconsistent" (the recording
    //! could not map a storage to its node: a bug, reported rather than hidden).
    std::string status = "ok";
    //! What the runtime executed in the last iteration (complete only when status is "ok").
    schedule events;
    //! The runtime's own total in the last iteration: first runs + rematerialisations.
    cost_t compute_cost = 0;
    //! The same total for each iteration run (simulate_dtr's `iterations`), the last one's
    //! included even when it stopped.
    std::vector<cost_t> iteration_costs;
    counters stats{};   //!< the runtime's counters at the end
    std::string detail; //!< the exception's message when not ok
    //! When not ok: the program's node being called (its inputs are pinned by the call), the
    //! node whose operator failed to allocate its output (the program's node itself, or one
    //! being rematerialised for it), and the nodes resident at that moment, ascending
    //! (after an out_of_memory every resident storage is one that could not be evicted).
    node_id program_node = 0;
    node_id failing_node = 0;
    std::vector<node_id> resident_at_failure;
};

//! @brief Runs `g` (topologically indexed) through `runtime<sim_backend, H>` under `budget`
//! bytes and returns the recorded schedule.
//!
//! `options.budget` is overwritten with `budget`; the other options (deallocation policy,
//! remat limit, step learning) are used as given. With `iterations` > 1 the program runs that
//! many times in a row on one runtime, as the steps of a training loop (runtime::begin_step()
//! before each): every handle is dropped at the end of an iteration, so each starts from an
//! empty memory, and the schedule returned is the last iteration's alone, a schedule of the
//! graph the checker verifies like any other. Complexity: that of the runtime on n x
//! iterations calls.
//! @throws dtr::logic_error when `g` is not topologically indexed.
template <class H>
[[nodiscard]] dtr_run simulate_dtr(const static_graph& g, std::uint64_t budget,
                                   runtime_options options = {}, H heuristic = H{},
                                   std::size_t iterations = 1) {
    DTR_EXPECTS(g.is_topologically_indexed(), "simulate_dtr: graph must be topologically indexed");
    options.budget = static_cast<std::size_t>(
        std::min<std::uint64_t>(budget, std::numeric_limits<std::size_t>::max()));
    using policy = recording_policy<H>;
    dtr_run out;
    {
        runtime<sim_backend, policy> rt(options, sim_backend{}, policy(std::move(heuristic)));
        policy* rec = &rt.heuristic(); // stable: the runtime does not move
        const std::size_t n = g.size();
        // Last reader of each node in program order (n = nothing reads it).
        std::vector<node_id> last_use(n, n);
        for (node_id v = 0; v < n; ++v)
            for (const node_id u : g.predecessors(v)) last_use[u] = v;
        std::vector<tensor> handle(n);
        std::vector<tensor> inputs;
        node_id v = 0;
        const auto snapshot = [&] {
            out.program_node = v;
            out.failing_node = rec->recording().attempting;
            for (const auto& [id, st] : rec->recording().storages)
                if (st.resident) out.resident_at_failure.push_back(st.node);
            std::sort(out.resident_at_failure.begin(), out.resident_at_failure.end());
        };
        std::size_t events_before = 0; // where the running iteration's events begin
        cost_t cost_before = 0;
        const auto spent = [&rt] { return rt.stats().compute_cost + rt.stats().remat_cost; };
        try {
            for (std::size_t it = 0; it < std::max<std::size_t>(iterations, 1); ++it) {
                events_before = rec->recording().events.size();
                cost_before = spent();
                if (iterations > 1) rt.begin_step();
                for (v = 0; v < n; ++v) {
                    inputs.clear();
                    for (const node_id u : g.predecessors(v)) inputs.push_back(handle[u]);
                    const std::size_t bytes = static_cast<std::size_t>(g[v].output_bytes);
                    handle[v] = rt.call(
                        [rec, v, bytes](op_context<sim_backend>& ctx) {
                            rec->attempt(v);
                            (void)ctx.output(0, bytes);
                            rec->ran(v);
                        },
                        std::span<const tensor>(inputs),
                        call_options{g[v].compute_cost, {}, static_cast<std::uint64_t>(v) + 1});
                    inputs.clear();
                    for (const node_id u : g.predecessors(v))
                        if (last_use[u] == v) handle[u] = tensor{};
                    if (last_use[v] == n) handle[v] = tensor{};
                }
                out.iteration_costs.push_back(spent() - cost_before);
            }
        } catch (const out_of_memory& e) {
            out.status = "oom";
            out.detail = e.what();
            snapshot();
        } catch (const thrashing& e) {
            out.status = "thrashing";
            out.detail = e.what();
            snapshot();
        }
        inputs.clear();
        handle.clear(); // releases before the runtime goes: their frees are recorded too
        out.stats = rt.stats();
        if (out.status != "ok") out.iteration_costs.push_back(spent() - cost_before);
        out.compute_cost = out.iteration_costs.back();
        auto& log = rec->recording();
        if (out.status == "ok" && !log.inconsistency.empty()) {
            out.status = "inconsistent";
            out.detail = log.inconsistency;
        }
        if (events_before == 0) {
            out.events = std::move(log.events);
        } else { // the last iteration's events alone
            out.events.reserve(log.events.size() - events_before);
            for (std::size_t i = events_before; i < log.events.size(); ++i)
                out.events.push_back(log.events[i]);
        }
    }
    return out;
}

} // namespace dtr::graph
