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

//! @brief RAII pin of one tensor. While the guard lives, the tensor's storage stays
//! resident and its address stable; the guard also holds a handle, so the tensor stays
//! alive. Obtained from runtime::pin (read-only) or runtime::pin_for_write (constants
//! being initialized). Movable, not copyable; must not outlive its runtime.
template <class Runtime, bool Writable>
class basic_pin_guard {
public:
    using pointer = std::conditional_t<Writable, typename Runtime::pointer,
                                       typename Runtime::const_pointer>;

    basic_pin_guard(basic_pin_guard&& other) noexcept
        : runtime_(std::exchange(other.runtime_, nullptr)), handle_(std::move(other.handle_)),
          view_(other.view_) {}
    basic_pin_guard& operator=(basic_pin_guard&& other) noexcept {
        if (this != &other) {
            reset();
            runtime_ = std::exchange(other.runtime_, nullptr);
            handle_ = std::move(other.handle_);
            view_ = other.view_;
        }
        return *this;
    }
    basic_pin_guard(const basic_pin_guard&) = delete;
    basic_pin_guard& operator=(const basic_pin_guard&) = delete;
    ~basic_pin_guard() { reset(); }

    //! @brief The tensor's bytes. @throws dtr::logic_error on a released guard.
    [[nodiscard]] buffer_view<pointer> data() const {
        DTR_EXPECTS(runtime_ != nullptr, "data() of a released pin guard");
        return view_;
    }
    //! @brief Host memory as a span of bytes.
    [[nodiscard]] auto span() const { return data().span(); }
    //! @brief Host memory as a span of T.
    template <class T>
    [[nodiscard]] auto as() const {
        return data().template as<T>();
    }
    //! @brief The pinned tensor.
    [[nodiscard]] const tensor& handle() const noexcept { return handle_; }

    //! @brief Unpins early; the guard becomes empty.
    void reset() noexcept {
        if (auto* rt = std::exchange(runtime_, nullptr)) {
            rt->unpin_guard(handle_);
            handle_.reset();
        }
    }

private:
    friend Runtime;
    basic_pin_guard(Runtime& rt, tensor handle, buffer_view<pointer> view) noexcept
        : runtime_(&rt), handle_(std::move(handle)), view_(view) {}

    Runtime* runtime_;
    tensor handle_;
    buffer_view<pointer> view_;
};

} // namespace dtr
