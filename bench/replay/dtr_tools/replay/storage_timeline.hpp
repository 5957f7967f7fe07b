// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief One step of an operator log as the budget sees it: the storages (a view shares its
//! base's), the operators that read and compute them, and what the step leaves referenced.
//! The input of the rematerialization lower bound (lower_bound.hpp).
//!
//! The storages follow run_replay's mapping of the log onto the runtime, under the
//! simulator's rules for a one-step log: a CONSTANT is resident from its line to the end; a
//! CALL result with ALIAS -1 is a fresh storage computed by that call, a view (ALIAS >= 0)
//! names its argument's storage; a MUTATE computes, for each mutated argument, a fresh
//! storage the size of the old one (its name moves to it, other names keep the old version);
//! COPY and COPY_FROM bind a name to the source's storage; RELEASE unbinds. An operator reads
//! the storages of all its arguments. The storages still named at the end are the step's
//! outputs, which run_replay makes resident together.
#pragma once

#include <dtr/error.hpp>
#include <dtr/options.hpp>
#include <dtr_tools/replay/replay.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

namespace dtr::replay {

//! @brief A one-step log as storages and operators; see the file comment.
struct storage_timeline {
    static constexpr std::uint32_t no_op = std::numeric_limits<std::uint32_t>::max();

    struct storage {
        std::uint64_t bytes = 0;
        bool constant = false;
        //! The operator that computes it; for a constant, the first operator it is resident
        //! at (ops.size() when it appears after the last one).
        std::uint32_t made_at = no_op;
        //! The operators that read it, ascending and distinct; an output also has ops.size(),
        //! the end of the step, where it must be resident.
        std::vector<std::uint32_t> reads;
    };
    struct op {
        cost_t time = 0;
        std::vector<std::uint32_t> reads;    //!< distinct storages of its arguments
        std::vector<std::uint32_t> computes; //!< the fresh storages it computes
        std::size_t line = 0;                //!< of its CALL or MUTATE line
    };

    std::vector<storage> storages;
    std::vector<op> ops;                //!< CALL and MUTATE records, in log order
    std::vector<std::uint32_t> outputs; //!< computed storages still named at the end
    cost_t compute = 0;                 //!< the step's logged time: the sum over ops

    //! @brief Bytes of constants resident at each operator, and at the end (index ops.size()).
    [[nodiscard]] std::vector<std::uint64_t> constant_bytes() const {
        std::vector<std::uint64_t> at(ops.size() + 1, 0);
        for (const storage& s : storages)
            if (s.constant) at[s.made_at] += s.bytes;
        for (std::size_t k = 1; k < at.size(); ++k) at[k] += at[k - 1];
        return at;
    }

    //! @brief Bytes each operator needs resident besides the constants (what it reads and
    //! computes), and at the end the outputs (index ops.size()).
    [[nodiscard]] std::vector<std::uint64_t> operator_bytes() const {
        std::vector<std::uint64_t> at(ops.size() + 1, 0);
        for (std::size_t k = 0; k < ops.size(); ++k) {
            for (std::uint32_t s : ops[k].reads)
                if (!storages[s].constant) at[k] += storages[s].bytes;
            for (std::uint32_t s : ops[k].computes) at[k] += storages[s].bytes;
        }
        for (std::uint32_t s : outputs) at[ops.size()] += storages[s].bytes;
        return at;
    }

    //! @brief What must be resident at each operator, and at the end: the constants and the
    //! operator's own bytes (constant_bytes() + operator_bytes()).
    [[nodiscard]] std::vector<std::uint64_t> required_bytes() const {
        std::vector<std::uint64_t> at = constant_bytes();
        const std::vector<std::uint64_t> own = operator_bytes();
        for (std::size_t k = 0; k < at.size(); ++k) at[k] += own[k];
        return at;
    }
};

//! @brief The storage timeline of a one-step log.
//! @throws dtr::logic_error for a log that records several training steps (ANNOTATE STEP):
//! its constants replay as a training loop's, which this model does not describe.
[[nodiscard]] inline storage_timeline timeline_of(const trace& t) {
    DTR_EXPECTS(t.logged_steps() == 1,
                t.source + " records " + std::to_string(t.logged_steps()) +
                    " training steps (ANNOTATE STEP); the storage timeline describes one-step "
                    "logs, whose constants stay resident");
    storage_timeline tl;
    constexpr std::uint32_t unbound = storage_timeline::no_op;
    std::vector<std::uint32_t> storage_of(t.names.size(), unbound);
    auto fresh = [&](std::uint64_t bytes, bool constant, std::uint32_t made_at) {
        tl.storages.push_back(
            {.bytes = bytes, .constant = constant, .made_at = made_at, .reads = {}});
        return static_cast<std::uint32_t>(tl.storages.size() - 1);
    };
    auto bound = [&](name_id n, std::size_t line) {
        DTR_EXPECTS(n < storage_of.size() && storage_of[n] != unbound,
                    t.source + ":" + std::to_string(line) + ": name " +
                        (n < t.names.size() ? t.names[n] : std::to_string(n)) + " is not bound");
        return storage_of[n];
    };
    // The storages an operator reads: distinct, each read once.
    auto reads_of = [&](const std::vector<name_id>& args, std::size_t line) {
        std::vector<std::uint32_t> reads;
        for (name_id a : args) reads.push_back(bound(a, line));
        std::sort(reads.begin(), reads.end());
        reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
        return reads;
    };
    for (const record& r : t.records) {
        const auto k = static_cast<std::uint32_t>(tl.ops.size());
        if (const auto* c = std::get_if<instr::constant>(&r.op)) {
            storage_of[c->name] = fresh(c->bytes, true, k);
        } else if (const auto* c = std::get_if<instr::call>(&r.op)) {
            storage_timeline::op op{.time = static_cast<cost_t>(c->time_ns),
                                    .reads = reads_of(c->args, r.line),
                                    .computes = {},
                                    .line = r.line};
            std::vector<std::uint32_t> arg_storage;
            for (name_id a : c->args) arg_storage.push_back(storage_of[a]);
            for (const instr::call_result& res : c->results) {
                if (res.is_view()) {
                    storage_of[res.name] = arg_storage[static_cast<std::size_t>(res.alias)];
                } else {
                    storage_of[res.name] = fresh(res.bytes, false, k);
                    op.computes.push_back(storage_of[res.name]);
                }
            }
            tl.ops.push_back(std::move(op));
        } else if (const auto* m = std::get_if<instr::mutate>(&r.op)) {
            storage_timeline::op op{.time = static_cast<cost_t>(m->time_ns),
                                    .reads = reads_of(m->args, r.line),
                                    .computes = {},
                                    .line = r.line};
            for (std::uint32_t i : m->mutated) {
                const name_id n = m->args[i];
                storage_of[n] = fresh(tl.storages[storage_of[n]].bytes, false, k);
                op.computes.push_back(storage_of[n]);
            }
            tl.ops.push_back(std::move(op));
        } else if (const auto* c = std::get_if<instr::copy>(&r.op)) {
            storage_of[c->dst] = bound(c->src, r.line);
        } else if (const auto* c = std::get_if<instr::copy_from>(&r.op)) {
            storage_of[c->dst] = bound(c->src, r.line);
        } else if (const auto* rel = std::get_if<instr::release>(&r.op)) {
            if (rel->name < storage_of.size()) storage_of[rel->name] = unbound;
        }
    }
    const auto end = static_cast<std::uint32_t>(tl.ops.size());
    for (std::uint32_t k = 0; k < end; ++k) {
        tl.compute += tl.ops[k].time;
        for (std::uint32_t s : tl.ops[k].reads) tl.storages[s].reads.push_back(k);
    }
    std::vector<bool> is_output(tl.storages.size(), false);
    for (std::uint32_t s : storage_of)
        if (s != unbound && !tl.storages[s].constant && !is_output[s]) {
            is_output[s] = true;
            tl.outputs.push_back(s);
            tl.storages[s].reads.push_back(end);
        }
    return tl;
}

} // namespace dtr::replay
