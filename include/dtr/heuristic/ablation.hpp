// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The shared score skeleton of the paper's heuristics and its Appendix D ablations:
//! score = cost / (size x staleness), each factor switchable.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/heuristic/cost/decrease_listener.hpp>
#include <dtr/heuristic/cost/none.hpp>

#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

namespace dtr::heuristics {

namespace detail {

//! Concatenates string constants at compile time (policy names built from their parts).
template <std::size_t N>
struct fixed_string {
    std::array<char, N + 1> text{};
    [[nodiscard]] constexpr const char* c_str() const noexcept { return text.data(); }
};

template <class... Parts>
constexpr auto concat(Parts... parts) {
    constexpr std::size_t n = (std::string_view(Parts::value).size() + ...);
    fixed_string<n> out{};
    std::size_t at = 0;
    auto append = [&](std::string_view p) {
        for (char c : p) out.text[at++] = c;
    };
    (append(parts.value), ...);
    return out;
}

template <const char* S>
struct part {
    static constexpr const char* value = S;
};

} // namespace detail

//! @brief score(t) = N(t) / (m(t) x s(t)), where N is the cost model's numerator, m the
//! storage's size (when `UseSize`) and s its staleness, now - last access (when
//! `UseStaleness`). Lower scores are evicted first.
//!
//! @tparam CostModel    cost::estar<> (e*, h_DTR), cost::eqclass (h_DTR^eq), cost::local
//!                      (h_DTR^local), cost::none (the constant 1: the "no cost" ablations)
//! @tparam UseSize      divide by the storage's size
//! @tparam UseStaleness divide by now - last_access
//!
//! Exactly the published simulator's formulas (heuristic/dtr.py, heuristic/ablation.py):
//! - the denominator is the product of the factors used; when it is not positive (an empty
//!   storage, a storage used at this very clock tick) the score is +infinity;
//! - with neither factor the score is the numerator itself (AbE, AbEq, AbLocal);
//! - staleness is `now - last_access` on the runtime clock (total cost run so far), the last
//!   access being the last use as an operator input, rematerializations included, or the
//!   creation (the simulator's `last_access_int`).
//! ablation<cost::none, false, false> is the simulator's random policy; it is rejected at
//! compile time in favour of dtr::heuristics::random, which is seeded.
//!
//! Each score costs one metadata access for the storage's own record (cost, size, last
//! access) plus whatever the cost model reads.
template <class CostModel, bool UseSize, bool UseStaleness>
class ablation {
    static_assert(!(std::is_same_v<CostModel, cost::none> && !UseSize && !UseStaleness),
                  "dtr::heuristics::ablation<cost::none, false, false> scores every storage "
                  "alike; the paper's 'no cost, no size, no staleness' ablation is random "
                  "eviction: use dtr::heuristics::random (seeded)");

    static constexpr char size_on[] = "-size", size_off[] = "-nosize";
    static constexpr char stale_on[] = "-stale", stale_off[] = "-nostale";
    static constexpr char prefix[] = "ablation-";
    static constexpr auto name_text =
        detail::concat(detail::part<prefix>{}, detail::part<CostModel::tag>{},
                       detail::part<(UseSize ? size_on : size_off)>{},
                       detail::part<(UseStaleness ? stale_on : stale_off)>{});

public:
    using cost_model = CostModel;
    using storage_data = typename CostModel::storage_data;
    static constexpr bool uses_size = UseSize;
    static constexpr bool uses_staleness = UseStaleness;
    //! e.g. "ablation-estar-size-nostale" (the paper's reduced heuristic of Theorem 3.1).
    static constexpr const char* name = name_text.c_str();

    ablation() = default;
    explicit ablation(CostModel model) : model_(std::move(model)) {}

    //! @brief The score of a resident storage (see the class comment).
    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        return compose(model_.numerator(s, ctx), s, ctx);
    }

    //! @brief The cost model's numerator alone: the time-invariant part of the score.
    template <class Storage>
    double numerator(const Storage& s, const heuristic_context& ctx) {
        return model_.numerator(s, ctx);
    }

    //! @brief numerator, registering s for decrease notifications where the model supports
    //! it (indexed search).
    template <class Storage>
    double numerator_tracked(Storage& s, const heuristic_context& ctx) {
        if constexpr (requires { model_.numerator_tracked(s, ctx); })
            return model_.numerator_tracked(s, ctx);
        else
            return model_.numerator(s, ctx);
    }
    template <class Storage>
    void untrack(Storage& s) noexcept {
        if constexpr (requires { model_.untrack(s); }) model_.untrack(s);
    }

    //! @brief The score from a numerator already computed: bit-identical to score().
    template <class Storage>
    double compose(double numerator, const Storage& s,
                   const heuristic_context& ctx) const noexcept {
        ctx.count_access();
        if constexpr (!UseSize && !UseStaleness) {
            return numerator;
        } else {
            double denominator = 1;
            if constexpr (UseSize) denominator = static_cast<double>(s.size());
            if constexpr (UseStaleness)
                denominator = denominator * static_cast<double>(ctx.now - s.last_access());
            return denominator > 0 ? numerator / denominator
                                   : std::numeric_limits<double>::infinity();
        }
    }

    // ---- runtime hooks: the cost model's maintenance ------------------------------------
    template <class Storage, class Listener = cost::ignore_decrease>
    void on_evict(Storage& s, const heuristic_context& ctx, Listener&& l = {}) {
        if constexpr (requires { model_.on_evict(s, ctx, l); }) model_.on_evict(s, ctx, l);
    }
    template <class Storage, class Listener = cost::ignore_decrease>
    void on_rematerialize(Storage& s, const heuristic_context& ctx, Listener&& l = {}) {
        if constexpr (requires { model_.on_rematerialize(s, ctx, l); })
            model_.on_rematerialize(s, ctx, l);
    }
    template <class Storage, class Listener = cost::ignore_decrease>
    void on_release(Storage& s, const heuristic_context& ctx, Listener&& l = {}) {
        if constexpr (requires { model_.on_release(s, ctx, l); }) model_.on_release(s, ctx, l);
    }
    template <class Storage, class Listener = cost::ignore_decrease>
    void on_destroy(Storage& s, const heuristic_context& ctx, Listener&& l = {}) {
        if constexpr (requires { model_.on_destroy(s, ctx, l); }) model_.on_destroy(s, ctx, l);
    }

    [[nodiscard]] CostModel& model() noexcept { return model_; }
    [[nodiscard]] const CostModel& model() const noexcept { return model_; }

private:
    [[no_unique_address]] CostModel model_{};
};

//! @brief Policies of the score-skeleton family (what dtr::search::indexed requires): a
//! time-invariant numerator, and a score that is numerator / (size? x staleness?).
template <class H>
concept factored_heuristic = requires {
    typename H::cost_model;
    { H::uses_size } -> std::convertible_to<bool>;
    { H::uses_staleness } -> std::convertible_to<bool>;
}
&&std::is_base_of_v<ablation<typename H::cost_model, H::uses_size, H::uses_staleness>, H>;

} // namespace dtr::heuristics
