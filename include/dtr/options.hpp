// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Vocabulary types shared by the runtime, backends and heuristics: cost, policies,
//! runtime and per-call options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace dtr {

//! @brief Compute cost of an operator in nanoseconds. A double, because supplied costs
//! (profiles, logs, static graphs) need not be integral; sums of integral costs stay exact
//! up to 2^53 ns (about 104 days).
using cost_t = double;

//! @brief Budget meaning "no limit": an unconstrained reference run.
inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

//! @brief What happens to a storage when the framework drops its last handle.
enum class dealloc_policy : std::uint8_t {
    //! Evict it now; its metadata and recipe stay so that dependents that still have
    //! handles can be rematerialized from it. Freed for good when no dependent is left.
    eager_evict,
    //! Free it for good as soon as that is safe (every dependent resident); dependents then
    //! lose their recipe and can no longer be evicted. Less metadata, fewer eviction choices.
    banish,
    //! Leave it resident and evictable: the policy, not the release, decides when it goes
    //! (policies see a storage without a handle, and once evicted one nobody holds). Freed for good
    //! when no dependent is left, like eager_evict. For released values that recomputations
    //! are likely to read again, which cost more to recompute than to keep (a dense block's
    //! feature maps, docs/design.md "Release"); under a budget that never binds it only adds
    //! resident bytes. May be switched with eager_evict at run time (runtime::set_dealloc).
    keep_resident,
    //! eager_evict until the budget first makes the runtime choose a victim, keep_resident
    //! from then on: what keeping buys under a budget that binds, without the resident bytes
    //! it adds under one that never does (the peak of an unbudgeted run is eager_evict's).
    keep_once_bound,
};

//! @brief While released storages are kept (dealloc_policy::keep_resident, and
//! keep_once_bound once the budget has bound), how a kept storage (resident, without
//! handles) stands against the storages the program still holds when a victim is chosen.
enum class kept_priority : std::uint8_t {
    //! Kept storages go first: a held storage is chosen only when none is kept. The policy
    //! orders the kept ones among themselves. Keeping then fills memory the program does
    //! not need and never displaces a value it holds: on the paper's logs it finishes more
    //! runs than eager eviction at most budgets of 0.3 and below, where `scored` finishes
    //! fewer everywhere (docs/results.md, "Keeping released storages"). Applies to the
    //! runtime's own scan (policies that score); a policy or search strategy with its own
    //! choose (search::indexed, search::sampled, random) is given the whole pool and decides
    //! alone, as under `scored`; so is a policy that reads the step forecast
    //! (dtr::reads_forecast, dtr_next_use) while there is one: it knows when a restore will
    //! read a kept storage.
    first,
    //! Kept storages compete with held ones on the policy's score alone. Better where the
    //! kept values are the ones recomputations read most (the PyTorch bridge's park_released
    //! on DenseNet, forward only).
    scored,
};

//! @brief Which handles observe an in-place update (see docs/design.md, "Mutation").
enum class mutation_scope : std::uint8_t {
    //! Every tensor on the mutated storage moves to the new version, as views do in
    //! PyTorch and NumPy: a write through one view is seen through all of them.
    storage,
    //! Only the tensors passed as mutated inputs move; other views keep the old version
    //! (the semantics of the DTR simulator's logs, where each name is a separate value).
    tensor,
};

//! @brief Where an in-place update (runtime::mutate) writes the new version of a computed
//! storage (see docs/design.md, "Mutation").
enum class in_place_writes : std::uint8_t {
    //! Into a copy of the old version (copy-on-write): the old version stays resident until
    //! released or evicted. The DTR simulator's model, for replays of its logs.
    copy,
    //! On a call's first run (recomputations copy), into the old version's own block when
    //! nothing else can want the old bytes resident at that moment: the old version has a
    //! recipe, mutation_scope::storage moves all its handles to the new version, and nothing
    //! but the call itself pins it. The old version is then evicted as the operator starts
    //! (its recipe recomputes it if something later reads it; if the operator fails, it
    //! stays evicted). Saves the copy and a block of the storage's size during the call:
    //! what a framework's `relu_` after a batch norm needs. Otherwise, and for constants, as
    //! `copy`.
    reuse_when_unshared,
};

//! @brief What an in-place update of a constant (a parameter) produces.
enum class constant_update : std::uint8_t {
    //! A new constant: never evicted, and the old version is freed once nothing computed
    //! from it remains. Right for training loops, where each step updates the parameters.
    constant,
    //! A storage recomputable from the old version (which then stays resident while the
    //! new one lives): what the DTR simulator does, for faithful replays of its logs.
    rematerializable,
};

//! @brief What the runtime evicts when the budget allows an allocation but the backend has
//! no free block large enough (fragmentation). Only backends that describe their region
//! (dtr::reports_layout: the arena backends) can honour `window`; on any other backend, and
//! on a sim_backend without an arena, the runtime always evicts one by one.
enum class fragmentation_policy : std::uint8_t {
    //! Evict the adjacent blocks whose eviction frees a large enough block at the lowest
    //! total heuristic score (dtr::cheapest_window), then allocate there.
    window,
    //! Evict in heuristic order, retrying after each eviction, until a block appears.
    one_by_one,
};

//! @brief Where an arena backend places blocks, on backends that take a placement
//! (`allocate(bytes, arena::placement)`: the arena backends); others ignore it.
enum class placement_policy : std::uint8_t {
    //! Every block best-fit, at the low end of the smallest hole that holds it.
    best_fit,
    //! Constants (never evicted: walls for fragmentation-aware eviction) from the top of the
    //! region, everything else best-fit, so that constants created late do not land between
    //! evictable storages.
    constants_high,
};

//! @brief Whether a rematerialization may take back the pins of the operators waiting on it
//! (see docs/design.md, "Rematerialization").
enum class restore_pins : std::uint8_t {
    //! Each operator being restored pins its resident inputs first, then restores the
    //! evicted ones (the published simulator's order), and when an allocation finds nothing
    //! evictable, the operators lower on the restore stack give their pins up and
    //! re-validate (restoring what they lost) when they resume. Where memory suffices this
    //! makes exactly the choices of `hold`; where `hold` runs out of memory with most of the
    //! budget pinned by a deep or wide restore, this goes on.
    yield_when_full,
    //! Every operator on the restore stack keeps its inputs pinned until it runs: the DTR
    //! simulator, for replays that fail where it fails.
    hold,
    //! yield_when_full, and before a restore recomputes anything the runtime walks the
    //! evicted ancestors it is going to recompute and counts how often their recipes read
    //! each of them. A storage the restore recomputed is held resident (not evictable) until
    //! the last of those reads, so that one restore recomputes each storage once where
    //! memory allows, instead of evicting what a later frame of the same restore will read;
    //! when an allocation finds nothing else to evict, every hold is let go before any frame
    //! yields its pins. Not the default: it gains little on the paper's logs and loses on
    //! some planner graphs (docs/results.md, "Planned restores").
    planned,
};

//! @brief Whether a victim may be copied out to a second memory tier (host memory) instead of
//! dropped, on backends with one (dtr::offloading_backend; see <dtr/offload.hpp> and
//! docs/design.md, "Offload"). Anything but `off` needs a backend with a host tier: the
//! runtime's constructor throws dtr::logic_error for a backend type without the capability
//! or an instance without a tier, rather than never offloading without a word.
enum class offload_policy : std::uint8_t {
    //! Never: victims are dropped and recomputed (DTR as published; the default).
    off,
    //! Per victim, copy it out when getting it back by transfer is cheaper than recomputing
    //! it (dtr::offload_decision) and the tier has room; constants may leave the device
    //! when nothing evictable is left.
    automatic,
    //! Every victim the tier has room for is copied out (tests, and the upper bound of the
    //! transfer side); constants as under `automatic`.
    always,
};

//! @brief Whether the runtime learns the program's repeating step and tells the policy when
//! each storage is read next (docs/design.md, "Steps").
enum class step_learning : std::uint8_t {
    //! Steps come from runtime::begin_step() when the program calls it; until it does, the
    //! runtime looks for a repeating sequence of operators itself (operator key, input and
    //! output sizes, which earlier outputs each operator reads). The default.
    automatic,
    //! Only runtime::begin_step() marks steps; no detection.
    marks_only,
    //! Nothing is recorded: no forecast, no cost per call.
    off,
};

//! @brief What a call that repeats the recorded step records as its cost, where the backend
//! measures it (call_options::cost left empty; not for dtr::deferred_costs backends, whose
//! measurements arrive later).
enum class repeat_cost : std::uint8_t {
    //! The lowest cost measured at its place in the step so far, this run's included. Timing
    //! noise only ever adds to an operator's time, so the lowest measurement is its steadiest
    //! estimate; and with the same costs from step to step, the policy's scores and the clock
    //! it dates storages by repeat too, so the same program takes the same victims in every
    //! step instead of victims redrawn by noise near a tight budget. Calls are the same
    //! operator by call_options::op_key (default: the callable's type): a program that runs
    //! differently priced operators through one callable type passes op_key (or chooses
    //! `measured`), or the step tracker takes them for one operator. The default.
    lowest,
    //! This run's measurement, as for a call outside any recorded step.
    measured,
};

//! @brief Construction-time settings of a runtime.
struct runtime_options {
    //! Hard limit on resident bytes (sum of the sizes of resident storages, plus buffers of
    //! the operator being run). Never exceeded.
    std::size_t budget = unlimited;
    //! What a storage's release does. The default keeps released storages once the budget
    //! binds, with kept_priority::first: on the paper's logs it finishes 7 of 8 at 0.3 and 5
    //! of 8 at 0.15 under dtr_eqclass (the default policy's online scores) where
    //! eager_evict finishes 6 and 1 (docs/heuristics.md, "The default release"), and an
    //! unbudgeted run's peak is eager_evict's.
    dealloc_policy dealloc = dealloc_policy::keep_once_bound;
    //! Under keep_resident and keep_once_bound: whether kept storages are evicted before
    //! held ones.
    kept_priority kept = kept_priority::first;
    mutation_scope mutation = mutation_scope::storage;
    constant_update constant_updates = constant_update::constant;
    //! Total rematerialization cost (ns) after which the runtime gives up with
    //! dtr::thrashing instead of recomputing on: a budget too tight for the program makes
    //! recomputation grow without bound. Default: no limit. A number >= 0 (the constructor
    //! throws dtr::logic_error otherwise, as set_remat_limit does).
    cost_t remat_limit = std::numeric_limits<cost_t>::infinity();
    //! Whether a deep restore may take back the pins of the operators waiting on it.
    restore_pins restore = restore_pins::yield_when_full;
    //! What to evict when the backend refuses an allocation the budget allows.
    fragmentation_policy fragmentation = fragmentation_policy::window;
    //! Where an arena backend places blocks.
    placement_policy placement = placement_policy::best_fit;
    //! Whether victims may be offloaded to the backend's host tier instead of dropped.
    offload_policy offload = offload_policy::off;
    //! Under offload: copies out ahead of eviction (0: none). After each first run, once
    //! resident bytes exceed half the budget and while the copy stream is idle, a storage
    //! that has outlived this many newer ones and is worth offloading (its copy-back,
    //! charged by copy_back_charge, cheaper than recomputing it; any, under `always`) gets
    //! a host copy, overlapping compute. Evicting it later needs no out-copy, so nothing
    //! waits for one. Needs a backend modelling dtr::copying_ahead_backend (the
    //! constructor throws dtr::logic_error otherwise).
    std::uint32_t offload_ahead = 0;
    //! Under offload, while the program follows a recorded step (runtime_options::steps): after
    //! each call, what the next `prefetch_ahead` calls of the step will wait for starts home,
    //! soonest read first, as runtime::prefetch hints would (room made only from kept
    //! storages, never from what the program holds; the first without room ends the batch
    //! and waits for the next call, or for its read): the offloaded storages they read, and
    //! the offloaded inputs of the recomputations they will run (ancestors of the dropped
    //! storages they read). The program gives no hints: the forecast knows its reads. 0: off
    //! (the default). Upkeep: two maps, of the offloaded and of the dropped storages with a
    //! forecast read, by that read (O(log n) as one leaves or comes back), and after each
    //! call two lookups, a walk of at most 128 recipe inputs and at most 16 prefetches
    //! (docs/design.md, "Offload").
    //! Needs a backend with a host tier (dtr::offloading_backend; the constructor throws
    //! dtr::logic_error otherwise).
    std::uint32_t prefetch_ahead = 0;
    //! Under offload_policy::automatic: the share of a copy-back's transfer time charged
    //! against recomputation for a storage that already has a host copy (a victim copied
    //! ahead of eviction, or copied back before): whether it leaves by transfer
    //! (dtr::offload_decision), its score factor, and whether a storage is worth copying
    //! ahead. 1, the default, charges the copy-back in full, as the wait of a read that
    //! finds its storage on the host. A program that prefetches what it will read
    //! (runtime::prefetch) hides much of that wait on the copy stream: on the paper's logs
    //! with a 128-record look-ahead, 0.5 measured best (flat from 0.4 to 0.6); without
    //! prefetch, 0.5 was about 1% slower than 1 (docs/results.md, "Offload"). A victim
    //! without a copy is charged its out-copy and copy-back in full whatever this is: the
    //! out-copy holds the block an allocation is waiting for. Finite and > 0.
    double copy_back_charge = 1.0;
    //! Under offload: whether constants (the storages runtime::constant made, and the
    //! versions mutations made of them) may leave the device when nothing evictable is left.
    //! The other storages without a recipe, children of banished storages, are computed into
    //! the runtime's own blocks and may always leave (runtime::offload_allowed). A framework
    //! whose constants share their memory with objects outside the runtime (the PyTorch
    //! bridge adopts parameters' own storages, which the framework keeps and writes) turns it
    //! off: freeing the runtime's block would not free that memory, and the copy brought back
    //! would not be the framework's.
    //! Constants only the runtime holds can still be let go one by one with
    //! runtime::allow_offload.
    bool offload_constants = true;
    //! Where in-place updates of computed storages write their new version.
    in_place_writes in_place = in_place_writes::copy;
    //! Whether the runtime learns the program's step (step_learning).
    step_learning steps = step_learning::automatic;
    //! The longest step the runtime records, in events (calls, and pins outside calls): a
    //! longer step gets no forecast. Bounds the recording's memory: at most 2 x step_limit
    //! recent events (56 bytes each, plus 8 per input and output) and a step of at most
    //! step_limit events (40 bytes each, plus 8 per input and output): 224 bytes for an event
    //! with two inputs and one output, 14 MiB at the default limit, held only as the program
    //! runs that many calls; and a period's insertions (events the step does not have, skipped
    //! over: at most 8 + length / 4, 24 bytes each).
    std::uint32_t step_limit = 1U << 16;
    //! The cost a call that follows the recorded step records, where the backend measures it
    //! (repeat_cost).
    repeat_cost repeat_costs = repeat_cost::lowest;
    //! Whether the forecast is withheld from the steps after one where it cost more
    //! recomputation (per unit of compute) than the last step run on the policy's online
    //! scores (docs/design.md, "The forecast guard"). After such a loss the steps run online
    //! until one of them costs more than the forecast's last step, or for 2, 4, ... up to 64
    //! steps (longer after a large loss: a try losing as much again costs at most 3% over
    //! the steps before it), then the forecast is tried again. Off: every followed call gets
    //! the forecast.
    bool guard_forecast = true;
    //! Whether the forecast guard also charges each step the runtime's own victim search time
    //! (counters::victim_search_ns), beside its recomputation, so that a policy whose scores
    //! are dear with the forecast (its walks) is withheld where that costs more than the
    //! recomputation it saves. The cost unit must then be nanoseconds: for costs measured on
    //! the host's clock (the PyTorch bridge, whose Runtime turns it on unless its costs are
    //! deterministic). Off by default: with supplied costs (replays, simulations, tests) the
    //! guard's decisions stay the same from run to run.
    bool guard_charges_search = false;
};

//! @brief Per-call settings of runtime::call.
struct call_options {
    //! Cost to record for the operator (deterministic mode: replay, simulation, reproducible
    //! tests). When empty, the backend measures the operator on its clock.
    std::optional<cost_t> cost{};
    //! Indices of inputs the operator updates in place. Each such input's storage gets a new
    //! version (copy-on-write) that the operator writes through op_context::inout().
    std::vector<std::uint32_t> mutates{};
    //! What operator this is, for matching steps (runtime::begin_step, step_learning): two
    //! calls are the same operator when their keys are equal. 0: the type of the callable,
    //! which tells lambdas apart but not one callable type running several operators (a
    //! framework bridge dispatching every operator through one functor should pass a hash of
    //! the operator's name).
    std::uint64_t op_key = 0;
};

} // namespace dtr
