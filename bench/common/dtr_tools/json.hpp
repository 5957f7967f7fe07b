// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A small, strict DOM JSON parser (RFC 8259) for the library's readers.
//!
//! The readers (DTR operator logs, Checkmate graphs) need exactly one thing from JSON: turn
//! a text into a tree they can validate field by field, and say precisely where a text is
//! broken. Pulling in a general-purpose JSON library for that would make a header-only
//! library depend on one, so this is a deliberately small parser:
//!
//! - strict RFC 8259 grammar: no comments, no trailing commas, no leading zeros, no NaN or
//!   Infinity, no single quotes, nothing after the value but whitespace;
//! - strings must be valid UTF-8 and may not hold raw control characters; `\uXXXX` escapes
//!   (surrogate pairs included) are decoded to UTF-8; a lone surrogate is an error;
//! - numbers keep their exact 64-bit integer value when the literal is an integer that fits,
//!   so ids and byte counts beyond 2^53 survive; other numbers are the nearest double;
//!   magnitudes beyond double's range are errors (tiny ones round to zero);
//! - nesting is capped at json::max_depth so hostile input gets an error, not a stack overflow;
//! - objects keep their members in document order; duplicate keys are kept (RFC 8259 leaves
//!   them to the application) and value::find() returns the first.
//!
//! Errors are json::error with a byte offset and a 1-based line and column (in bytes), so a
//! reader can point at the exact spot.
#pragma once

#include <dtr/error.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace dtr::json {

//! @brief The six JSON kinds; the order matches value's internal storage.
enum class kind : std::uint8_t { null, boolean, number, string, array, object };

//! @brief Deepest nesting of arrays and objects parse() accepts.
inline constexpr std::size_t max_depth = 512;

//! @brief Lower-case name of a kind, for messages ("null", "boolean", ...).
[[nodiscard]] constexpr std::string_view kind_name(kind k) noexcept {
    switch (k) {
        case kind::null:
            return "null";
        case kind::boolean:
            return "boolean";
        case kind::number:
            return "number";
        case kind::string:
            return "string";
        case kind::array:
            return "array";
        case kind::object:
            return "object";
    }
    return "unknown";
}

//! @brief A value was read as the wrong kind (as_string() on a number, ...): a bug in the
//! caller's validation, hence a logic_error. The message names expected and actual kind.
class type_error : public dtr::logic_error {
public:
    using dtr::logic_error::logic_error;
};

//! @brief A syntax error: the text is not one valid JSON value.
//!
//! what() reads "json: <problem> at line L, column C"; problem(), offset(), line() and
//! column() give the parts so a caller can word its own message.
class error : public std::runtime_error {
public:
    error(std::string problem, std::size_t offset, std::size_t line, std::size_t column)
        : std::runtime_error("json: " + problem + " at line " + std::to_string(line) + ", column " +
                             std::to_string(column)),
          problem_(std::move(problem)),
          offset_(offset),
          line_(line),
          column_(column) {}

    //! @brief The problem alone, without the position.
    [[nodiscard]] const std::string& problem() const noexcept { return problem_; }
    //! @brief 0-based byte offset of the problem in the text.
    [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
    //! @brief 1-based line of the problem.
    [[nodiscard]] std::size_t line() const noexcept { return line_; }
    //! @brief 1-based column of the problem, counted in bytes.
    [[nodiscard]] std::size_t column() const noexcept { return column_; }

private:
    std::string problem_;
    std::size_t offset_;
    std::size_t line_;
    std::size_t column_;
};

class parser;

//! @brief One JSON value (a tree owning its children).
class value {
public:
    using array_type = std::vector<value>;
    using object_type = std::vector<std::pair<std::string, value>>;

    //! @brief null.
    value() noexcept = default;
    explicit value(std::nullptr_t) noexcept {}
    explicit value(bool b) noexcept : data_(b) {}
    explicit value(double d) noexcept : data_(number_rep{d, 0, false}) {}
    //! @brief An integer, kept exact when it fits std::int64_t.
    template <std::integral I>
        requires(!std::same_as<I, bool>)
    explicit value(I i) noexcept
        : data_(in_int64_range(i)
                    ? number_rep{static_cast<double>(i), static_cast<std::int64_t>(i), true}
                    : number_rep{static_cast<double>(i), 0, false}) {}
    explicit value(std::string s) noexcept : data_(std::move(s)) {}
    explicit value(const char* s) : data_(std::string(s)) {}
    explicit value(array_type a) noexcept : data_(std::move(a)) {}
    explicit value(object_type o) noexcept : data_(std::move(o)) {}

    [[nodiscard]] kind type() const noexcept { return static_cast<kind>(data_.index()); }
    [[nodiscard]] bool is_null() const noexcept { return type() == kind::null; }
    [[nodiscard]] bool is_bool() const noexcept { return type() == kind::boolean; }
    [[nodiscard]] bool is_number() const noexcept { return type() == kind::number; }
    [[nodiscard]] bool is_string() const noexcept { return type() == kind::string; }
    [[nodiscard]] bool is_array() const noexcept { return type() == kind::array; }
    [[nodiscard]] bool is_object() const noexcept { return type() == kind::object; }

    //! @brief True when as_int64() would succeed: a number whose value is an integer in
    //! std::int64_t's range.
    [[nodiscard]] bool is_int64() const noexcept {
        const auto* n = std::get_if<number_rep>(&data_);
        return n && (n->exact || double_fits_int64(n->d));
    }

    //! @brief @throws type_error unless a boolean.
    [[nodiscard]] bool as_bool() const { return get<bool>(kind::boolean); }

    //! @brief The nearest double. @throws type_error unless a number.
    [[nodiscard]] double as_number() const { return get<number_rep>(kind::number).d; }

    //! @brief The number as an exact integer.
    //!
    //! Integer literals that fit are exact. Other literals ("1.0", "1e3") are accepted when
    //! their double value is integral, so precision beyond 2^53 is already lost for them.
    //! @throws type_error unless a number with an integral value in std::int64_t's range.
    [[nodiscard]] std::int64_t as_int64() const {
        const auto& n = get<number_rep>(kind::number);
        if (n.exact) return n.i;
        if (!double_fits_int64(n.d))
            throw type_error("json: expected an integer in int64 range, got number " +
                             std::to_string(n.d));
        return static_cast<std::int64_t>(n.d);
    }

    //! @brief @throws type_error unless a string.
    [[nodiscard]] const std::string& as_string() const { return get<std::string>(kind::string); }
    //! @brief @throws type_error unless an array.
    [[nodiscard]] const array_type& as_array() const { return get<array_type>(kind::array); }
    //! @brief Members in document order. @throws type_error unless an object.
    [[nodiscard]] const object_type& as_object() const { return get<object_type>(kind::object); }

    //! @brief The first member named `key`; nullptr when absent or when this is no object.
    //! Complexity: linear in the number of members (objects in logs and graphs are small).
    [[nodiscard]] const value* find(std::string_view key) const noexcept {
        const auto* o = std::get_if<object_type>(&data_);
        if (!o) return nullptr;
        for (const auto& [k, v] : *o)
            if (k == key) return &v;
        return nullptr;
    }

    //! @brief Structural equality; numbers compare exactly when both are exact integers,
    //! otherwise by their double values. Objects compare member by member in order.
    friend bool operator==(const value& a, const value& b) noexcept {
        if (a.data_.index() != b.data_.index()) return false;
        if (const auto* x = std::get_if<number_rep>(&a.data_)) {
            const auto& y = std::get<number_rep>(b.data_);
            return (x->exact && y.exact) ? x->i == y.i : x->d == y.d;
        }
        return a.data_ == b.data_;
    }

private:
    friend class parser;

    struct number_rep {
        double d;
        std::int64_t i; // meaningful only when exact
        bool exact;     // the literal was an integer that fits std::int64_t
        friend bool operator==(const number_rep&, const number_rep&) = default;
    };
    explicit value(number_rep n) noexcept : data_(n) {}

    template <std::integral I>
    static constexpr bool in_int64_range(I i) noexcept {
        // std::in_range rejects character types, which value(I) accepts.
        if constexpr (std::is_signed_v<I>)
            return sizeof(I) <= sizeof(std::int64_t) ||
                   (i >= std::numeric_limits<std::int64_t>::min() &&
                    i <= std::numeric_limits<std::int64_t>::max());
        else
            return static_cast<unsigned long long>(i) <=
                   static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max());
    }
    static bool double_fits_int64(double d) noexcept {
        // 2^63 is exactly representable; every double below it that is integral fits.
        return std::trunc(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    }

    template <class T>
    const T& get(kind expected) const {
        if (const auto* p = std::get_if<T>(&data_)) return *p;
        throw type_error("json: expected " + std::string(kind_name(expected)) + ", got " +
                         std::string(kind_name(type())));
    }

    // Alternative order must match enum kind: type() is the index.
    std::variant<std::monostate, bool, number_rep, std::string, array_type, object_type> data_;
};

//! @brief A reusable parser: keeps its scratch memory between documents, so parsing many
//! small documents (one per log line) does not pay the allocation warm-up each time.
//!
//! Recursive descent over a contiguous text; recursion depth is bounded by max_depth.
class parser {
public:
    //! @brief Parses exactly one JSON value; whitespace around it is allowed.
    //!
    //! Complexity: linear in text.size().
    //! @throws json::error on any syntax error; std::bad_alloc when memory runs out.
    [[nodiscard]] value parse(std::string_view text) {
        begin_ = text.data();
        p_ = begin_;
        end_ = begin_ + text.size();
        depth_ = 0;
        items_.clear(); // non-empty only after an exception
        members_.clear();
        skip_ws();
        if (p_ == end_) fail(p_, "empty input, expected a value");
        value v = parse_value();
        skip_ws();
        if (p_ != end_) fail(p_, "unexpected " + describe(p_) + " after the value");
        return v;
    }

private:
    const char* begin_ = nullptr;
    const char* p_ = nullptr;
    const char* end_ = nullptr;
    std::size_t depth_ = 0;
    value::array_type items_;    // scratch stack of array elements being parsed
    value::object_type members_; // scratch stack of object members being parsed

    [[noreturn]] void fail(const char* at, std::string problem) const {
        // Line and column are only needed on failure, so they are computed here rather than
        // tracked on every character.
        std::size_t line = 1;
        const char* line_start = begin_;
        for (const char* q = begin_; q < at; ++q)
            if (*q == '\n') {
                ++line;
                line_start = q + 1;
            }
        throw error(std::move(problem), static_cast<std::size_t>(at - begin_), line,
                    static_cast<std::size_t>(at - line_start) + 1);
    }

    std::string describe(const char* at) const {
        if (at >= end_) return "end of input";
        const auto c = static_cast<unsigned char>(*at);
        if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
        static constexpr char hex[] = "0123456789ABCDEF";
        return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
    }

    void skip_ws() noexcept {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }

    static bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

    value parse_value() {
        if (p_ == end_) fail(p_, "unexpected end of input, expected a value");
        switch (*p_) {
            case '{':
                return parse_object();
            case '[':
                return parse_array();
            case '"':
                return value(parse_string());
            case 't':
                expect_literal("true");
                return value(true);
            case 'f':
                expect_literal("false");
                return value(false);
            case 'n':
                expect_literal("null");
                return value();
            default:
                if (*p_ == '-' || is_digit(*p_)) return parse_number();
                fail(p_, "unexpected " + describe(p_) + ", expected a value");
        }
    }

    void expect_literal(std::string_view word) {
        if (static_cast<std::size_t>(end_ - p_) < word.size() ||
            std::memcmp(p_, word.data(), word.size()) != 0) {
            // Point at the first character that differs: that is what the user must fix.
            const char* q = p_;
            for (char w : word) {
                if (q == end_ || *q != w) break;
                ++q;
            }
            fail(q, "invalid literal, expected '" + std::string(word) + "'");
        }
        p_ += word.size();
    }

    void enter(const char* at) {
        if (++depth_ > max_depth)
            fail(at, "nesting deeper than " + std::to_string(max_depth) + " levels");
    }

    // Elements and members are gathered on scratch stacks shared by all nesting levels and
    // then moved into a vector of exactly the right size: one allocation per container
    // instead of a growth sequence (most objects in logs have 2-5 members).
    value parse_array() {
        enter(p_);
        ++p_; // '['
        const std::size_t base = items_.size();
        skip_ws();
        if (p_ != end_ && *p_ == ']') {
            ++p_;
            --depth_;
            return value(value::array_type{});
        }
        for (;;) {
            items_.push_back(parse_value());
            skip_ws();
            if (p_ == end_) fail(p_, "unexpected end of input in array, expected ',' or ']'");
            if (*p_ == ',') {
                ++p_;
                skip_ws();
                if (p_ != end_ && *p_ == ']') fail(p_, "trailing comma in array");
                continue;
            }
            if (*p_ == ']') break;
            fail(p_, "unexpected " + describe(p_) + " in array, expected ',' or ']'");
        }
        ++p_;
        --depth_;
        const auto first = items_.begin() + static_cast<std::ptrdiff_t>(base);
        value::array_type items(std::make_move_iterator(first),
                                std::make_move_iterator(items_.end()));
        items_.erase(first, items_.end());
        return value(std::move(items));
    }

    value parse_object() {
        enter(p_);
        ++p_; // '{'
        const std::size_t base = members_.size();
        skip_ws();
        if (p_ != end_ && *p_ == '}') {
            ++p_;
            --depth_;
            return value(value::object_type{});
        }
        for (;;) {
            if (p_ == end_ || *p_ != '"')
                fail(p_, "unexpected " + describe(p_) + ", expected a string key");
            // Build the member in its stack slot: saves moving the key around. Nested
            // values may grow members_, so the slot is addressed by index.
            const std::size_t slot = members_.size();
            parse_string_into(members_.emplace_back().first);
            skip_ws();
            if (p_ == end_ || *p_ != ':')
                fail(p_, "unexpected " + describe(p_) + ", expected ':' after object key");
            ++p_;
            skip_ws();
            value v = parse_value();
            members_[slot].second = std::move(v);
            skip_ws();
            if (p_ == end_) fail(p_, "unexpected end of input in object, expected ',' or '}'");
            if (*p_ == ',') {
                ++p_;
                skip_ws();
                if (p_ != end_ && *p_ == '}') fail(p_, "trailing comma in object");
                continue;
            }
            if (*p_ == '}') break;
            fail(p_, "unexpected " + describe(p_) + " in object, expected ',' or '}'");
        }
        ++p_;
        --depth_;
        const auto first = members_.begin() + static_cast<std::ptrdiff_t>(base);
        value::object_type members(std::make_move_iterator(first),
                                   std::make_move_iterator(members_.end()));
        members_.erase(first, members_.end());
        return value(std::move(members));
    }

    unsigned parse_hex4(const char* at) const {
        if (end_ - at < 4) fail(at, "truncated \\u escape, expected 4 hex digits");
        unsigned cp = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = at[k];
            unsigned d;
            if (c >= '0' && c <= '9')
                d = static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f')
                d = static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                d = static_cast<unsigned>(c - 'A' + 10);
            else
                fail(at + k, "invalid hex digit " + describe(at + k) + " in \\u escape");
            cp = cp * 16 + d;
        }
        return cp;
    }

    static void append_utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }

    // Decodes one escape starting at the backslash; advances p_ past it.
    void parse_escape(std::string& out) {
        const char* at = p_;
        if (end_ - p_ < 2) fail(p_, "unterminated string");
        const char c = p_[1];
        p_ += 2;
        switch (c) {
            case '"':
                out.push_back('"');
                return;
            case '\\':
                out.push_back('\\');
                return;
            case '/':
                out.push_back('/');
                return;
            case 'b':
                out.push_back('\b');
                return;
            case 'f':
                out.push_back('\f');
                return;
            case 'n':
                out.push_back('\n');
                return;
            case 'r':
                out.push_back('\r');
                return;
            case 't':
                out.push_back('\t');
                return;
            case 'u':
                break;
            default:
                fail(at + 1, "invalid escape " + describe(at + 1) + " in string");
        }
        unsigned cp = parse_hex4(p_);
        p_ += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail(at, "lone low surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            // UTF-16 in JSON text: a high surrogate is only meaningful with its low half.
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u')
                fail(at, "high surrogate in \\u escape not followed by a low surrogate");
            const unsigned lo = parse_hex4(p_ + 2);
            if (lo < 0xDC00 || lo > 0xDFFF)
                fail(p_, "high surrogate in \\u escape not followed by a low surrogate");
            p_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        append_utf8(out, cp);
    }

    // Length of the valid UTF-8 sequence starting at p (lead byte >= 0x80), or 0.
    // Follows Unicode Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF.
    std::size_t utf8_length(const char* p) const noexcept {
        const auto at = [&](std::size_t k) {
            return p + k < end_ ? static_cast<unsigned char>(p[k]) : 0u;
        };
        const auto cont = [](unsigned b) { return b >= 0x80 && b <= 0xBF; };
        const unsigned b0 = at(0);
        const unsigned b1 = at(1);
        if (b0 >= 0xC2 && b0 <= 0xDF) return cont(b1) ? 2 : 0;
        if (b0 >= 0xE0 && b0 <= 0xEF) {
            const bool ok1 = b0 == 0xE0   ? (b1 >= 0xA0 && b1 <= 0xBF)
                             : b0 == 0xED ? (b1 >= 0x80 && b1 <= 0x9F)
                                          : cont(b1);
            return ok1 && cont(at(2)) ? 3 : 0;
        }
        if (b0 >= 0xF0 && b0 <= 0xF4) {
            const bool ok1 = b0 == 0xF0   ? (b1 >= 0x90 && b1 <= 0xBF)
                             : b0 == 0xF4 ? (b1 >= 0x80 && b1 <= 0x8F)
                                          : cont(b1);
            return ok1 && cont(at(2)) && cont(at(3)) ? 4 : 0;
        }
        return 0;
    }

    std::string parse_string() {
        std::string out;
        parse_string_into(out);
        return out;
    }

    // Appends the string starting at the opening quote to `out`; advances p_ past it.
    void parse_string_into(std::string& out) {
        const char* const open = p_;
        // A local cursor: writing p_ back on every byte would keep it in memory (the
        // compiler cannot rule out that the string's buffer aliases it).
        const char* q = p_ + 1;
        const char* run = q; // start of the pending stretch copied verbatim
        for (;;) {
            // The common case: printable ASCII other than '"' and '\\'.
            while (q != end_ && plain_byte(*q)) ++q;
            if (q == end_) fail(open, "unterminated string");
            const auto c = static_cast<unsigned char>(*q);
            if (c == '"') {
                out.append(run, q);
                p_ = q + 1;
                return;
            }
            if (c == '\\') {
                out.append(run, q);
                p_ = q;
                parse_escape(out);
                q = run = p_;
            } else if (c < 0x20) {
                fail(q, "unescaped control character " + describe(q) + " in string");
            } else {
                const std::size_t n = utf8_length(q);
                if (n == 0) fail(q, "invalid UTF-8 " + describe(q) + " in string");
                q += n;
            }
        }
    }

    static bool plain_byte(char ch) noexcept {
        static constexpr auto table = [] {
            std::array<bool, 256> t{};
            for (unsigned c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
            return t;
        }();
        return table[static_cast<unsigned char>(ch)];
    }

    value parse_number() {
        const char* start = p_;
        const bool negative = *p_ == '-';
        if (negative) ++p_;
        if (p_ == end_ || !is_digit(*p_))
            fail(p_, "unexpected " + describe(p_) + ", expected a digit");
        const char* int_begin = p_;
        if (*p_ == '0') {
            ++p_;
            if (p_ != end_ && is_digit(*p_)) fail(int_begin, "leading zero in number");
        } else {
            while (p_ != end_ && is_digit(*p_)) ++p_;
        }
        const char* int_end = p_;
        bool integer = true;
        const char* frac_begin = nullptr;
        const char* frac_end = nullptr;
        if (p_ != end_ && *p_ == '.') {
            integer = false;
            ++p_;
            if (p_ == end_ || !is_digit(*p_))
                fail(p_, "unexpected " + describe(p_) + ", expected a digit after '.'");
            frac_begin = p_;
            while (p_ != end_ && is_digit(*p_)) ++p_;
            frac_end = p_;
        }
        long long exp10 = 0;
        if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
            integer = false;
            ++p_;
            bool exp_negative = false;
            if (p_ != end_ && (*p_ == '+' || *p_ == '-')) exp_negative = *p_++ == '-';
            if (p_ == end_ || !is_digit(*p_))
                fail(p_, "unexpected " + describe(p_) + ", expected a digit in exponent");
            while (p_ != end_ && is_digit(*p_)) {
                // Saturate: the value only matters to tell overflow from underflow below.
                if (exp10 < 1'000'000'000) exp10 = exp10 * 10 + (*p_ - '0');
                ++p_;
            }
            if (exp_negative) exp10 = -exp10;
        }

        const auto digits = static_cast<std::size_t>(int_end - int_begin);
        if (integer && digits <= 19) {
            // Fast exact path: 19 decimal digits always fit std::uint64_t, and converting
            // the exact integer to double rounds it correctly.
            std::uint64_t u = 0;
            for (const char* q = int_begin; q != int_end; ++q)
                u = u * 10 + static_cast<std::uint64_t>(*q - '0');
            const double d = negative ? -static_cast<double>(u) : static_cast<double>(u);
            constexpr auto max =
                static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
            if (!negative && u <= max)
                return value(value::number_rep{d, static_cast<std::int64_t>(u), true});
            if (negative && u <= max + 1)
                return value(value::number_rep{d, static_cast<std::int64_t>(0 - u), true});
            return value(value::number_rep{d, 0, false});
        }

        double d = 0;
        const auto [ptr, ec] = std::from_chars(start, p_, d);
        if (ec == std::errc::result_out_of_range) {
            // Decimal exponent of the leading significant digit decides the direction.
            long long lead = 0;
            if (*int_begin != '0') {
                lead = static_cast<long long>(digits) - 1;
            } else {
                const char* q = frac_begin;
                while (q && q != frac_end && *q == '0') ++q;
                lead = frac_begin ? -static_cast<long long>(q - frac_begin) - 1 : 0;
            }
            if (lead + exp10 >= 0) fail(start, "number out of the range of double");
            d = negative ? -0.0 : 0.0; // underflow: rounds to zero, as IEEE arithmetic would
        } else if (ec != std::errc{} || ptr != p_) {
            fail(start, "malformed number"); // unreachable after the grammar check above
        } else if (std::isinf(d)) {
            fail(start, "number out of the range of double");
        }
        return value(value::number_rep{d, 0, false});
    }
};

//! @brief Parses exactly one JSON value; whitespace around it is allowed.
//!
//! Complexity: linear in text.size(); recursion depth at most max_depth.
//! @throws json::error on any syntax error (with offset, line and column);
//! std::bad_alloc when memory runs out.
[[nodiscard]] inline value parse(std::string_view text) { return parser().parse(text); }

} // namespace dtr::json
