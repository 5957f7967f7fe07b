// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief duration_text: a cost (nanoseconds) as people read a duration, for messages.
#pragma once

#include <dtr/options.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace dtr::detail {

//! @brief `ns` nanoseconds in the unit that reads best, with three significant digits:
//! "850 ns", "12.3 us", "4.95 s"; from a minute on, whole minutes and seconds ("2 min 5 s"),
//! from an hour on, hours and minutes ("2 h 3 min"). "infinite" and "NaN ns" for those.
[[nodiscard]] inline std::string duration_text(cost_t ns) {
    if (std::isnan(ns)) return "NaN ns";
    const char* sign = ns < 0 ? "-" : "";
    ns = std::fabs(ns);
    if (std::isinf(ns)) return std::string(sign) + "infinite";
    char buf[64];
    // Three significant digits: 2 decimals below 10, 1 below 100, none above.
    const auto three = [&buf, sign](double v, const char* unit) {
        const char* format = v < 9.995 ? "%s%.2f %s" : v < 99.95 ? "%s%.1f %s" : "%s%.0f %s";
        std::snprintf(buf, sizeof buf, format, sign, v, unit);
        return std::string(buf);
    };
    if (ns < 1e3) {
        if (ns != std::floor(ns)) return three(ns, "ns");
        std::snprintf(buf, sizeof buf, "%s%.0f ns", sign, ns);
        return buf;
    }
    if (ns < 1e6) return three(ns / 1e3, "us");
    if (ns < 1e9) return three(ns / 1e6, "ms");
    const double seconds = std::round(ns / 1e9 * 100) / 100;
    if (seconds < 60) return three(ns / 1e9, "s");
    // Two whole units: the larger one and the next, rounded, with its carry.
    const bool hours = seconds >= 3600;
    const double big = hours ? 3600 : 60;
    double whole = std::floor(seconds / big);
    double rest = std::round((seconds - whole * big) / (hours ? 60 : 1));
    if (rest >= 60) {
        whole += 1;
        rest -= 60;
    }
    std::snprintf(buf, sizeof buf, hours ? "%s%.0f h %.0f min" : "%s%.0f min %.0f s", sign, whole,
                  rest);
    return buf;
}

} // namespace dtr::detail
