// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The one command-line convention of the tools and benchmarks under bench/, on CLI11
//! (Debian libcli11-dev, header-only; the library itself depends on Boost alone).
//!
//! Every program: GNU long options `--name VALUE` (repeatable ones given once per value),
//! `--help` / `-h`, `--json FILE` for machine-readable results (and `--csv FILE` where a
//! program also writes CSV). A bad or missing argument ends the program with exit status 2
//! and a message that names the argument (CLI11's: "--reps: Value x not in range ..."),
//! followed by "Run with --help for more information."
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <exception>
#include <optional>
#include <string>

namespace dtr::tools {

//! @brief Parses argv into `app`.
//! @returns nullopt to go on; otherwise the status to exit with: 0 after printing --help,
//! 2 after a parse error (the message, naming the argument, is on stderr).
//! @brief Validator: a positive decimal integer ("--reps: must be a positive integer, not 'x'").
inline const CLI::Validator positive(
    [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || text.find_first_not_of('0') == std::string::npos)
            return "must be a positive integer, not '" + text + "'";
        return {};
    },
    "POSITIVE");

//! @brief Validator: an integer >= 0 ("--budget-index: must be an integer >= 0, not ''").
inline const CLI::Validator non_negative(
    [](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
            return "must be an integer >= 0, not '" + text + "'";
        return {};
    },
    "NONNEGATIVE");

namespace detail {
//! Whether `text` is a whole finite decimal number, and its value.
inline bool parse_real(const std::string& text, double& value) {
    if (text.empty()) return false;
    std::size_t used = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        return false;
    }
    return used == text.size() && std::isfinite(value);
}
} // namespace detail

//! @brief Validator: a number > 0 ("--ratio: must be a positive number, not 'x'").
inline const CLI::Validator positive_real(
    [](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_real(text, v) || !(v > 0))
            return "must be a positive number, not '" + text + "'";
        return {};
    },
    "POSITIVE");

//! @brief Validator: a number >= 0 ("--time-limit: must be a number >= 0, not '-1'").
inline const CLI::Validator non_negative_real(
    [](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_real(text, v) || !(v >= 0))
            return "must be a number >= 0, not '" + text + "'";
        return {};
    },
    "NONNEGATIVE");

[[nodiscard]] inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e); // prints the message (naming the argument) and the --help hint
        return 2;
    }
    return std::nullopt;
}

} // namespace dtr::tools
