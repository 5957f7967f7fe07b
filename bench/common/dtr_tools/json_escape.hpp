// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The one piece of JSON writing the tools share: a string's contents made safe to put
//! between double quotes (their --json files are written by hand, record by record).
#pragma once

#include <string>
#include <string_view>

namespace dtr::json {

//! @brief `s` with `"` and `\` escaped and control characters dropped (file names and error
//! messages hold none that matter).
[[nodiscard]] inline std::string escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        out += c;
    }
    return out;
}

} // namespace dtr::json
