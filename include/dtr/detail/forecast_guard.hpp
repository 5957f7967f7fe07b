// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The forecast guard: measures what the program's steps cost in recomputation with
//! the forecast and without it, and withholds the forecast from the steps after one where
//! it cost more than the online policy alone.
#pragma once

#include <dtr/options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dtr::detail {

//! @brief Decides, step by step, whether the policy gets the forecast.
//!
//! The forecast is Belady's information while the step repeats as recorded, but a policy
//! that follows it can still choose worse than its online scores (a cost model the distances
//! mislead, a restore that runs deeper than the budget holds). Steps repeat, so the runtime
//! measures both instead of guessing. Each period between two step boundaries is charged its
//! recomputation cost per unit of first-run compute (a ratio, so that periods of different
//! lengths compare), under the mode it ran in: with the forecast, or without it. A period
//! offered the forecast that left the recorded step within its first eighth (of its compute)
//! ran on the online scores for the rest, and counts as an online period: a training loop's
//! first step differs from the next (no optimizer state yet, so more room and less
//! recomputation), and a second step that leaves the first's recording at once is the first
//! online measurement of the program the later steps repeat; judging the forecast against the
//! first step instead withheld it wrongly (the PyTorch bridge's resnet50 at 0.56, when it
//! marked steps at the optimizer step itself and its loss read came first in the second: a
//! fourth step of 5.8 s against 1.7 s with the forecast). A period that left later, while the
//! program may just be settling, mixes both modes: it counts as the forecast's loss only
//! where its step cost more than 1 + weak_margin times the last online one (the TreeLSTM's
//! second step: 7.4 s of CPU, most of it the forecast's victim search, against 0.55 s for the
//! first), and as neither otherwise (resnet50's second step, which leaves the first's
//! recording in the optimizer step where the first made the momentum buffers). Once a
//! recording before it was replaced without ever being followed to its end, such a period
//! counts as the forecast's in full: the program's steps differ every time (data-dependent
//! control flow), every period leaves, and its evictions were the forecast's until it left.
//!
//! A period that had no recording to follow (the first) is the online measurement until
//! there is another, but it can be a biased one: where the next period leaves the recording
//! made from it late (the first optimizer step makes the momentum buffers the later steps
//! carry), the first step ran with more room than the steps the forecast will steer. Its
//! ratio is then a *weak* baseline for the periods that follow a recording to its end (the
//! program settled after its first steps), against which only a step that costs more than
//! 1 + weak_margin times the online step's counts as a loss: the PyTorch bridge's resnet50
//! at 0.545, its loss read after the optimizer step, measures its first step about 10%
//! cheaper than the forecast's steady steps (212 against 388-474 ms of recomputation in a
//! step of about 1.7 s); judged as a loss, that put an online step of 3.3 s of recomputation
//! in the fourth. A forecast that loses by far more is withheld as before; one that loses by
//! less than the margin is kept until an online period measured on the recording says
//! otherwise. A program whose steps keep leaving (churning) is judged against the first step
//! as measured: its first step is as much the program as any other.
//!
//! The next period gets the forecast unless the forecast's last period lost (its ratio above
//! the last online period's). After a loss the periods run online, which measures the online
//! policy again in the same conditions; the forecast is tried again as soon as an online
//! period measures worse than the forecast's last one, and otherwise after 2, 4, ... up to
//! 64 online periods, or longer where the loss was large: so long that a try losing as much
//! again costs at most 3% over the online periods before it (at most 1,024). A win resets
//! the wait, and so does a new recording of a program that had settled (a recording
//! followed to its end at least once, replaced: another program).
//! A recording replaced without ever being followed through (steps that differ every time)
//! keeps the guard's state, so a forecast that keeps losing on such a program stays withheld.
//!
//! Whole periods only: a period is never switched midway, since a policy taking over the
//! evictions the other made can do worse than either (measured on the PyTorch bridge's
//! TreeLSTM: 28 s for a step switched midway, 3 s with the forecast, 0.5 s without).
//! What a period is charged is the caller's: the runtime passes its recomputation cost, plus
//! its victim search time under runtime_options::guard_charges_search.
//! Upkeep: O(1) per boundary.
class forecast_guard {
public:
    //! @brief A period begins. `charge` and `compute` are the runtime's totals so far
    //! (counters::remat_cost, with victim_search_ns where charged; compute_cost);
    //! `following`: a recorded step is followed from here;
    //! `enabled`: runtime_options::guard_forecast (off: every followed period gets it).
    //! Returns: whether the forecast is withheld from a followed period.
    bool begin(cost_t charge, cost_t compute, bool following, bool enabled) noexcept {
        charge0_ = charge;
        compute0_ = compute;
        left_at_ = -1;
        recorded_ = following;
        offered_ = following && (!enabled || choose_forecast());
        return following && !offered_;
    }

    //! @brief The program left the recorded step; `compute` is the runtime's total so far.
    //! The first time in a period marks how much of it the forecast could steer.
    void left(cost_t compute) noexcept {
        if (left_at_ < 0) left_at_ = compute;
    }

    //! @brief The period ends (`followed`: the recorded step was followed to its end): its
    //! ratio is recorded under the mode it ran in.
    void end(cost_t charge, cost_t compute, bool followed) noexcept {
        if (followed) {
            settled_ = true;
            churning_ = false;
        }
        const cost_t work = compute - compute0_;
        if (work <= 0) return;
        const double ratio = (charge - charge0_) / work;
        const bool left_early =
            offered_ && !followed && left_at_ >= 0 && left_at_ - compute0_ <= early_share * work;
        // The first period offered the forecast tells whether an online ratio measured
        // without a recording was the same program's: followed to its end, it was; left
        // late, the program changed after it (weak baseline).
        if (offered_ && !left_early && online_unconfirmed_) {
            online_unconfirmed_ = false;
            online_weak_ = !followed;
        }
        if (offered_ && !left_early && (followed || churning_)) {
            forecast_ratio_ = ratio;
            // the program settled after its first steps: against a weak baseline, a margin
            if (online_weak_ && followed ? loses_by_margin(ratio) : loses(ratio)) {
                record_loss(ratio);
            } else {
                lost_ = false;
                wait_ = 0;
            }
        } else if (offered_ && !left_early) {
            // Left late, while the program may be settling: a mix of the forecast's choices
            // and the online ones, judged only where it lost by more than the margin.
            if (loses_by_margin(ratio)) record_loss(ratio);
        } else {
            online_ratio_ = ratio;
            online_unconfirmed_ = !recorded_;
            online_weak_ = false;
            ++waited_;
        }
    }

    //! @brief A new step was recorded. Where it replaces one that was never followed to its
    //! end, the program's steps differ: the guard's state stays. Otherwise (the first
    //! recording, or the program changed after settling) the new forecast has not been
    //! tried, so the next followed period gets it; the online policy's last ratio stays.
    void new_recording() noexcept {
        const bool unsettled = !settled_;
        settled_ = false;
        if (unsettled) {
            churning_ = true;
            return;
        }
        churning_ = false;
        forecast_ratio_ = -1;
        lost_ = false;
        wait_ = 0;
        waited_ = 0;
    }

    //! @brief Returns: whether the forecast may be given to the policy in this period.
    [[nodiscard]] bool allows() const noexcept { return offered_; }

private:
    //! The longest wait reached by doubling.
    static constexpr std::uint32_t max_doubled_wait = 64;
    //! A losing try's excess over an online period, spread over the online periods until the
    //! next try, is at most this share of their cost.
    static constexpr double retry_share = 0.03;
    //! The longest wait sized by the loss.
    static constexpr std::uint32_t max_sized_wait = 1024;
    //! A period offered the forecast that left the step within this share of its compute ran
    //! online for the rest, and is measured as online.
    static constexpr double early_share = 0.125;
    //! Against a weak online baseline, a forecast period loses only where its step (compute
    //! plus charge) costs more than 1 + weak_margin times the online period's.
    static constexpr double weak_margin = 0.25;

    //! Whether a forecast period with `ratio` lost to the last online period.
    [[nodiscard]] bool loses(double ratio) const noexcept {
        return online_ratio_ >= 0 && ratio > online_ratio_;
    }
    //! Whether a period with `ratio` cost more than 1 + weak_margin times the last online one.
    [[nodiscard]] bool loses_by_margin(double ratio) const noexcept {
        return online_ratio_ >= 0 && 1 + ratio > (1 + online_ratio_) * (1 + weak_margin);
    }

    //! The forecast lost a period with `ratio`: the next periods run online for a wait.
    void record_loss(double ratio) noexcept {
        forecast_ratio_ = ratio;
        lost_ = true;
        wait_ = wait_after_loss(ratio);
        waited_ = 0;
    }

    //! After the forecast lost a period with `ratio`: the doubled wait, or the wait that
    //! keeps the next try's excess cost (ratio - online ratio, per unit of compute, if the
    //! loss repeats) within retry_share of the online periods before it (each 1 + online
    //! ratio), where that is longer.
    [[nodiscard]] std::uint32_t wait_after_loss(double ratio) const noexcept {
        const std::uint32_t doubled =
            std::min<std::uint32_t>(wait_ == 0 ? 2 : 2 * wait_, max_doubled_wait);
        const double sized = (ratio - online_ratio_) / (retry_share * (1 + online_ratio_));
        if (!(sized > doubled)) return doubled;
        return sized >= max_sized_wait ? max_sized_wait
                                       : static_cast<std::uint32_t>(std::ceil(sized));
    }

    [[nodiscard]] bool choose_forecast() const noexcept {
        return !lost_ || waited_ >= wait_ || forecast_ratio_ <= online_ratio_;
    }

    cost_t charge0_ = 0, compute0_ = 0;
    cost_t left_at_ = -1; //!< compute when the period left the recorded step; -1: it did not
    double online_ratio_ = -1, forecast_ratio_ = -1; //!< the last measured; negative: none
    std::uint32_t wait_ = 0;   //!< online periods to wait after the forecast's last loss
    std::uint32_t waited_ = 0; //!< online periods measured since that loss
    bool offered_ = false;     //!< this period runs with the forecast
    bool recorded_ = false;    //!< this period had a recorded step to follow
    //! The last online ratio was measured without a recording, and no period offered the
    //! forecast has ended since: whether it is weak is not known yet.
    bool online_unconfirmed_ = false;
    //! The last online ratio is a weak baseline for periods followed to their end (class
    //! comment).
    bool online_weak_ = false;
    bool lost_ = false; //!< the forecast's last period cost more than the online one
    //! Since the last period followed to its end, a recording was replaced without one:
    //! the program's steps differ, and periods that leave the step are judged.
    bool churning_ = false;
    //! A period followed the recording in force to its end (true before the first recording:
    //! there is nothing unsettled to replace).
    bool settled_ = true;
};

} // namespace dtr::detail
