// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief device_pointer: a byte address in device memory that host code cannot dereference
//! by accident.
//!
//! Why not std::byte*. A raw pointer would make buffer_view::span() and as<T>() available on
//! device memory, and generic host operators (`if constexpr (std::is_pointer_v<...>)`) would
//! write through it. A distinct type keeps the runtime's arithmetic (p + n bytes, equality,
//! "none" as the value-initialized state) and makes every use on the device explicit:
//! get() for APIs taking void*, as<T>() for kernel arguments.
#pragma once

#include <cstddef>
#include <type_traits>

namespace dtr {

//! @brief A device address of a byte (`Byte` is std::byte or const std::byte). Regular
//! (equal when the addresses are), advanced in bytes; a value-initialized device_pointer is
//! null ("no block"). There is no ordering and no dereference. Every member is noexcept
//! and, except as<T>(), constexpr; none touches the device.
template <class Byte>
class device_pointer {
    static_assert(std::is_same_v<std::remove_const_t<Byte>, std::byte>,
                  "dtr::device_pointer<Byte>: Byte must be std::byte or const std::byte");

public:
    //! The byte type: std::byte, or const std::byte for a read-only pointer.
    using element_type = Byte;

    //! @brief A null pointer ("no block").
    constexpr device_pointer() noexcept = default;
    //! @brief Wraps a device address (as returned by cudaMalloc and the like); nothing is
    //! checked.
    constexpr explicit device_pointer(Byte* address) noexcept : address_(address) {}
    //! @brief A read-only pointer to the same address as a writable one (implicit; there is
    //! no conversion back).
    template <class Other>
        requires(std::is_const_v<Byte>&& std::is_same_v<Other, std::remove_const_t<Byte>>)
    constexpr device_pointer(
        device_pointer<Other> other) noexcept // NOLINT: implicit, like T* -> const T*
        : address_(other.get()) {}

    //! @brief Returns: the raw device address, for APIs that take one (cudaMemcpyAsync,
    //! cuBLAS).
    [[nodiscard]] constexpr Byte* get() const noexcept { return address_; }

    //! @brief Returns: the address as a T* (const T* for read-only pointers), for kernel
    //! arguments. The caller vouches for the alignment (the CUDA backend aligns every block
    //! to 256).
    template <class T>
    [[nodiscard]] auto as() const noexcept {
        using element = std::conditional_t<std::is_const_v<Byte>, const T, T>;
        return reinterpret_cast<element*>(address_);
    }

    //! @brief Returns: whether the pointer is not null.
    [[nodiscard]] constexpr explicit operator bool() const noexcept { return address_ != nullptr; }

    //! @brief Returns: the address `bytes` bytes further.
    friend constexpr device_pointer operator+(device_pointer p, std::size_t bytes) noexcept {
        return device_pointer(p.address_ + bytes);
    }
    //! @brief Returns: the distance in bytes from `b` to `a` (both in the same allocation).
    friend constexpr std::ptrdiff_t operator-(device_pointer a, device_pointer b) noexcept {
        return a.address_ - b.address_;
    }
    //! @brief Returns: whether both hold the same address (!= is its negation).
    friend constexpr bool operator==(device_pointer, device_pointer) noexcept = default;

private:
    Byte* address_ = nullptr;
};

} // namespace dtr
