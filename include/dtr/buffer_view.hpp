// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief buffer_view: a non-owning (pointer, size) pair in a backend's address space.
#pragma once

#include <dtr/error.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

namespace dtr {

//! @brief Bytes [data, data + size) of some backend's memory. `Pointer` is the backend's
//! pointer type: `std::byte*` on the host, a device address for CUDA, an opaque integer
//! for the simulator. Host views also convert to spans.
template <class Pointer>
class buffer_view {
public:
    using pointer = Pointer;

    //! @brief An empty view.
    constexpr buffer_view() = default;
    //! @brief The bytes [data, data + size); nothing is checked or owned.
    constexpr buffer_view(Pointer data, std::size_t size) noexcept : data_(data), size_(size) {}
    //! @brief A read-only view of the same bytes (std::byte* to const std::byte*).
    template <class Other>
        requires(!std::is_same_v<Other, Pointer> && std::is_convertible_v<Other, Pointer>)
    constexpr buffer_view(buffer_view<Other> other) noexcept
        : data_(other.data()), size_(other.size()) {}

    //! @brief Returns: the first byte's address.
    [[nodiscard]] constexpr Pointer data() const noexcept { return data_; }
    //! @brief Returns: the number of bytes.
    [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
    //! @brief Returns: size() == 0.
    [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }

    //! @brief Returns: the sub-range [offset, offset + length).
    //! Throws: dtr::logic_error when it does not lie inside this view.
    [[nodiscard]] buffer_view subview(std::size_t offset, std::size_t length) const {
        DTR_EXPECTS(offset <= size_ && length <= size_ - offset,
                    "sub-view [" + std::to_string(offset) + ", +" + std::to_string(length) +
                        ") exceeds a buffer of " + std::to_string(size_) + " bytes");
        return {data_ + offset, length};
    }

    //! @brief Returns: the bytes as a span (host pointers only).
    [[nodiscard]] auto span() const noexcept requires std::is_pointer_v<Pointer> {
        return std::span{data_, size_};
    }

    //! @brief Returns: the bytes as a span of T, const T for read-only views (host pointers
    //! only).
    //! Throws: dtr::logic_error when the size is not a multiple of sizeof(T) or the address
    //! is misaligned for T.
    template <class T>
    [[nodiscard]] auto as()
        const requires std::is_pointer_v<Pointer> && std::is_trivially_copyable_v<T> {
        using element =
            std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const T, T>;
        DTR_EXPECTS(size_ % sizeof(T) == 0, "buffer of " + std::to_string(size_) +
                                                " bytes is not a whole number of elements of " +
                                                std::to_string(sizeof(T)) + " bytes");
        DTR_EXPECTS(reinterpret_cast<std::uintptr_t>(data_) % alignof(T) == 0,
                    "buffer is misaligned for the element type");
        return std::span<element>{reinterpret_cast<element*>(data_), size_ / sizeof(T)};
    }

private:
    Pointer data_{};
    std::size_t size_ = 0;
};

} // namespace dtr
