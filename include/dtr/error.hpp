// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exception types of dtr and the DTR_EXPECTS precondition macro.
//!
//! Every error the library reports derives from one of two standard bases so that
//! callers can catch broadly (`std::logic_error`, `std::bad_alloc`) or precisely:
//!
//! - dtr::logic_error    misuse of the API (an empty handle, an index out of range, ...):
//!                       a bug in the caller, never caused by memory pressure.
//! - dtr::out_of_memory  the budget (or the device) cannot hold what one operator needs,
//!                       even after evicting everything evictable. Derives from std::bad_alloc,
//!                       as RMM's rmm::out_of_memory does, so generic OOM handlers see it.
//! - dtr::thrashing      recomputation passed the runtime's remat_limit.
//! - dtr::parse_error    malformed input to a reader (operator logs, graphs): names the
//!                       source, the line and the problem.
#pragma once

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace dtr {

//! @brief Misuse of the API: the message names the object and the broken rule.
class logic_error : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

//! @brief A memory request that cannot be satisfied under the budget.
//!
//! Thrown only when nothing evictable is left (or what is left cannot make room). The
//! figures describe the runtime at the moment of failure; the runtime itself is left
//! consistent and usable (strong guarantee for the failed call).
class out_of_memory : public std::bad_alloc {
public:
    //! Figures describing the failed request; all in bytes.
    struct details {
        std::size_t requested = 0;       //!< the allocation that could not be made
        std::size_t budget = 0;          //!< the runtime's budget at the time
        std::size_t resident = 0;        //!< bytes resident when the request failed
        std::size_t pinned = 0;          //!< resident bytes that could not be evicted
        std::size_t pinned_storages = 0; //!< number of storages behind `pinned`
        std::size_t largest_free = 0;    //!< largest contiguous free block (0: not tracked)
        std::size_t free_total = 0;      //!< total free bytes in the backend (0: not tracked)
    };

    out_of_memory(std::string message, details d) : message_(std::move(message)), details_(d) {}

    [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
    //! @brief The figures behind the message.
    [[nodiscard]] const details& info() const noexcept { return details_; }

private:
    std::string message_;
    details details_;
};

//! @brief Recomputation passed runtime_options::remat_limit: the budget is too tight for
//! the program to make progress at a reasonable cost. Thrown after a rematerialization
//! completes; the runtime stays consistent and usable (raise the limit or the budget).
class thrashing : public std::runtime_error {
public:
    thrashing(const std::string& message, double remat_cost)
        : std::runtime_error(message), remat_cost_(remat_cost) {}
    //! @brief Rematerialization cost (ns) since the allowance last restarted (construction,
    //! runtime::set_budget, runtime::set_remat_limit) when the limit was passed.
    [[nodiscard]] double remat_cost() const noexcept { return remat_cost_; }

private:
    double remat_cost_;
};

//! @brief Malformed input to one of the readers (logs, graphs).
class parse_error : public std::runtime_error {
public:
    //! @param source file name (or "<stream>"), @param line 1-based line number (0: unknown)
    parse_error(std::string source, std::size_t line, const std::string& problem)
        : std::runtime_error(compose(source, line, problem)),
          source_(std::move(source)),
          line_(line) {}

    [[nodiscard]] const std::string& source() const noexcept { return source_; }
    [[nodiscard]] std::size_t line() const noexcept { return line_; }

private:
    static std::string compose(const std::string& source, std::size_t line,
                               const std::string& problem) {
        std::string text = source;
        if (line != 0) {
            text += ':';
            text += std::to_string(line);
        }
        text += ": ";
        text += problem;
        return text;
    }

    std::string source_;
    std::size_t line_;
};

namespace detail {

[[noreturn]] inline void throw_logic_error(const std::string& message, const char* file, int line) {
    std::string where = file;
    // Keep messages short: only the path below include/ (or the file name) matters.
    if (auto pos = where.rfind("include/"); pos != std::string::npos) where.erase(0, pos + 8);
    std::string text = "dtr: ";
    text += message;
    text += " [";
    text += where;
    text += ':';
    text += std::to_string(line);
    text += ']';
    throw dtr::logic_error(text);
}

} // namespace detail
} // namespace dtr

//! @brief Checks a precondition of a public function; throws dtr::logic_error naming the
//! problem and the location when it does not hold. `message` is any expression convertible
//! to std::string and is evaluated only on failure.
#define DTR_EXPECTS(cond, message)                                           \
    do {                                                                     \
        if (!(cond)) [[unlikely]]                                            \
            ::dtr::detail::throw_logic_error((message), __FILE__, __LINE__); \
    } while (false)
