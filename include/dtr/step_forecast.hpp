// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief dtr::step_forecast: when the program will next read each storage, while it follows
//! a step the runtime has recorded (docs/design.md, "Steps").
#pragma once

#include <dtr/options.hpp>

#include <cstddef>
#include <cstdint>

namespace dtr {

namespace detail {
template <class, class, class>
class step_tracker;
} // namespace detail

//! @brief Where the runtime stands with the program's steps (runtime::step_state()).
struct step_status {
    bool following = false;       //!< the program is following a recorded step now
    std::uint32_t length = 0;     //!< calls in the recorded step (0: none recorded)
    std::uint32_t position = 0;   //!< calls of it run since it last began
    std::size_t history = 0;      //!< recent calls held for learning
    std::size_t memory_bytes = 0; //!< bytes the recording holds (history and step)
};

//! @brief The future of the program as the runtime's step tracker knows it: a policy reads
//! it through heuristic_context::forecast, which is null whenever there is none (no step
//! recorded yet, or the program has just left the recorded step).
//!
//! Time is program time: the recorded step's first-run costs summed from the call running
//! now (recomputations excluded), in the clock's unit (ns). So it orders storages exactly as
//! the program's calls will read them, and weighs distances as staleness would.
class step_forecast {
public:
    //! @brief Returns: the program time from now until the program next reads `s` (an
    //! operator input), 0 when the call running now reads it; a storage not read again in the
    //! rest of this step nor, as far as the tracker has seen, early in the next one, is given
    //! the rest of this step plus a whole step. Negative when the forecast knows nothing of
    //! `s` (made or last read before the step was learned).
    //! Complexity: O(1).
    template <class Storage>
    [[nodiscard]] double time_to_next_use(const Storage& s) const noexcept {
        return time_to(s.next_use());
    }
    //! @brief As time_to_next_use, but only for a read still to come: negative for a storage
    //! not read in the known future ("beyond") as for one without a forecast.
    template <class Storage>
    [[nodiscard]] double time_to_next_read(const Storage& s) const noexcept {
        const std::uint64_t stamp = s.next_use();
        return (stamp & beyond_bit) != 0 ? -1 : time_to(stamp);
    }

    //! @brief As time_to_next_use, from a storage's next_use() stamp.
    [[nodiscard]] double time_to(std::uint64_t stamp) const noexcept {
        if (stamp == 0 || (stamp >> epoch_shift) != epoch_) return -1;
        const std::uint64_t pos = now_ - base_;
        const double now = prefix_[pos];
        const double step = prefix_[length_];
        if ((stamp & beyond_bit) != 0) return step - now + step;
        const std::uint64_t at = stamp & position_mask;
        if (at < now_) return -1; // a read that did not come: the stamp is from an older step
        const std::uint64_t rel = at - base_;
        if (rel >= 2 * static_cast<std::uint64_t>(length_)) return step - now + step;
        const double then = rel < length_ ? prefix_[rel] : step + prefix_[rel - length_];
        return then - now;
    }

    //! @brief Returns: the recorded step's length in calls.
    [[nodiscard]] std::uint32_t length() const noexcept { return length_; }
    //! @brief Returns: the position in the step of the call running now (or of the next one
    //! between calls), in [0, length()].
    [[nodiscard]] std::uint32_t position() const noexcept {
        return static_cast<std::uint32_t>(now_ - base_);
    }
    //! @brief Returns: the recorded step's program time (its first-run costs summed).
    [[nodiscard]] cost_t step_time() const noexcept { return prefix_[length_]; }

    //! @brief Returns: the stamp a storage read by the call `calls` calls after the one
    //! running now (or next, between calls) would have. Stamps of reads are ordered as the
    //! reads under one recording, so the storages read within the next k calls are those
    //! whose next_use() lies in [read_stamp(0), read_stamp(k)] (a runtime::prefetch by the
    //! forecast, runtime_options::prefetch_ahead).
    [[nodiscard]] std::uint64_t read_stamp(std::uint32_t calls) const noexcept {
        return stamp_at(now_ + calls);
    }
    //! @brief Returns: whether `stamp` (a storage's next_use()) names a read to come, as
    //! opposed to none known (0) or none in the known future.
    [[nodiscard]] static bool is_read(std::uint64_t stamp) noexcept {
        return stamp != 0 && (stamp & beyond_bit) == 0;
    }

private:
    template <class, class, class>
    friend class detail::step_tracker;

    // A stamp: the epoch of the recording it was made under (bits 41-63), "not read in the
    // known future" (bit 40), the number of the call that reads it next on the step's clock
    // (bits 0-39). Stamps of an older recording are ignored, so nothing has to be cleared
    // when the program leaves a step.
    static constexpr int epoch_shift = 41;
    static constexpr std::uint64_t beyond_bit = std::uint64_t{1} << 40;
    static constexpr std::uint64_t position_mask = beyond_bit - 1;
    static constexpr std::uint32_t epoch_limit = 1U << (64 - epoch_shift);

    [[nodiscard]] std::uint64_t stamp_at(std::uint64_t call) const noexcept {
        return (std::uint64_t{epoch_} << epoch_shift) | (call & position_mask);
    }
    [[nodiscard]] std::uint64_t stamp_beyond() const noexcept {
        return (std::uint64_t{epoch_} << epoch_shift) | beyond_bit;
    }
    const cost_t* prefix_ = nullptr; //!< length_ + 1 entries: program time at each position
    std::uint64_t base_ = 0;         //!< the step's clock at position 0 (step_tracker: base_call_)
    std::uint64_t now_ = 0;          //!< the step's clock at the call running now (or next)
    std::uint32_t length_ = 0;
    std::uint32_t epoch_ = 0; //!< of the recording in force; never 0 once one is
};

} // namespace dtr
