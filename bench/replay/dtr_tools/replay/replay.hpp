// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Replays a DTR operator log through the real runtime on the simulated backend.
//!
//! There is no second simulator: every CALL, MUTATE, COPY and RELEASE of the log becomes the
//! corresponding dtr::runtime operation on `runtime<sim_backend, H>`, so the figures describe
//! the code users link. The settings follow the published simulator (simrd) for comparable
//! numbers; docs/results.md lists the remaining differences.
#pragma once

#include <dtr/backend/sim.hpp>
#include <dtr/error.hpp>
#include <dtr/runtime.hpp>
#include <dtr_tools/replay/log_reader.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dtr::replay {

//! @brief A whole log in memory, read once and replayed many times.
struct trace {
    std::string source;                 //!< file name as given
    std::vector<record> records;        //!< from ANNOTATE START on
    std::vector<std::string> names;     //!< name_id -> tensor name
    std::vector<std::string> operators; //!< op_id -> operator name
    log_statistics stats;
    //! The first-run compute of each training step the log records (ANNOTATE STEP between
    //! them; a log without one is one step): the baseline of each step.
    std::vector<cost_t> step_compute;
    //! @brief Returns: the training steps the log records (1 without ANNOTATE STEP).
    [[nodiscard]] std::size_t logged_steps() const noexcept {
        return std::max<std::size_t>(step_compute.size(), 1);
    }
};

//! @brief Reads a whole log. @throws dtr::parse_error naming file, line and problem.
inline trace load_trace(const std::filesystem::path& path, log_reader_options options = {}) {
    log_reader reader = log_reader::open(path, options);
    trace t;
    t.source = path.string();
    record r;
    t.step_compute.push_back(0);
    while (reader.next(r)) {
        if (const auto* a = std::get_if<instr::annotate>(&r.op);
            a != nullptr && a->what == annotation::step)
            t.step_compute.push_back(0);
        else if (const auto* c = std::get_if<instr::call>(&r.op))
            t.step_compute.back() += static_cast<cost_t>(c->time_ns);
        else if (const auto* m = std::get_if<instr::mutate>(&r.op))
            t.step_compute.back() += static_cast<cost_t>(m->time_ns);
        t.records.push_back(std::move(r));
    }
    t.names.reserve(reader.name_count());
    for (name_id i = 0; i < reader.name_count(); ++i) t.names.push_back(reader.name(i));
    for (op_id i = 0; i < reader.op_count(); ++i) t.operators.push_back(reader.op_name(i));
    t.stats = reader.stats();
    return t;
}

//! @brief How a replay ended.
enum class status : std::uint8_t {
    ok,     //!< the log ran to the end and its outputs were made resident
    thrash, //!< total compute passed thrash_limit x the baseline compute
    oom,    //!< an operator (or an output at the end) could not fit: nothing evictable left
};

[[nodiscard]] inline const char* to_string(status s) noexcept {
    return s == status::ok ? "ok" : s == status::thrash ? "thrash" : "oom";
}

//! @brief Settings of one replay.
struct replay_options {
    std::size_t budget = unlimited;
    dealloc_policy dealloc = dealloc_policy::eager_evict;
    //! Under keep_resident: kept storages before held ones, or on their scores.
    kept_priority kept = kept_priority::first;
    //! Stop as `thrash` once total compute exceeds this multiple of `baseline_compute`
    //! (0: never). The simulator's limit is 2: recomputation may cost as much as the run.
    double thrash_limit = 2.0;
    cost_t baseline_compute = 0;
    //! Parameter updates (MUTATE of a constant) stay recomputable, as in the simulator.
    constant_update constant_updates = constant_update::rematerializable;
    //! Constants stay resident to the end even when no name refers to them any more (the
    //! simulator pins them); otherwise they are freed once unreferenced and undepended on.
    bool keep_constants = true;
    //! The simulator's pinning by default, so that replays fail where it fails; the
    //! runtime's own default (yield_when_full) goes on where holding every pin runs out.
    restore_pins restore = restore_pins::hold;
    //! 0: the sim backend's endless address space (no fragmentation; the simulator's model).
    //! Otherwise a simulated region (of `arena_capacity` bytes: the budget unless set) laid
    //! out by dtr::arena with this alignment (sim_backend::with_arena), as device memory would
    //! be: allocations can then be refused for want of a contiguous block.
    std::size_t arena_alignment = 0;
    //! Arena replays: the region's bytes; 0 means the budget. A region larger than the budget
    //! measures how much memory must be reserved for the budget's run to survive fragmentation.
    std::size_t arena_capacity = 0;
    //! What the runtime evicts on such a refusal (arena replays only).
    fragmentation_policy fragmentation = fragmentation_policy::window;
    //! Where the region places blocks (arena replays only).
    placement_policy placement = placement_policy::best_fit;
    //! Offload to a simulated host tier (runtime_options::offload); off: the tier is not
    //! even created, so a replay is exactly what it was before offload existed.
    offload_policy offload = offload_policy::off;
    //! The tier's transfer model (bandwidth in bytes/s; latency in ns, the logs' cost unit),
    //! capacity and overlap with compute.
    host_tier_options tier{};
    //! After each operator, hint (runtime::prefetch) the offloaded inputs of the operators
    //! in the next this many records of the log; 0: no look-ahead.
    std::size_t prefetch_lookahead = 0;
    //! Copies out ahead of eviction (runtime_options::offload_ahead; with offload; 0: none).
    std::uint32_t offload_ahead = 0;
    //! The runtime's own prefetch from the forecast (runtime_options::prefetch_ahead; with
    //! offload, from the second step; 0: none).
    std::uint32_t prefetch_ahead = 0;
    //! The share of a copy-back charged for a storage with a host copy
    //! (runtime_options::copy_back_charge).
    double copy_back_charge = 1.0;
    //! Times the log's step runs in a row, as a training loop would: the constants are kept
    //! (each step's CONSTANT is the first step's storage, unchanged), each step ends like the
    //! log (its outputs made resident) and then drops every other name. `baseline_compute`
    //! and `thrash_limit` stay per step. A log that records several steps itself (ANNOTATE
    //! STEP) runs once, its own steps being the steps (each step's baseline is its logged
    //! compute); more than 1 here is refused for it.
    std::size_t steps = 1;
    //! Call runtime::begin_step() before each step (a framework marking its iterations);
    //! false leaves the runtime to find the repetition itself.
    bool mark_steps = true;
    //! runtime_options::steps (whether the runtime learns the step at all).
    step_learning learning = step_learning::automatic;
    //! With steps > 1: thrash_limit applies to each step alone (its compute, recomputation
    //! and transfer waits over baseline_compute), except to the first, which learns the step
    //! and gets this limit instead (0: thrash_limit too).
    double first_step_thrash_limit = 0;
};

//! @brief What one replay measured.
struct replay_result {
    replay::status status = status::ok;
    std::size_t budget = unlimited;
    cost_t compute = 0;         //!< first executions
    cost_t remat = 0;           //!< recomputations
    cost_t forward_compute = 0; //!< first executions before ANNOTATE BACKWARD
    cost_t transfer_stall = 0;  //!< clock time spent waiting for host-tier transfers (offload)
    std::size_t peak_resident = 0;
    counters stats{};
    std::uint64_t backend_refusals = 0; //!< allocate() calls the backend answered with "no block"
    std::size_t region_peak = 0;        //!< arena replays: most bytes of the region in live blocks
    double wall_ms = 0;
    std::string error; //!< the out_of_memory message, for oom
    //! Where a run stopped: the records of the log run through (all of them once the log
    //! has been replayed to its end, also when the run stops while making its outputs
    //! resident), of records_total.
    std::size_t records_done = 0;
    std::size_t records_total = 0;
    //! Compute, recomputation and transfer waits when the last record had run, before the
    //! outputs were made resident (0 when the run stopped inside the log).
    cost_t spent_at_log_end = 0;
    //! Steps run to their end (replay_options::steps), and what each one spent: compute,
    //! recomputation and transfer waits, its outputs made resident included.
    std::size_t steps_done = 0;
    std::vector<cost_t> step_spent;
    //! The baseline of each step begun: the log's compute for a repeated step, the step's own
    //! logged compute for a log that records its steps.
    std::vector<cost_t> step_baseline;
    //! Whether the steps were the log's own (ANNOTATE STEP), not repetitions of it.
    bool logged_steps = false;
    //! Logged steps: computed tensors held where a step begins, turned into constants.
    std::size_t promotions = 0;
    //! @brief Steps 2 and later (the steady state) over their baselines; for a run of one
    //! step, its slowdown. 0 when a run of several steps did not finish its first two.
    //! `baseline` is the baseline of one repeated step (ignored for logged steps).
    [[nodiscard]] double steady_slowdown(cost_t baseline, std::size_t steps) const noexcept {
        if (steps <= 1) return slowdown(baseline);
        if (steps_done < 2) return 0;
        cost_t spent = 0, base = 0;
        for (std::size_t i = 1; i < steps_done; ++i) {
            spent += step_spent[i];
            base += logged_steps ? step_baseline[i] : baseline;
        }
        return base > 0 ? spent / base : 0;
    }
    //! @brief Total compute over the baseline of the steps begun (the published "slowdown"
    //! for one step): `baseline` per repeated step, the log's whole compute for logged steps.
    [[nodiscard]] double slowdown(cost_t baseline) const noexcept {
        const double steps =
            logged_steps ? 1.0 : static_cast<double>(std::max<std::size_t>(step_spent.size(), 1));
        return baseline > 0 ? (compute + remat + transfer_stall) / (baseline * steps) : 0;
    }
    //! @brief Returns: the k-th step's spending over its baseline.
    [[nodiscard]] double step_slowdown(std::size_t k, cost_t baseline) const noexcept {
        const cost_t base = logged_steps ? step_baseline[k] : baseline;
        return base > 0 ? step_spent[k] / base : 0;
    }
};

namespace detail {

// Operators of a replay do no work: they only declare their outputs, from the log.
//! The key of a logged operator for matching steps (call_options::op_key): its name's id,
//! CALL and MUTATE apart.
inline std::uint64_t op_key(op_id op, bool mutation) noexcept {
    return (std::uint64_t{op} << 1 | static_cast<std::uint64_t>(mutation)) + 1;
}

struct logged_call {
    const instr::call* call;
    template <class Ctx>
    void operator()(Ctx& ctx) const {
        for (std::size_t i = 0; i < call->results.size(); ++i) {
            const instr::call_result& r = call->results[i];
            if (r.is_view())
                ctx.alias(i, static_cast<std::size_t>(r.alias));
            else
                ctx.output(i, static_cast<std::size_t>(r.bytes));
        }
    }
};
struct logged_mutation {
    template <class Ctx>
    void operator()(Ctx&) const {}
};

} // namespace detail

//! @brief Replays `t` on `runtime<sim_backend, Heuristic>`.
//!
//! Mapping: CONSTANT -> runtime::constant; CALL -> runtime::call_n with the logged time as
//! the supplied cost (fresh results allocate their MEMORY, views alias their argument);
//! MUTATE -> runtime::mutate under mutation_scope::tensor (only the named argument moves
//! to the new version, as the log's names are values); COPY -> a second tensor on the same
//! storage (runtime::view); COPY_FROM -> the destination's tensor is released, then it
//! becomes a view of the source's; RELEASE -> the handle is dropped (eager eviction). At the
//! end, every tensor still referenced is made resident and pinned, in order of first
//! definition of its names, as the simulator does. With options.steps > 1 the log runs that
//! many times in a row (replay_options::steps); each CALL and MUTATE carries its operator's
//! name as its op_key.
template <class Heuristic>
replay_result run_replay(const trace& t, const replay_options& options,
                         Heuristic heuristic = Heuristic{}) {
    using runtime_type = runtime<sim_backend, Heuristic>;
    const auto start = std::chrono::steady_clock::now();
    replay_result result;
    result.budget = options.budget;
    const std::size_t steps = std::max<std::size_t>(options.steps, 1);
    // The steps of the run: the log's step repeated, or the steps the log records.
    const std::size_t logged = t.logged_steps();
    if (logged > 1 && steps > 1)
        throw logic_error("replay: " + t.source + " records " + std::to_string(logged) +
                          " steps itself (ANNOTATE STEP); it runs once (steps = 1), not " +
                          std::to_string(steps) + " times");
    const std::size_t run_steps = logged > 1 ? logged : steps;
    auto step_base = [&](std::size_t step) -> cost_t {
        return logged > 1 ? t.step_compute[step] : options.baseline_compute;
    };
    // Each step is held to its own limit (the first to its own); the runtime's allowance for
    // recomputation is what all of them allow together, for deep restores.
    const double first_limit = options.first_step_thrash_limit > 0 ? options.first_step_thrash_limit
                                                                   : options.thrash_limit;
    auto step_thrash_at = [&](std::size_t step) -> cost_t {
        return options.thrash_limit > 0
                   ? (step == 0 ? first_limit : options.thrash_limit) * step_base(step)
                   : 0;
    };
    cost_t thrash_at = 0, run_baseline = 0;
    for (std::size_t step = 0; step < run_steps; ++step) {
        thrash_at += step_thrash_at(step);
        run_baseline += step_base(step);
    }
    runtime_options rt_options{.budget = options.budget,
                               .dealloc = options.dealloc,
                               .kept = options.kept,
                               .mutation = mutation_scope::tensor,
                               .constant_updates = options.constant_updates,
                               .restore = options.restore,
                               .fragmentation = options.fragmentation,
                               .placement = options.placement,
                               .offload = options.offload,
                               .offload_ahead = options.offload_ahead,
                               .prefetch_ahead = options.prefetch_ahead,
                               .copy_back_charge = options.copy_back_charge,
                               .steps = options.learning};
    // Thrashing is caught inside a rematerialization too: a deep one can cost without bound.
    // (A thrash limit below 1 leaves no allowance at all: the runtime takes no negative one.)
    if (thrash_at > 0) rt_options.remat_limit = std::max<cost_t>(0, thrash_at - run_baseline);
    sim_backend backend =
        options.arena_alignment == 0
            ? sim_backend{}
            : sim_backend::with_arena(
                  options.arena_capacity != 0 ? options.arena_capacity : options.budget,
                  options.arena_alignment);
    if (options.offload != offload_policy::off) backend.enable_host_tier(options.tier);
    runtime_type rt(rt_options, std::move(backend), std::move(heuristic));
    // Everything the replay's clock has spent: first runs, recomputations, transfer waits.
    auto spent = [&rt] {
        return rt.stats().compute_cost + rt.stats().remat_cost + rt.stats().transfer_stall;
    };
    // The look-ahead: the offloaded inputs of the next operators of the log start home.
    // A name that a COPY or COPY_FROM inside the window defines has no handle yet; the
    // operator that reads it reads its source's storage, so the source is what is
    // prefetched.
    std::vector<std::pair<name_id, name_id>> window_copies; // (copy's name, its source)
    auto prefetch_after = [&](std::size_t at, const std::vector<tensor>& handles) {
        const std::size_t end = std::min(t.records.size(), at + 1 + options.prefetch_lookahead);
        window_copies.clear();
        auto source_of = [&](name_id n) {
            for (auto it = window_copies.rbegin(); it != window_copies.rend(); ++it)
                if (it->first == n) return it->second;
            return n;
        };
        for (std::size_t j = at + 1; j < end; ++j) {
            const auto& op = t.records[j].op;
            if (const auto* c = std::get_if<instr::copy>(&op)) {
                window_copies.emplace_back(c->dst, source_of(c->src));
                continue;
            }
            if (const auto* c = std::get_if<instr::copy_from>(&op)) {
                window_copies.emplace_back(c->dst, source_of(c->src));
                continue;
            }
            const auto* args =
                std::get_if<instr::call>(&op) != nullptr     ? &std::get<instr::call>(op).args
                : std::get_if<instr::mutate>(&op) != nullptr ? &std::get<instr::mutate>(op).args
                                                             : nullptr;
            if (args == nullptr) continue;
            for (name_id arg : *args) {
                const name_id a = source_of(arg);
                if (handles[a].valid() && rt.is_offloaded(handles[a])) rt.prefetch(handles[a]);
            }
        }
    };
    // Each name holds one handle. The simulator's COPY shares one tensor between names and
    // counts references on it; `value_of` and `refs` keep that identity for the outputs.
    std::vector<tensor> handle(t.names.size());
    std::vector<std::uint32_t> value_of(t.names.size(), 0);
    std::vector<std::uint32_t> refs(1, 0); // value 0: none
    // The names ever bound to each value, as lists threaded through `bindings` (a name rebound
    // since stays listed; check value_of): a promotion rebinds every name of its tensor
    // without scanning all names.
    struct binding {
        name_id name;
        std::uint32_t next; // the value's previous binding; 0: none
    };
    std::vector<binding> bindings(1);
    std::vector<std::uint32_t> last_binding(1, 0); // per value
    auto bind = [&](name_id n, std::uint32_t v) {
        value_of[n] = v;
        bindings.push_back({n, last_binding[v]});
        last_binding[v] = static_cast<std::uint32_t>(bindings.size() - 1);
    };
    auto bind_new_value = [&](name_id n) {
        refs.push_back(1);
        last_binding.push_back(0);
        bind(n, static_cast<std::uint32_t>(refs.size() - 1));
    };
    auto bind_shared_value = [&](name_id dst, name_id src) {
        ++refs[value_of[src]];
        bind(dst, value_of[src]);
    };
    auto drop = [&](name_id n) {
        --refs[value_of[n]];
        handle[n].reset();
    };
    std::vector<tensor> args, constants;
    // Steps after the first: the first step's constants, by record (views, so that a MUTATE
    // of a constant's name in one step leaves the next step's constant as it was).
    std::vector<tensor> kept_constant(steps > 1 ? t.records.size() : 0);
    // Logged steps: what the program still holds where a step begins is its training state
    // (gradients, the optimizer's momentum made by a CALL in the first step, ...), which the
    // next step does not recompute: each such computed tensor becomes a constant, as the
    // PyTorch bridge promotes state. Else it would chain back through every earlier step's
    // graph and keep every earlier version of every parameter it was computed from resident
    // (a constant is freed only once nothing computed from it remains). A resident one is
    // promoted where the step begins (its bytes move over); an evicted one where the next
    // step first reads or updates it (it is restored for that anyway), and not at all when
    // the step only releases it (gradients under zero_grad).
    std::vector<bool> carried(logged > 1 ? t.names.size() : 0, false);
    auto promote = [&](name_id n) {
        std::size_t bytes = 0;
        {
            const auto guard = rt.pin(handle[n]);
            bytes = guard.data().size();
        }
        rt.drop(handle[n]); // the bytes move over to the constant
        const tensor c = rt.constant(bytes);
        const std::uint32_t v = value_of[n]; // every name of the tensor (COPY) follows
        for (std::uint32_t b = last_binding[v]; b != 0; b = bindings[b].next)
            if (const name_id m = bindings[b].name; value_of[m] == v && handle[m].valid()) {
                handle[m] = rt.view(c);
                if (!carried.empty()) carried[m] = false;
            }
        ++result.promotions;
    };
    auto promote_carried = [&](const std::vector<name_id>& names) {
        for (name_id n : names)
            if (carried[n]) {
                carried[n] = false;
                if (handle[n].valid() && rt.is_rematerializable(handle[n])) promote(n);
            }
    };
    bool backward = false;
    std::size_t at = 0;
    cost_t step_start = 0;
    std::size_t current = 0; // the step running: `step` repeated, or the log's own
    result.records_total = t.records.size();
    result.logged_steps = logged > 1;
    try {
        for (std::size_t step = 0; step < steps && result.status == status::ok; ++step) {
            current = step;
            if (options.mark_steps && run_steps > 1) rt.begin_step();
            step_start = spent();
            result.step_spent.push_back(0);
            result.step_baseline.push_back(step_base(current));
            if (step > 0) { // the previous step's names are gone; values start afresh
                std::fill(value_of.begin(), value_of.end(), 0U);
                refs.assign(1, 0);
                bindings.resize(1);
                last_binding.assign(1, 0);
            }
            for (at = 0; at < t.records.size(); ++at) {
                const record& rec = t.records[at];
                switch (rec.op.index()) {
                    case 0: { // annotate
                        const annotation what = std::get<instr::annotate>(rec.op).what;
                        if (what == annotation::backward && !backward) {
                            backward = true;
                            result.forward_compute = rt.stats().compute_cost;
                        }
                        if (what == annotation::step) { // the log's next step begins
                            for (name_id n = 0; n < handle.size(); ++n) {
                                carried[n] = handle[n].valid() && rt.is_rematerializable(handle[n]);
                                if (carried[n] && rt.is_resident(handle[n])) promote(n);
                            }
                            result.step_spent.back() = spent() - step_start;
                            ++result.steps_done;
                            ++current;
                            if (options.mark_steps) rt.begin_step();
                            step_start = spent();
                            result.step_spent.push_back(0);
                            result.step_baseline.push_back(step_base(current));
                        }
                        break;
                    }
                    case 1: { // constant
                        const auto& c = std::get<instr::constant>(rec.op);
                        if (step == 0) {
                            handle[c.name] = rt.constant(static_cast<std::size_t>(c.bytes));
                            if (options.keep_constants) constants.push_back(handle[c.name]);
                            if (steps > 1) kept_constant[at] = rt.view(handle[c.name]);
                        } else {
                            handle[c.name] = rt.view(kept_constant[at]);
                        }
                        bind_new_value(c.name);
                        break;
                    }
                    case 2: { // call
                        const auto& c = std::get<instr::call>(rec.op);
                        if (!carried.empty()) promote_carried(c.args);
                        args.clear();
                        for (name_id a : c.args) args.push_back(handle[a]);
                        auto outs = rt.call_n(c.results.size(), detail::logged_call{&c}, args,
                                              {.cost = static_cast<cost_t>(c.time_ns),
                                               .op_key = detail::op_key(c.op, false)});
                        for (std::size_t i = 0; i < outs.size(); ++i) {
                            handle[c.results[i].name] = std::move(outs[i]);
                            bind_new_value(c.results[i].name);
                        }
                        break;
                    }
                    case 3: { // mutate
                        const auto& m = std::get<instr::mutate>(rec.op);
                        if (!carried.empty()) promote_carried(m.args);
                        args.clear();
                        for (name_id a : m.args) args.push_back(handle[a]);
                        rt.call_n(0, detail::logged_mutation{}, args,
                                  {.cost = static_cast<cost_t>(m.time_ns),
                                   .mutates = m.mutated,
                                   .op_key = detail::op_key(m.op, true)});
                        args.clear(); // the old versions' last handles may be these copies
                        for (std::uint32_t k : m.mutated) {
                            const name_id n = m.args[k];
                            --refs[value_of[n]];
                            bind_new_value(n);
                        }
                        break;
                    }
                    case 4: { // copy
                        const auto& c = std::get<instr::copy>(rec.op);
                        handle[c.dst] = rt.view(handle[c.src]);
                        bind_shared_value(c.dst, c.src);
                        break;
                    }
                    case 5: { // copy_from
                        const auto& c = std::get<instr::copy_from>(rec.op);
                        drop(c.dst);
                        handle[c.dst] = rt.view(handle[c.src]);
                        bind_shared_value(c.dst, c.src);
                        break;
                    }
                    case 6: { // release
                        drop(std::get<instr::release>(rec.op).name);
                        break;
                    }
                    default:
                        break;
                }
                if (options.prefetch_lookahead > 0 && (rec.op.index() == 2 || rec.op.index() == 3))
                    prefetch_after(at, handle);
                if (thrash_at > 0 && spent() - step_start > step_thrash_at(current)) {
                    result.status = status::thrash;
                    break;
                }
            }
            if (result.status != status::ok) break;
            result.spent_at_log_end = spent();
            {
                // Outputs: every value still referenced, in order of its names' first
                // definition.
                std::vector<const tensor*> representative(refs.size(), nullptr);
                for (name_id n = 0; n < handle.size(); ++n)
                    if (handle[n].valid() && representative[value_of[n]] == nullptr)
                        representative[value_of[n]] = &handle[n];
                std::vector<typename runtime_type::read_guard> outputs;
                std::vector<bool> pinned(refs.size(), false);
                for (name_id n = 0; n < handle.size(); ++n) {
                    const std::uint32_t v = value_of[n];
                    if (v == 0 || refs[v] == 0 || pinned[v] || representative[v] == nullptr)
                        continue;
                    pinned[v] = true;
                    outputs.push_back(rt.pin(*representative[v]));
                }
            }
            if (thrash_at > 0 && spent() - step_start > step_thrash_at(current))
                result.status = status::thrash;
            if (step + 1 < steps) // the training loop consumed the outputs
                for (tensor& n : handle) n.reset();
            result.step_spent.back() = spent() - step_start;
            if (result.status == status::ok) ++result.steps_done;
        }
    } catch (const out_of_memory& e) {
        result.status = status::oom;
        result.error = e.what();
    } catch (const thrashing&) {
        result.status = status::thrash;
    }
    if (result.status != status::ok && !result.step_spent.empty())
        result.step_spent.back() = spent() - step_start;
    if (!backward) result.forward_compute = rt.stats().compute_cost;
    result.records_done = at;
    result.compute = rt.stats().compute_cost;
    result.remat = rt.stats().remat_cost;
    result.transfer_stall = rt.stats().transfer_stall;
    result.peak_resident = rt.stats().peak_resident_bytes;
    result.stats = rt.stats();
    result.backend_refusals = rt.backend().refusals();
    if (const std::optional<memory_report> m = rt.backend().memory_info())
        result.region_peak = m->peak_used;
    args.clear();
    handle.clear();
    constants.clear();
    result.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
}

} // namespace dtr::replay
