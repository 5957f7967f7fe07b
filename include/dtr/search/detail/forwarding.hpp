// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The base of the search strategies: a policy wrapping another, forwarding its score
//! and every event hook the wrapped policy has.
#pragma once

#include <dtr/concepts.hpp>
#include <dtr/hooks.hpp>

#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>

namespace dtr::search::detail {

//! @brief "<Prefix>:<H::name>" as a compile-time string (a strategy's policy name).
template <const char* Prefix, class H>
struct joined_name {
    static constexpr std::size_t prefix_length = std::char_traits<char>::length(Prefix);
    static constexpr std::size_t inner_length = std::char_traits<char>::length(H::name);
    static constexpr std::array<char, prefix_length + inner_length + 2> text = [] {
        std::array<char, prefix_length + inner_length + 2> out{};
        std::size_t at = 0;
        for (std::size_t i = 0; i < prefix_length; ++i) out[at++] = Prefix[i];
        out[at++] = ':';
        for (std::size_t i = 0; i < inner_length; ++i) out[at++] = H::name[i];
        return out;
    }();
    static constexpr const char* value = text.data();
};

//! @brief Holds the wrapped heuristic and forwards score() (its bounded form too, where it
//! has one: dtr/bounded_score.hpp) and the event hooks of dtr/hooks.hpp to it (those it
//! defines). A strategy derives from it, adds choose(), and hides the hooks it
//! needs to extend, calling the forwarding one first.
//!
//! The strategy's storage_data must derive from H::storage_data: the wrapped policy reaches
//! its fields through s.meta() of the wrapper's type.
template <class H>
class forwarding {
public:
    using inner_type = H;
    //! A strategy over a policy that reads the forecast reads it too: the runtime leaves
    //! the order of kept storages to its scores (dtr::reads_forecast).
    static constexpr bool reads_forecast = ::dtr::reads_forecast<H>;

    forwarding() = default;
    explicit forwarding(H inner) : inner_(std::move(inner)) {}

    template <class Storage>
    double score(const Storage& s, const heuristic_context& ctx) {
        return static_cast<double>(inner_.score(s, ctx));
    }
    //! The bounded score (dtr/bounded_score.hpp), where the wrapped policy has one.
    template <class Storage, class Inner = H>
        requires requires(Inner& h, const Storage& s, const heuristic_context& c, double b) {
            h.score(s, c, b);
        }
    double score(const Storage& s, const heuristic_context& ctx, double bound) {
        return static_cast<double>(inner_.score(s, ctx, bound));
    }

    [[nodiscard]] H& inner() noexcept { return inner_; }
    [[nodiscard]] const H& inner() const noexcept { return inner_; }

#define DTR_FORWARD_HOOK(hook_name)                            \
    template <class Storage>                                   \
    void hook_name(Storage& s, const heuristic_context& ctx) { \
        hook::hook_name##_t::invoke(inner_, s, ctx);           \
    }
    DTR_HEURISTIC_HOOKS(DTR_FORWARD_HOOK)
#undef DTR_FORWARD_HOOK

protected:
    H inner_{};
};

//! @brief The runtime's default rule over a sequence of candidates: the last lowest score
//! wins and a score of 0 stops the scan (the published simulator's choose()). Shared by
//! the strategies so that they agree with the runtime on ties.
template <class Storage>
class last_lowest {
public:
    //! @brief Offers a candidate; returns false once the scan should stop (score 0).
    bool offer(Storage& s, double score) noexcept {
        if (score <= best_score_) {
            best_score_ = score;
            best_ = &s;
        }
        last_ = &s;
        return score != 0;
    }
    //! @brief The winner; when every score was NaN, the last candidate offered (as the
    //! runtime does).
    [[nodiscard]] Storage* best() const noexcept { return best_ != nullptr ? best_ : last_; }
    [[nodiscard]] double best_score() const noexcept { return best_score_; }

private:
    Storage* best_ = nullptr;
    Storage* last_ = nullptr;
    double best_score_ = std::numeric_limits<double>::infinity();
};

} // namespace dtr::search::detail
