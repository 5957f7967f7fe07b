// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The one piece of JSON writing the tools share: a string's contents made safe to put
//! between double quotes (their --json files are written by hand, record by record).
#pragma once

#include <string>
#include <string_view>

namespace dtr::json {

//! @brief `s` with `"` and `\` escaped and each control character written as `\u00XX`, so
//! that an error message's line breaks survive the round trip through a JSON reader. Other
//! bytes are copied as they are (UTF-8 stays UTF-8).
[[nodiscard]] inline std::string escape(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 0xF];
        } else
            out += ch;
    }
    return out;
}

} // namespace dtr::json
