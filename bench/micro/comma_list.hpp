// SPDX-License-Identifier: Apache-2.0
// Command-line lists for the bench programs: "--sizes 100,1000" and the like.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtr_bench {

//! The non-empty comma-separated items of `s`, in order ("a,,b" gives a and b).
inline std::vector<std::string> split_commas(std::string_view s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

} // namespace dtr_bench
