// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The replay tests' hand-written logs: a log's text loaded as a trace, through a
//! temporary file (the reader reads files, as the tools do).
#pragma once

#include <dtr_tools/replay/replay.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace dtr::replay::testing {

//! @brief `text` (a whole log) as a trace.
inline trace trace_of(const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("dtr_test_log_" + std::to_string(std::hash<std::string>{}(text)) + ".log");
    {
        std::ofstream out(path);
        out << text;
    }
    auto t = load_trace(path);
    std::filesystem::remove(path);
    return t;
}

} // namespace dtr::replay::testing
