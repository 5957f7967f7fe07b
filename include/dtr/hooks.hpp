// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The table of heuristic event hooks: the one list the runtime calls from, the
//! search strategies forward through, and the compile-time checks use.
//!
//! A policy may define any of these members, each callable as
//! `h.NAME(storage&, const dtr::heuristic_context&)`:
//!
//! | hook               | called when                                                    |
//! |--------------------|----------------------------------------------------------------|
//! | `on_create`        | a storage is first computed (or made by runtime::constant)     |
//! | `on_access`        | a storage is read by an operator or pinned                     |
//! | `on_evict`         | a storage leaves memory (it keeps its recipe)                  |
//! | `on_rematerialize` | an evicted storage has been recomputed                         |
//! | `on_release`       | the last handle of a storage is dropped                        |
//! | `on_destroy`       | a storage record is freed for good                             |
//! | `on_pool_insert`   | a storage becomes evictable (resident, recipe, unpinned)       |
//! | `on_pool_erase`    | it stops being evictable                                       |
//!
//! A member with one of these names that cannot be called that way (a missing context
//! parameter, a wrong storage type) would silently never run; the runtime rejects it at
//! compile time instead (dtr::hooks_well_formed). Misspelled names cannot be detected by
//! C++20 itself: a policy that lists the hooks it means to implement in
//! `static constexpr dtr::hook_set hooks = ...;` gets each listed hook checked as well.
#pragma once

#include <dtr/concepts.hpp>

#include <cstdint>
#include <type_traits>

//! @brief X-macro over the hook names, in the order of dtr::hook_flag: X(on_create) ...
#define DTR_HEURISTIC_HOOKS(X) \
    X(on_create)               \
    X(on_access)               \
    X(on_evict)                \
    X(on_rematerialize)        \
    X(on_release)              \
    X(on_destroy)              \
    X(on_pool_insert)          \
    X(on_pool_erase)

namespace dtr {

//! @brief One bit per hook, for a policy's `static constexpr hook_set hooks`.
enum class hook_flag : std::uint32_t {
#define DTR_HOOK_FLAG(name) name,
    DTR_HEURISTIC_HOOKS(DTR_HOOK_FLAG)
#undef DTR_HOOK_FLAG
};

//! @brief A set of hooks: `hook_set{hook_flag::on_evict} | hook_flag::on_access`.
class hook_set {
public:
    constexpr hook_set() noexcept = default;
    constexpr hook_set(hook_flag f) noexcept : bits_(1U << static_cast<std::uint32_t>(f)) {}
    [[nodiscard]] constexpr bool contains(hook_flag f) const noexcept {
        return (bits_ >> static_cast<std::uint32_t>(f)) & 1U;
    }
    friend constexpr hook_set operator|(hook_set a, hook_set b) noexcept {
        hook_set r;
        r.bits_ = a.bits_ | b.bits_;
        return r;
    }

private:
    std::uint32_t bits_ = 0;
};
constexpr hook_set operator|(hook_flag a, hook_flag b) noexcept { return hook_set(a) | b; }

namespace hook {

//! @brief Per hook NAME: `NAME_t::named<H>` (H has a member called NAME, whatever its
//! signature), `NAME_t::callable<H, S>` (callable as a hook on storages S) and
//! `NAME_t::invoke(h, s, ctx)` (calls it when callable, else nothing).
//!
//! `named` asks whether naming the member through a class that also inherits a data member
//! of that name is ambiguous: it is exactly when H has a member of that name, function
//! template or not. Final classes cannot be probed and count as unnamed.
#define DTR_HOOK_TAG(hook_name)                                                              \
    struct hook_name##_t {                                                                   \
        static constexpr const char* name = #hook_name;                                      \
        static constexpr hook_flag flag = hook_flag::hook_name;                              \
        struct probe {                                                                       \
            int hook_name;                                                                   \
        };                                                                                   \
        template <class H>                                                                   \
        struct probe_derived : H, probe {};                                                  \
        template <class H>                                                                   \
        static constexpr bool named_impl() {                                                 \
            if constexpr (!std::is_class_v<H> || std::is_final_v<H>)                         \
                return false;                                                                \
            else                                                                             \
                return !requires { &probe_derived<H>::hook_name; };                          \
        }                                                                                    \
        template <class H>                                                                   \
        static constexpr bool named = named_impl<H>();                                       \
        template <class H, class S>                                                          \
        static constexpr bool callable = requires(H & h, S& s, const heuristic_context& c) { \
            h.hook_name(s, c);                                                               \
        };                                                                                   \
        template <class H, class S>                                                          \
        static void invoke(H& h, S& s, const heuristic_context& c) {                         \
            if constexpr (callable<H, S>) h.hook_name(s, c);                                 \
        }                                                                                    \
    };
DTR_HEURISTIC_HOOKS(DTR_HOOK_TAG)
#undef DTR_HOOK_TAG

} // namespace hook

namespace detail {

template <class H>
constexpr hook_set declared_hooks() {
    if constexpr (requires { H::hooks; })
        return hook_set(H::hooks);
    else
        return hook_set{};
}

} // namespace detail

//! @brief True when every hook member of H can be called on storages S, and every hook H
//! declares in `H::hooks` exists.
template <class H, class S>
inline constexpr bool hooks_well_formed =
#define DTR_HOOK_OK(name)                                                                        \
    (!hook::name##_t::named<H> ||                                                                \
     hook::name##_t::callable<H, S>)&&(!detail::declared_hooks<H>().contains(hook_flag::name) || \
                                       hook::name##_t::callable<H, S>)&&
    DTR_HEURISTIC_HOOKS(DTR_HOOK_OK) true;
#undef DTR_HOOK_OK

namespace detail {

//! One static_assert per hook, so that the compiler names the faulty one. Instantiated by
//! the runtime with its storage type.
template <class H, class S>
struct check_hooks {
#define DTR_HOOK_ASSERT(name)                                                             \
    static_assert(!hook::name##_t::named<H> || hook::name##_t::callable<H, S>,            \
                  "dtr: the heuristic has a member named " #name                          \
                  " that cannot be called as " #name                                      \
                  "(storage&, const dtr::heuristic_context&), so the runtime would "      \
                  "never call it; fix its signature (see dtr/hooks.hpp)");                \
    static_assert(                                                                        \
        !declared_hooks<H>().contains(hook_flag::name) || hook::name##_t::callable<H, S>, \
        "dtr: the heuristic lists " #name " in its `hooks` but has no member " #name      \
        "(storage&, const dtr::heuristic_context&) (misspelled?)");
    DTR_HEURISTIC_HOOKS(DTR_HOOK_ASSERT)
#undef DTR_HOOK_ASSERT
    static constexpr bool value = true;
};

} // namespace detail

} // namespace dtr
