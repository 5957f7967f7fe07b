// SPDX-License-Identifier: Apache-2.0
#include <dtr_tools/json.hpp>
#include <dtr_tools/json_escape.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace json = dtr::json;
using namespace std::string_literals;

namespace {

// The json::error a text produces; fails the test when it parses.
json::error error_of(std::string_view text) {
    try {
        (void)json::parse(text);
    } catch (const json::error& e) {
        return e;
    }
    FAIL("parsed without error: " << std::string(text));
    return json::error("", 0, 0, 0);
}

bool contains(const std::string& haystack, std::string_view needle) {
    return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("literals and kinds") {
    CHECK(json::parse("null").is_null());
    CHECK(json::parse("true").as_bool());
    CHECK_FALSE(json::parse("false").as_bool());
    CHECK(json::parse(" \t\r\n 7 \n").as_int64() == 7);
    CHECK(json::parse("[]").type() == json::kind::array);
    CHECK(json::parse("{}").type() == json::kind::object);
    CHECK(json::parse("\"\"").as_string().empty());
    CHECK(json::value().is_null());
    CHECK(json::kind_name(json::kind::object) == "object");
}

TEST_CASE("integers keep their exact 64-bit value") {
    CHECK(json::parse("0").as_int64() == 0);
    CHECK(json::parse("-0").as_int64() == 0);
    CHECK(std::signbit(json::parse("-0").as_number()));
    CHECK(json::parse("9007199254740993").as_int64() == 9007199254740993LL); // 2^53 + 1
    CHECK(json::parse("9223372036854775807").as_int64() ==
          std::numeric_limits<std::int64_t>::max());
    CHECK(json::parse("-9223372036854775808").as_int64() ==
          std::numeric_limits<std::int64_t>::min());
    CHECK(json::parse("-9223372036854775808").is_int64());
    // Past int64: still a number, no longer an integer we can hand out.
    const auto big = json::parse("9223372036854775808");
    CHECK(big.as_number() == doctest::Approx(9.223372036854775808e18));
    CHECK_FALSE(big.is_int64());
    CHECK_THROWS_AS((void)big.as_int64(), json::type_error);
    CHECK_FALSE(json::parse("123456789012345678901234567890").is_int64());
    CHECK(json::parse("123456789012345678901234567890").as_number() ==
          doctest::Approx(1.2345678901234568e29));
}

TEST_CASE("fractions and exponents") {
    CHECK(json::parse("1.5").as_number() == 1.5);
    CHECK(json::parse("-2.5e3").as_number() == -2500.0);
    CHECK(json::parse("1E+2").as_number() == 100.0);
    CHECK(json::parse("1e-2").as_number() == doctest::Approx(0.01));
    CHECK(json::parse("0.1").as_number() == 0.1); // correctly rounded
    CHECK(json::parse("1.7976931348623157e308").as_number() == std::numeric_limits<double>::max());
    CHECK(json::parse("1.0").as_int64() == 1); // integral value
    CHECK(json::parse("1e3").as_int64() == 1000);
    CHECK_THROWS_AS((void)json::parse("1.5").as_int64(), json::type_error);
    CHECK_THROWS_AS((void)json::parse("1e19").as_int64(), json::type_error);
    CHECK_FALSE(json::parse("0.5").is_int64());
    // Too small to represent: rounds to zero, keeping the sign.
    CHECK(json::parse("1e-400").as_number() == 0.0);
    CHECK(std::signbit(json::parse("-1e-400").as_number()));
    CHECK(json::parse("0.000000000000000000000000000000001e-300").as_number() == 0.0);
    // Too large: an error, not infinity.
    CHECK(contains(error_of("1e400").problem(), "out of the range of double"));
    CHECK(contains(error_of("-1e309").problem(), "out of the range of double"));
    CHECK(contains(error_of("[1, 2e99999999999999999999]").problem(), "out of the range"));
    CHECK(error_of("[1, 2e400]").column() == 5);
}

TEST_CASE("strings: escapes, \\u, surrogate pairs and UTF-8") {
    CHECK(json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
    CHECK(json::parse(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
    CHECK(json::parse(R"("\uD83D\uDE00")").as_string() == "\xF0\x9F\x98\x80"); // U+1F600
    CHECK(json::parse(R"("\uDBFF\uDFFF")").as_string() == "\xF4\x8F\xBF\xBF"); // U+10FFFF
    CHECK(json::parse(R"("\u0000")").as_string() == "\0"s);
    CHECK(json::parse("\"h\xC3\xA9llo \xF0\x9F\x98\x80\"").as_string() ==
          "h\xC3\xA9llo \xF0\x9F\x98\x80");
    CHECK(json::parse("\"\x7f\"").as_string() == "\x7f"); // DEL needs no escape
}

TEST_CASE("arrays and objects keep document order") {
    const auto v = json::parse(R"({"b": [1, "x", null, [true]], "a": {"k": -1}, "b": 2})");
    const auto& members = v.as_object();
    REQUIRE(members.size() == 3);
    CHECK(members[0].first == "b");
    CHECK(members[1].first == "a");
    CHECK(members[2].first == "b");
    const auto& arr = members[0].second.as_array();
    REQUIRE(arr.size() == 4);
    CHECK(arr[1].as_string() == "x");
    CHECK(arr[2].is_null());
    CHECK(arr[3].as_array()[0].as_bool());
    // find(): the first of duplicate keys; nullptr when absent or not an object.
    REQUIRE(v.find("b") != nullptr);
    CHECK(v.find("b")->is_array());
    CHECK(v.find("a")->find("k")->as_int64() == -1);
    CHECK(v.find("zz") == nullptr);
    CHECK(arr[0].find("b") == nullptr);
}

TEST_CASE("type_error names expected and actual kind") {
    const auto v = json::parse("42");
    try {
        (void)v.as_string();
        FAIL("no throw");
    } catch (const dtr::logic_error& e) { // type_error is a dtr::logic_error
        CHECK(contains(e.what(), "expected string, got number"));
    }
    CHECK_THROWS_AS((void)json::parse("\"s\"").as_number(), json::type_error);
    CHECK_THROWS_AS((void)json::parse("1").as_array(), json::type_error);
    CHECK_THROWS_AS((void)json::parse("[]").as_object(), json::type_error);
    CHECK_THROWS_AS((void)json::parse("null").as_bool(), json::type_error);
    CHECK_THROWS_WITH_AS((void)json::parse("true").as_int64(), "json: expected number, got boolean",
                         json::type_error);
}

TEST_CASE("syntax errors name the problem and the position") {
    struct bad {
        std::string text;
        std::string problem; // substring of error::problem()
        std::size_t column;
    };
    const bad cases[] = {
        {"", "empty input", 1},
        {"   ", "empty input", 4},
        {"01", "leading zero", 1},
        {"-01", "leading zero", 2},
        {"-", "expected a digit", 2},
        {"+1", "unexpected '+'", 1},
        {"1.", "digit after '.'", 3},
        {".5", "unexpected '.'", 1},
        {"1e", "digit in exponent", 3},
        {"1e+", "digit in exponent", 4},
        {"NaN", "unexpected 'N'", 1},
        {"Infinity", "unexpected 'I'", 1},
        {"-Infinity", "expected a digit", 2},
        {"nul", "expected 'null'", 4},
        {"tru e", "expected 'true'", 4},
        {"falsey", "after the value", 6},
        {"1 2", "after the value", 3},
        {"{} x", "after the value", 4},
        {"[1,]", "trailing comma in array", 4},
        {"[1 2]", "expected ',' or ']'", 4},
        {"[1", "end of input in array", 3},
        {"[", "expected a value", 2},
        {R"({"a":1,})", "trailing comma in object", 8},
        {R"({a:1})", "expected a string key", 2},
        {R"({'a':1})", "expected a string key", 2},
        {R"({"a" 1})", "expected ':'", 6},
        {R"({"a":1 "b":2})", "expected ',' or '}'", 8},
        {R"({"a":})", "expected a value", 6},
        {"{\"a\":1", "end of input in object", 7},
        {"\"abc", "unterminated string", 1},
        {"\"abc\\", "unterminated string", 5},
        {"\"a\x01\"", "control character byte 0x01", 3},
        {"\"a\tb\"", "control character byte 0x09", 3},
        {"\"a\nb\"", "control character byte 0x0A", 3},
        {R"("\x")", "invalid escape 'x'", 3},
        {R"("\u12G4")", "invalid hex digit 'G'", 6},
        {R"("\u12"  )", "invalid hex digit '\"'", 6},
        {R"("\u12")", "truncated \\u escape", 4},
        {R"("\u1)", "truncated \\u escape", 4},
        {R"("\uD800")", "high surrogate", 2},
        {R"("\uD800\u0041")", "high surrogate", 8},
        {R"("\uD800x")", "high surrogate", 2},
        {R"("\uDC00")", "lone low surrogate", 2},
        {"\"\xC0\x80\"", "invalid UTF-8 byte 0xC0", 2},         // overlong NUL
        {"\"\xE0\x80\xAF\"", "invalid UTF-8 byte 0xE0", 2},     // overlong '/'
        {"\"\xED\xA0\x80\"", "invalid UTF-8 byte 0xED", 2},     // encoded surrogate
        {"\"\xF4\x90\x80\x80\"", "invalid UTF-8 byte 0xF4", 2}, // above U+10FFFF
        {"\"\xF5\x80\x80\x80\"", "invalid UTF-8 byte 0xF5", 2},
        {"\"\xE2\x82\"", "invalid UTF-8 byte 0xE2", 2}, // truncated sequence
        {"\"\x80\"", "invalid UTF-8 byte 0x80", 2},     // stray continuation
        {"\xEF\xBB\xBF{}", "unexpected byte 0xEF", 1},  // BOM
        {"/* c */ 1", "unexpected '/'", 1},
        {"[1] // c", "after the value", 5},
        {"'a'", "unexpected '''", 1},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const json::error e = error_of(c.text);
        CHECK(contains(e.problem(), c.problem));
        CHECK(e.line() == 1);
        CHECK(e.column() == c.column);
        CHECK(e.offset() == c.column - 1);
        CHECK(contains(e.what(), "column " + std::to_string(c.column)));
    }
}

TEST_CASE("line and column count from the last newline") {
    const json::error e = error_of("{\n  \"a\": 1,\n  \"b\": tru\n}");
    CHECK(e.line() == 3);
    CHECK(e.column() == 11);
    CHECK(std::string(e.what()) == "json: invalid literal, expected 'true' at line 3, column 11");
}

TEST_CASE("nesting is capped with a clear error instead of a stack overflow") {
    const std::string ok = std::string(json::max_depth, '[') + std::string(json::max_depth, ']');
    CHECK(json::parse(ok).is_array());
    const std::string deep =
        std::string(json::max_depth + 1, '[') + std::string(json::max_depth + 1, ']');
    const json::error e = error_of(deep);
    CHECK(contains(e.problem(), "nesting deeper than 512"));
    CHECK(e.column() == json::max_depth + 1);
    // Far deeper inputs fail the same way, quickly.
    CHECK(contains(error_of(std::string(1'000'000, '[')).problem(), "nesting deeper"));
    CHECK(contains(error_of(std::string(100'000, '{')).problem(), "expected a string key"));
    std::string objects;
    for (std::size_t i = 0; i <= json::max_depth; ++i) objects += "{\"a\":";
    CHECK(contains(error_of(objects).problem(), "nesting deeper"));
}

TEST_CASE("a reusable parser recovers after an error") {
    json::parser p;
    CHECK(p.parse("[1, [2, 3]]") == json::parse("[1,[2,3]]"));
    CHECK_THROWS_AS((void)p.parse("[1, [2, {\"a\": }]]"), json::error);
    const auto v = p.parse(R"({"x": [4, 5], "y": {}})");
    CHECK(v.find("x")->as_array().size() == 2);
    CHECK(v.find("y")->as_object().empty());
}

TEST_CASE("values can be built and compared") {
    using json::value;
    value::object_type members;
    members.emplace_back("n", value(3));
    members.emplace_back("s", value("x"));
    members.emplace_back("a", value(value::array_type{value(true), value(), value(2.5)}));
    const value built(std::move(members));
    CHECK(built == json::parse(R"({"n": 3, "s": "x", "a": [true, null, 2.5]})"));
    CHECK_FALSE(built == json::parse(R"({"s": "x", "n": 3, "a": [true, null, 2.5]})"));
    CHECK(value(3) == value(3.0));
    CHECK_FALSE(value(1) == value(true));
    CHECK(value(std::uint64_t{1} << 63).as_number() == 9223372036854775808.0);
    CHECK_FALSE(value(std::uint64_t{1} << 63).is_int64());
    CHECK(value('A').as_int64() == 65);
}

TEST_CASE("nested containers are assembled from the parser's scratch stacks correctly") {
    using json::value;
    const auto v = json::parse(
        R"({"a\u0062": {"x": {"y": [1, {"z": []}]}, "w": [[], [2, 3], {}]}, "e": [{"f": "g"}, 4]})");
    const auto& top = v.as_object();
    REQUIRE(top.size() == 2);
    CHECK(top[0].first == "ab");
    const value& ab = top[0].second;
    REQUIRE(ab.as_object().size() == 2);
    const value& y = *ab.find("x")->find("y");
    REQUIRE(y.as_array().size() == 2);
    CHECK(y.as_array()[0].as_int64() == 1);
    CHECK(y.as_array()[1].find("z")->as_array().empty());
    const auto& w = ab.find("w")->as_array();
    REQUIRE(w.size() == 3);
    CHECK(w[0].as_array().empty());
    CHECK(w[1] == json::parse("[2,3]"));
    CHECK(w[2].as_object().empty());
    const auto& e = v.find("e")->as_array();
    REQUIRE(e.size() == 2);
    CHECK(e[0].find("f")->as_string() == "g");
    CHECK(e[1].as_int64() == 4);
    // Long strings, escapes at both ends, and multi-byte UTF-8 mixed with plain runs.
    const std::string long_plain(1000, 'q');
    CHECK(json::parse("\"" + long_plain + "\"").as_string() == long_plain);
    CHECK(json::parse(R"("\n)" + long_plain + R"(\t")").as_string() == "\n" + long_plain + "\t");
    CHECK(json::parse("\"a\xC3\xA9\\u00e9b\"").as_string() ==
          "a\xC3\xA9\xC3\xA9"
          "b");
}

TEST_CASE("escape: what the tools write reads back as the same string") {
    // Quotes, backslashes, an error message's line breaks and tab, other control bytes and
    // UTF-8: each must come back unchanged through the reader (a dropped byte would lose part
    // of a message).
    const std::string samples[] = {
        "",
        "plain.log",
        "say \"hi\" \\ back\\slash",
        "line one\nline two\r\n\tindented",
        std::string("nul\0and\x01\x1f end", 13),
        "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80",
    };
    for (const std::string& s : samples) {
        std::string text = "\"";
        text += json::escape(s);
        text += '"';
        INFO("text: " << text);
        CHECK(json::parse(text).as_string() == s);
        for (const char c : json::escape(s)) CHECK(static_cast<unsigned char>(c) >= 0x20);
    }
    CHECK(json::escape("a\nb") == "a\\u000ab");
    CHECK(json::escape("\x1f") == "\\u001f");
}
