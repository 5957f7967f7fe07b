// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief basic_pin_guard: keeps a tensor resident while the framework touches its memory.
#pragma once

#include <dtr/buffer_view.hpp>
#include <dtr/error.hpp>
#include <dtr/tensor.hpp>

#include <type_traits>
#include <utility>

namespace dtr {

namespace detail {
//! False, for a static_assert that fires only when its template is instantiated.
template <class>
inline constexpr bool dependent_false = false;
} // namespace detail

//! @brief RAII pin of one tensor's storage.
//!
//! Obtained from runtime::pin (read-only) or runtime::pin_for_write (constants being
//! initialized). Movable, not copyable.
//!
//! Contract:
//! - The guard pins the *storage version* the tensor named when the guard was taken, for
//!   the guard's whole life, whatever later happens to the tensor handle: after
//!   runtime::mutate moves the tensor to a new version, data() still shows the old
//!   version's bytes (unchanged, since storages are immutable), and the old version stays
//!   resident until the guard is released. The address is stable meanwhile.
//! - A write guard (pin_for_write) must be released before any operator reads the
//!   constant: a call or mutate reading a storage under a live write guard throws
//!   dtr::logic_error, since bytes written after an operator read them would make its
//!   recomputation disagree with its first run.
//! - A guard may outlive its runtime, like a tensor: destroying or resetting it is then
//!   harmless, and data() throws dtr::logic_error.
template <class Runtime, bool Writable>
class basic_pin_guard {
public:
    using pointer =
        std::conditional_t<Writable, typename Runtime::pointer, typename Runtime::const_pointer>;

    //! @brief Effects: takes over `other`'s pin; `other` becomes inactive.
    basic_pin_guard(basic_pin_guard&& other) noexcept
        : runtime_(std::exchange(other.runtime_, nullptr)),
          handle_(std::move(other.handle_)),
          storage_(std::exchange(other.storage_, nullptr)),
          view_(other.view_) {}
    //! @brief Effects: releases this guard's pin (as reset()), then takes over `other`'s.
    basic_pin_guard& operator=(basic_pin_guard&& other) noexcept {
        if (this != &other) {
            reset();
            runtime_ = std::exchange(other.runtime_, nullptr);
            handle_ = std::move(other.handle_);
            storage_ = std::exchange(other.storage_, nullptr);
            view_ = other.view_;
        }
        return *this;
    }
    basic_pin_guard(const basic_pin_guard&) = delete;
    basic_pin_guard& operator=(const basic_pin_guard&) = delete;
    //! @brief Effects: as reset().
    ~basic_pin_guard() { reset(); }

    //! @brief Returns: the pinned bytes (the version the tensor named when the guard was
    //! taken); the address is stable while the guard is active.
    //! Throws: dtr::logic_error on a released guard, or when its runtime has been destroyed.
    //!
    //! The accessors of the bytes (data, span, as) are for a named guard only: on a temporary
    //! (`rt.pin(t).span()`) the pin would end with the full expression, before anything
    //! reads the bytes, so those calls do not compile.
    [[nodiscard]] buffer_view<pointer> data() const& {
        DTR_EXPECTS(runtime_ != nullptr, "data() of a released pin guard");
        DTR_EXPECTS(!handle_.orphaned(), "data() of a pin guard whose runtime has been destroyed");
        return view_;
    }
    //! @brief Returns: data() as a span of bytes (host backends only).
    //! Throws: as data().
    [[nodiscard]] auto span() const& { return data().span(); }
    //! @brief Returns: data() as a span of T (host backends only).
    //! Throws: as data(), and as buffer_view::as().
    template <class T>
    [[nodiscard]] auto as() const& {
        return data().template as<T>();
    }
    // On a temporary guard: a compile error that says why (see data()). The pin would end
    // with the full expression, before the bytes are read: in `for (auto b :
    // rt.pin(t).span())`, before the loop body runs. (The return type is deduced, so that
    // the assertion is the first error a compiler reports.)
    template <class Guard = basic_pin_guard>
    auto data() const&& {
        static_assert(detail::dependent_false<Guard>,
                      "data() of a temporary pin guard: name the guard (auto g = rt.pin(t);)");
        return view_;
    }
    template <class Guard = basic_pin_guard>
    auto span() const&& {
        static_assert(detail::dependent_false<Guard>,
                      "span() of a temporary pin guard: name the guard (auto g = rt.pin(t);)");
        return view_;
    }
    template <class T>
    auto as() const&& {
        static_assert(detail::dependent_false<T>,
                      "as<T>() of a temporary pin guard: name the guard (auto g = rt.pin(t);)");
        return view_;
    }
    //! @brief Returns: the tensor the guard was taken on (empty once released). After a
    //! mutation it names the tensor's new version, while data() still shows the pinned one.
    [[nodiscard]] const tensor& handle() const& noexcept { return handle_; }
    //! @brief Returns: as handle(), a copy, on a temporary guard (whose handle dies with it).
    [[nodiscard]] tensor handle() const&& noexcept { return handle_; }
    //! @brief Returns: whether the guard pins something (not released, not moved from).
    [[nodiscard]] bool active() const noexcept { return runtime_ != nullptr; }

    //! @brief Unpins early.
    //!
    //! Effects: the pinned storage version becomes evictable again once nothing else pins
    //! it (an old version left behind by a mutation and read by nothing is freed); a write
    //! guard's constant may be read by operators again; the guard becomes inactive and drops
    //! its handle. Harmless on an inactive guard or once the runtime is gone.
    //! Complexity: constant, plus the release of the handle.
    void reset() noexcept {
        if (auto* rt = std::exchange(runtime_, nullptr)) {
            // An orphaned handle means the runtime was destroyed: nothing is pinned any more.
            if (!handle_.orphaned()) rt->unpin_guard(storage_, Writable);
            storage_ = nullptr;
            handle_.reset();
        }
    }

private:
    friend Runtime;
    basic_pin_guard(Runtime& rt, tensor handle, detail::storage_header* storage,
                    buffer_view<pointer> view) noexcept
        : runtime_(&rt), handle_(std::move(handle)), storage_(storage), view_(view) {}

    Runtime* runtime_;
    tensor handle_;                   //!< keeps the tensor alive; tells an orphan
    detail::storage_header* storage_; //!< the version pinned, whatever the handle names now
    buffer_view<pointer> view_;
};

} // namespace dtr
