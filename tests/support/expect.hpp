// SPDX-License-Identifier: Apache-2.0
// Small checks the unit tests share: expected byte patterns and the text of an exception.
#pragma once

#include <dtr/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtr_test {

//! n bytes first + delta, first + 1 + delta, ... (mod 256).
inline std::vector<std::uint8_t> pattern(std::uint8_t first, std::size_t n, int delta = 0) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::uint8_t>(first + i + static_cast<std::size_t>(delta));
    return v;
}

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

//! The message of the exception of type E that f() throws, or a text saying none was thrown.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "<no exception of the expected type thrown>";
}

//! The message of the dtr::logic_error f() throws, or a text saying none was thrown.
template <class F>
std::string logic_error_of(F&& f) {
    return message_of<dtr::logic_error>(std::forward<F>(f));
}

} // namespace dtr_test
