// SPDX-License-Identifier: Apache-2.0
#include <dtr_tools/replay/log_reader.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace replay = dtr::replay;
namespace instr = dtr::replay::instr;

namespace {

// ---- builders for log lines, so each test reads as the log it feeds ----------------------

std::string list(std::initializer_list<std::string_view> names) {
    std::string s = "[";
    for (auto n : names) s += (s.size() > 1 ? ",\"" : "\"") + std::string(n) + "\"";
    return s + "]";
}

const std::string start = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})"
                          "\n";
const std::string backward = R"({"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"})"
                             "\n";

std::string memory(std::string_view name, std::string_view bytes) {
    return R"({"INSTRUCTION":"MEMORY","MEMORY":")" + std::string(bytes) + R"(","NAME":")" +
           std::string(name) + "\"}\n";
}
std::string alias(std::string_view name, std::string_view index) {
    return R"({"ALIAS":")" + std::string(index) + R"(","INSTRUCTION":"ALIAS","NAME":")" +
           std::string(name) + "\"}\n";
}
std::string constant(std::string_view name, std::string_view bytes = "8") {
    return R"({"INSTRUCTION":"CONSTANT","NAME":")" + std::string(name) + "\"}\n" +
           memory(name, bytes);
}
// The CALL line alone.
std::string call_line(std::string_view op, const std::string& args, const std::string& results,
                      std::string_view time = "100") {
    return R"({"ARGS":)" + args + R"(,"INSTRUCTION":"CALL","NAME":")" + std::string(op) +
           R"(","RESULT":)" + results + R"(,"TIME":")" + std::string(time) + "\"}\n";
}
// A whole one-result CALL group.
std::string call1(std::string_view op, const std::string& args, std::string_view result,
                  std::string_view bytes = "16", std::string_view alias_index = "-1") {
    return call_line(op, args, list({result})) + memory(result, bytes) + alias(result, alias_index);
}
std::string mutate(std::string_view op, const std::string& args, std::string_view indices,
                   std::string_view time = "50") {
    return R"({"ARGS":)" + args + R"(,"INSTRUCTION":"MUTATE","MUTATE":)" + std::string(indices) +
           R"(,"NAME":")" + std::string(op) + R"(","TIME":")" + std::string(time) + "\"}\n";
}
std::string copy(std::string_view dst, std::string_view src) {
    return R"({"DST":")" + std::string(dst) + R"(","INSTRUCTION":"COPY","SRC":")" +
           std::string(src) + "\"}\n";
}
std::string copy_from(std::string_view dst, std::string_view src) {
    return R"({"DST":")" + std::string(dst) + R"(","INSTRUCTION":"COPY_FROM","SRC":")" +
           std::string(src) + "\"}\n";
}
std::string release(std::string_view name) {
    return R"({"INSTRUCTION":"RELEASE","NAME":")" + std::string(name) + "\"}\n";
}

// ---- reading ---------------------------------------------------------------------------

struct read_all {
    std::istringstream in;
    replay::log_reader reader;
    std::vector<replay::record> records;

    explicit read_all(const std::string& text, replay::log_reader_options options = {})
        : in(text), reader(in, "t.log", options) {
        replay::record r;
        while (reader.next(r)) records.push_back(r);
    }
    template <class T>
    const T& at(std::size_t k) const {
        REQUIRE(k < records.size());
        REQUIRE(std::holds_alternative<T>(records[k].op));
        return std::get<T>(records[k].op);
    }
    const std::string& name(replay::name_id id) const { return reader.name(id); }
};

// The parse_error a log produces; fails the test when it reads cleanly.
dtr::parse_error error_of(const std::string& text, replay::log_reader_options options = {}) {
    std::istringstream in(text);
    replay::log_reader reader(in, "t.log", options);
    try {
        replay::record r;
        while (reader.next(r)) {}
    } catch (const dtr::parse_error& e) {
        return e;
    }
    FAIL("read without error:\n" << text);
    return dtr::parse_error("", 0, "");
}

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

} // namespace

TEST_CASE("ANNOTATE STEP marks where another training step begins") {
    const std::string step = R"({"ANNOTATION":"STEP","INSTRUCTION":"ANNOTATE"})"
                             "\n";
    read_all r(start + constant("w", "8") + backward + step + backward);
    REQUIRE(r.records.size() == 5);
    CHECK(r.at<instr::annotate>(2).what == replay::annotation::backward);
    CHECK(r.at<instr::annotate>(3).what == replay::annotation::step);
    CHECK(r.records[3].line == 5);
    CHECK(r.at<instr::annotate>(4).what == replay::annotation::backward);
}

TEST_CASE("every instruction kind becomes a typed record") {
    const std::string text = start +                                                          // 1
                             constant("w", "4096") +                                          // 2-3
                             constant("x", "1024") +                                          // 4-5
                             call_line("split", list({"x", "w"}), list({"a", "b"}), "1234") + // 6
                             memory("a", "512") + alias("a", "0") +                           // 7-8
                             memory("b", "2048") + alias("b", "-1") +        // 9-10
                             mutate("add_", list({"b", "a"}), "[0]", "77") + // 11
                             copy("c", "b") +                                // 12
                             copy_from("c", "w") +                           // 13
                             backward +                                      // 14
                             release("a");                                   // 15
    read_all r(text);
    REQUIRE(r.records.size() == 9);

    CHECK(r.at<instr::annotate>(0).what == replay::annotation::start);
    CHECK(r.records[0].line == 1);

    const auto& w = r.at<instr::constant>(1);
    CHECK(r.name(w.name) == "w");
    CHECK(w.bytes == 4096);
    CHECK(r.records[1].line == 2);
    CHECK(r.records[2].line == 4);

    const auto& c = r.at<instr::call>(3);
    CHECK(r.records[3].line == 6);
    CHECK(r.reader.op_name(c.op) == "split");
    CHECK(c.time_ns == 1234);
    REQUIRE(c.args.size() == 2);
    CHECK(r.name(c.args[0]) == "x");
    CHECK(r.name(c.args[1]) == "w");
    REQUIRE(c.results.size() == 2);
    CHECK(r.name(c.results[0].name) == "a");
    CHECK(c.results[0].bytes == 512);
    CHECK(c.results[0].alias == 0);
    CHECK(c.results[0].is_view());
    CHECK(r.name(c.results[1].name) == "b");
    CHECK(c.results[1].bytes == 2048);
    CHECK(c.results[1].alias == -1);
    CHECK_FALSE(c.results[1].is_view());

    const auto& m = r.at<instr::mutate>(4);
    CHECK(r.records[4].line == 11);
    CHECK(r.reader.op_name(m.op) == "add_");
    CHECK(m.time_ns == 77);
    REQUIRE(m.args.size() == 2);
    CHECK(r.name(m.args[0]) == "b");
    CHECK(m.mutated == std::vector<std::uint32_t>{0});

    const auto& cp = r.at<instr::copy>(5);
    CHECK(r.name(cp.dst) == "c");
    CHECK(r.name(cp.src) == "b");
    const auto& cf = r.at<instr::copy_from>(6);
    CHECK(r.name(cf.dst) == "c");
    CHECK(r.name(cf.src) == "w");
    CHECK(r.at<instr::annotate>(7).what == replay::annotation::backward);
    CHECK(r.name(r.at<instr::release>(8).name) == "a");
    CHECK(r.records[8].line == 15);

    // Ids are dense, in order of definition; operator names have their own table.
    CHECK(r.reader.name_count() == 5);
    CHECK(r.reader.find_name("w") == replay::name_id{0});
    CHECK(r.reader.find_name("c") == replay::name_id{4});
    CHECK_FALSE(r.reader.find_name("zz").has_value());
    CHECK(r.reader.op_count() == 2);
    CHECK_FALSE(r.reader.is_bound(*r.reader.find_name("a")));
    CHECK(r.reader.is_bound(*r.reader.find_name("c")));
    CHECK_FALSE(r.reader.is_bound(99));
    CHECK_THROWS_AS((void)r.reader.name(99), dtr::logic_error);
    CHECK_THROWS_AS((void)r.reader.op_name(7), dtr::logic_error);

    const auto& s = r.reader.stats();
    CHECK(s.lines == 15);
    CHECK(s.records() == 9);
    CHECK(s.annotates == 2);
    CHECK(s.constants == 2);
    CHECK(s.calls == 1);
    CHECK(s.call_results == 2);
    CHECK(s.view_results == 1);
    CHECK(s.mutates == 1);
    CHECK(s.copies == 1);
    CHECK(s.copy_froms == 1);
    CHECK(s.releases == 1);
    CHECK(s.bound_names == 4);
    CHECK(s.unknown_releases == 0);

    std::ostringstream printed;
    printed << s;
    CHECK(contains(printed.str(), "records: 9"));
    CHECK(contains(printed.str(), "unknown releases (ignored): 0"));
}

TEST_CASE("calls with no args or no results, repeated args, and the optional-returning next") {
    const std::string text = start + call_line("zeros", "[]", list({"z"})) + memory("z", "0") +
                             alias("z", "-1") + call_line("mul", list({"z", "z"}), "[]") +
                             mutate("noop_", list({"z"}), "[]");
    std::istringstream in(text);
    replay::log_reader reader(in);
    CHECK(reader.source() == "<stream>");
    REQUIRE(reader.next()); // START
    const auto zeros = reader.next();
    REQUIRE(zeros);
    CHECK(std::get<instr::call>(zeros->op).args.empty());
    const auto mul = reader.next();
    REQUIRE(mul);
    CHECK(std::get<instr::call>(mul->op).args.size() == 2);
    CHECK(std::get<instr::call>(mul->op).results.empty());
    const auto noop = reader.next();
    REQUIRE(noop);
    CHECK(std::get<instr::mutate>(noop->op).mutated.empty());
    CHECK_FALSE(reader.next());
    CHECK_FALSE(reader.next()); // stays at the end
}

TEST_CASE("lines before ANNOTATE START are skipped but still checked") {
    const std::string pre = constant("p") + release("p") + constant("q") + backward;
    SUBCASE("skipped by default and counted") {
        read_all r(pre + start + constant("x") + release("q") + release("x"));
        REQUIRE(r.records.size() == 3); // START, CONSTANT x, RELEASE x
        CHECK(r.reader.stats().skipped_lines == 6);
        CHECK(r.reader.started());
        CHECK_FALSE(r.reader.find_name("q").has_value());
        // q was defined only before START: its RELEASE is tolerated and counted.
        CHECK(r.reader.stats().unknown_releases == 1);
        CHECK(r.reader.stats().first_unknown_release_line == 10);
    }
    SUBCASE("a name defined only before START cannot be used after it") {
        const auto e = error_of(pre + start + copy("y", "q"));
        CHECK(e.line() == 8);
        CHECK(contains(e.what(), "COPY source \"q\" is used before it is defined"));
    }
    SUBCASE("skipped lines are syntax-checked") {
        const auto e = error_of(constant("p") + "{\"INSTRUCTION\":\"CONSTANT\"\n" + start);
        CHECK(e.line() == 3);
        CHECK(contains(e.what(), "t.log:3: bad JSON at column 26"));
        const auto f = error_of(R"({"INSTRUCTION":"JUMP"})"
                                "\n" +
                                start);
        CHECK(f.line() == 1);
        CHECK(contains(f.what(), "unknown INSTRUCTION \"JUMP\""));
    }
    SUBCASE("a log without START is an error when skipping") {
        const auto e = error_of(constant("p"));
        CHECK(e.line() == 2);
        CHECK(contains(e.what(), "no ANNOTATE START"));
        CHECK(contains(error_of("").what(), "no ANNOTATE START"));
    }
    SUBCASE("with skipping off everything counts") {
        read_all r(pre + start + constant("x"), {.skip_before_start = false});
        CHECK(r.records.size() == 6); // CONSTANT p, RELEASE p, CONSTANT q, BACKWARD, START, x
        CHECK(r.reader.stats().skipped_lines == 0);
        CHECK(r.reader.stats().reused_names == 0);
        CHECK(r.at<instr::annotate>(4).what == replay::annotation::start);
        read_all empty("", {.skip_before_start = false});
        CHECK(empty.records.empty());
    }
}

TEST_CASE("tolerated oddities are counted, and rejected in strict mode") {
    SUBCASE("RELEASE of a name never defined") {
        read_all r(start + constant("x") + release("ghost") + release("ghost2") + release("x"));
        CHECK(r.records.size() == 3);
        CHECK(r.reader.stats().unknown_releases == 2);
        CHECK(r.reader.stats().first_unknown_release_line == 4);
        const auto e = error_of(start + release("ghost"), {.strict = true});
        CHECK(e.line() == 2);
        CHECK(contains(e.what(), "RELEASE of \"ghost\", which was never defined"));
    }
    SUBCASE("a name defined again after its RELEASE") {
        read_all r(start + constant("x") + release("x") + call1("f", "[]", "x") + copy("y", "x") +
                   release("y") + copy("y", "x"));
        CHECK(r.reader.stats().reused_names == 2);
        CHECK(r.reader.name_count() == 2); // the same ids again
        CHECK(r.at<instr::call>(3).results[0].name == r.at<instr::constant>(1).name);
        const auto e =
            error_of(start + constant("x") + release("x") + constant("x"), {.strict = true});
        CHECK(e.line() == 5);
        CHECK(contains(e.what(), "CONSTANT \"x\" redefines a released name"));
    }
    SUBCASE("blank lines") {
        read_all r(start + "\n   \n" + constant("x") + "\t\r\n");
        CHECK(r.records.size() == 2);
        CHECK(r.reader.stats().blank_lines == 3);
        CHECK(r.reader.stats().lines == 6);
        const auto e = error_of(start + "\n", {.strict = true});
        CHECK(e.line() == 2);
        CHECK(contains(e.what(), "blank line"));
    }
    SUBCASE("CRLF line ends and a missing final newline are fine") {
        std::string text = start + constant("x");
        std::string crlf;
        for (char ch : text) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
        crlf.pop_back();
        crlf.pop_back();
        read_all r(crlf);
        CHECK(r.records.size() == 2);
        CHECK(r.reader.stats().lines == 3);
    }
}

TEST_CASE("malformed logs are rejected with the line and the problem") {
    struct bad {
        std::string text; // START is prepended: line 1
        std::size_t line;
        std::string problem;
    };
    const bad cases[] = {
        // JSON and line shape
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"x\"\n", 2,
         "bad JSON at column 36: unexpected end of input in object"},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"x\"} x\n", 2,
         "bad JSON at column 38: unexpected 'x' after the value"},
        {"[\"RELEASE\"]\n", 2, "line is not a JSON object (got array)"},
        {"{\"NAME\":\"x\"}\n", 2, "missing field \"INSTRUCTION\""},
        {"{\"INSTRUCTION\":7}\n", 2, "field \"INSTRUCTION\" must be a string, got number"},
        {"{\"INSTRUCTION\":\"FREE\",\"NAME\":\"x\"}\n", 2, "unknown INSTRUCTION \"FREE\""},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"x\",\"WHY\":\"\"}\n", 2,
         "unknown field \"WHY\" in a RELEASE line"},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"x\",\"NAME\":\"y\"}\n", 2,
         "duplicate field \"NAME\""},
        {"{\"INSTRUCTION\":\"RELEASE\"}\n", 2, "RELEASE line is missing field \"NAME\""},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"x\",\"SRC\":\"y\"}\n", 2,
         "field \"SRC\" does not belong in a RELEASE line"},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":[\"x\"]}\n", 2,
         "field \"NAME\" must be a string (a name), got array"},
        {"{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"\"}\n", 2, "field \"NAME\" is an empty name"},
        {"{\"ANNOTATION\":\"MIDDLE\",\"INSTRUCTION\":\"ANNOTATE\"}\n", 2,
         "ANNOTATION \"MIDDLE\" is none of START, BACKWARD and STEP"},
        {"{\"ANNOTATION\":1,\"INSTRUCTION\":\"ANNOTATE\"}\n", 2,
         "field \"ANNOTATION\" must be a string, got number"},
        // numbers
        {constant("x", "lots"), 3, "MEMORY \"lots\" is not a decimal integer"},
        {constant("x", "-8"), 3, "MEMORY must not be negative, got \"-8\""},
        {constant("x", "8.5"), 3, "MEMORY \"8.5\" is not a decimal integer"},
        {constant("x", ""), 3, "MEMORY \"\" is not a decimal integer"},
        {constant("x", " 8"), 3, "MEMORY \" 8\" is not a decimal integer"},
        {constant("x", "+8"), 3, "MEMORY \"+8\" is not a decimal integer"},
        {constant("x", "99999999999999999999"), 3,
         "MEMORY \"99999999999999999999\" is out of range"},
        {"{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":8,"
         "\"NAME\":\"x\"}\n",
         3, "MEMORY must be a string holding a decimal integer, got number"},
        {constant("x") + call_line("f", list({"x"}), list({"y"}), "-3"), 4,
         "TIME must not be negative, got \"-3\""},
        {constant("x") + call_line("f", list({"x"}), list({"y"}), "fast"), 4,
         "TIME \"fast\" is not a decimal integer"},
        // lists
        {call_line("f", "\"x\"", list({"y"})), 2,
         "field \"ARGS\" must be a list of names, got string"},
        {call_line("f", "[1]", list({"y"})), 2,
         "ARGS entry 0 must be a string (a name), got number"},
        {call_line("f", "[]", "[\"y\",\"\"]"), 2, "RESULT entry 1 is an empty name"},
        {constant("x") + mutate("f_", list({"x"}), "0"), 4,
         "field \"MUTATE\" must be a list of indices, got number"},
        {constant("x") + mutate("f_", list({"x"}), "[\"0\"]"), 4,
         "MUTATE entry 0 must be an integer index into ARGS, got string"},
        {constant("x") + mutate("f_", list({"x"}), "[0.5]"), 4,
         "MUTATE entry 0 must be an integer index into ARGS, got a non-integral number"},
        {constant("x") + mutate("f_", list({"x"}), "[1]"), 4,
         "MUTATE index 1 is out of range: the line has 1 ARGS"},
        {constant("x") + mutate("f_", list({"x"}), "[-1]"), 4, "MUTATE index -1 is out of range"},
        {constant("x") + mutate("f_", list({"x", "x"}), "[1,1]"), 4,
         "MUTATE index 1 is listed twice"},
        // ALIAS
        {constant("x") + call1("f", list({"x"}), "y", "8", "1"), 6,
         "ALIAS 1 of \"y\" is out of range: the CALL at line 4 has 1 ARGS"},
        {constant("x") + call1("f", list({"x"}), "y", "8", "-2"), 6, "ALIAS -2 is out of range"},
        {constant("x") + call1("f", list({"x"}), "y", "8", "zero"), 6,
         "ALIAS \"zero\" is not an integer"},
        {constant("x") + call1("f", list({"x"}), "y", "8", "99999999999999999999"), 6,
         "ALIAS \"99999999999999999999\" is out of range"},
        // groups
        {"{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n" + release("x"), 3,
         "expected MEMORY for \"x\" of the CONSTANT at line 2, got RELEASE"},
        {"{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n" + memory("y", "8"), 3,
         "MEMORY line names \"y\", expected \"x\" (the CONSTANT at line 2)"},
        {"{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n", 2,
         "truncated log: end of input inside the CONSTANT group of this line (expected MEMORY for "
         "\"x\")"},
        {call_line("f", "[]", list({"a", "b"})) + alias("a", "-1"), 3,
         "expected MEMORY for \"a\" of the CALL at line 2, got ALIAS"},
        {call_line("f", "[]", list({"a", "b"})) + memory("b", "8"), 3,
         "MEMORY line names \"b\", expected \"a\""},
        {call_line("f", "[]", list({"a", "b"})) + memory("a", "8") + memory("a", "8"), 4,
         "expected ALIAS for \"a\" of the CALL at line 2, got MEMORY"},
        {call_line("f", "[]", list({"a", "b"})) + memory("a", "8") + alias("b", "-1"), 4,
         "ALIAS line names \"b\", expected \"a\""},
        {call_line("f", "[]", list({"a", "b"})) + memory("a", "8") + alias("a", "-1") +
             memory("b", "8"),
         2,
         "truncated log: end of input inside the CALL group of this line (expected ALIAS for "
         "\"b\")"},
        {call_line("f", "[]", list({"a", "a"})), 2, "RESULT lists \"a\" twice"},
        {memory("x", "8"), 2, "MEMORY line outside a CONSTANT or CALL group"},
        {constant("x") + alias("x", "-1"), 4, "ALIAS line outside a CALL group"},
        // names
        {call1("f", list({"nope"}), "y"), 2,
         "argument \"nope\" of CALL \"f\" is used before it is defined"},
        {constant("x") + release("x") + call1("f", list({"x"}), "y"), 5,
         "argument \"x\" of CALL \"f\" is used after its RELEASE"},
        {mutate("relu_", list({"nope"}), "[0]"), 2,
         "argument \"nope\" of MUTATE \"relu_\" is used before it is defined"},
        {copy("y", "nope"), 2, "COPY source \"nope\" is used before it is defined"},
        {constant("x") + copy("x", "x"), 4,
         "COPY destination \"x\" is already bound (redefinition)"},
        {constant("x") + constant("x"), 4, "CONSTANT \"x\" is already bound (redefinition)"},
        {constant("x") + call1("f", list({"x"}), "x"), 4,
         "CALL result \"x\" is already bound (redefinition)"},
        {constant("x") + copy_from("nope", "x"), 4,
         "COPY_FROM destination \"nope\" is used before it is defined"},
        {constant("x") + constant("y") + release("y") + copy_from("x", "y"), 7,
         "COPY_FROM source \"y\" is used after its RELEASE"},
        {constant("x") + release("x") + release("x"), 5,
         "RELEASE of \"x\", which is already released"},
        {release(R"(we\"ird)") + constant("x") + release("x") + release("x"), 6,
         "RELEASE of \"x\", which is already released"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const auto e = error_of(start + c.text);
        CHECK(e.line() == c.line);
        CHECK(e.source() == "t.log");
        const std::string prefix = "t.log:" + std::to_string(c.line) + ": ";
        CHECK(std::string(e.what()).rfind(prefix, 0) == 0);
        CHECK_MESSAGE(contains(e.what(), c.problem), std::string(e.what()));
    }
}

TEST_CASE("messages quote names safely") {
    const auto e = error_of(start + copy("y", std::string(100, 'n') + "\\u0001"));
    CHECK(contains(e.what(), "COPY source \"" + std::string(64, 'n') + "...\""));
    const auto f = error_of(start + copy("y", "a\\u0001\\\"b"));
    CHECK(contains(f.what(), R"(COPY source "a\x01\"b" is used)"));
}

TEST_CASE("a reader that threw is spent") {
    std::istringstream in(start + release("x") + "garbage\n" + constant("y"));
    replay::log_reader reader(in, "t.log");
    replay::record r;
    CHECK(reader.next(r));
    CHECK_THROWS_AS(reader.next(r), dtr::parse_error);
    CHECK(reader.stats().unknown_releases == 1);
    CHECK_THROWS_AS(reader.next(r), dtr::logic_error);
}

TEST_CASE("open() names the file it cannot open") {
    try {
        (void)replay::log_reader::open("/nonexistent/dir/x.log");
        FAIL("no throw");
    } catch (const dtr::parse_error& e) {
        CHECK(e.source() == "/nonexistent/dir/x.log");
        CHECK(e.line() == 0);
        CHECK(contains(e.what(), "/nonexistent/dir/x.log: cannot open for reading"));
    }
}

TEST_CASE("a reader can be moved mid-stream") {
    std::istringstream in(start + constant("x") + constant("y"));
    replay::log_reader a(in, "t.log");
    replay::record r;
    REQUIRE(a.next(r));
    REQUIRE(a.next(r));
    replay::log_reader b(std::move(a));
    REQUIRE(b.next(r));
    CHECK(b.name(std::get<instr::constant>(r.op).name) == "y");
    CHECK_FALSE(b.next(r));
}

// The eight published logs. Expected counts were computed independently of this reader
// (grep and a short Python script over the raw lines), so they check the grouping too.
TEST_CASE("the eight published logs read cleanly with the expected counts") {
    const char* shared = std::getenv("DTR_SHARED");
    const std::filesystem::path dir =
        shared ? std::filesystem::path(shared) / "dtr-logs" : std::filesystem::path();
    if (!shared || !std::filesystem::is_directory(dir)) {
        MESSAGE("SKIP: $DTR_SHARED/dtr-logs not found; published logs not checked");
        return;
    }
    struct expected {
        const char* prefix;
        std::size_t lines, annotate, constant, call, mutate, copy, copy_from, release, results,
            views, bound_at_end;
    };
    const expected logs[] = {
        {"inceptionv4-64-", 17138, 2, 1049, 1109, 149, 4026, 0, 5738, 2008, 88, 1345},
        {"lstm-128-", 48631, 2, 137, 7798, 128, 8071, 0, 16250, 8054, 2943, 12},
        {"resnet32-56-", 3777, 2, 223, 286, 0, 842, 0, 1255, 473, 16, 283},
        {"transformer-10-", 18638, 2, 333, 2731, 90, 3113, 0, 5968, 3034, 1553, 512},
        {"treelstm-6-", 42146, 2, 134, 6699, 126, 7035, 0, 14110, 6953, 2341, 12},
        {"tv_densenet121-84-", 19134, 2, 853, 1951, 121, 3779, 0, 6219, 2678, 611, 1091},
        {"unet-6-", 2628, 2, 152, 210, 37, 578, 0, 851, 323, 46, 202},
        {"unroll_gan-512-", 33819, 1, 796, 5946, 78, 3793, 6, 10511, 5946, 1518, 24},
    };
    std::size_t found = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string file = entry.path().filename().string();
        if (entry.path().extension() != ".log") continue;
        const expected* want = nullptr;
        for (const auto& e : logs)
            if (file.rfind(e.prefix, 0) == 0) want = &e;
        CAPTURE(file);
        REQUIRE(want != nullptr);
        ++found;

        for (const bool strict : {false, true}) {
            auto reader = replay::log_reader::open(entry.path(), {.strict = strict});
            replay::record r;
            std::size_t records = 0;
            std::size_t first_line = 0;
            while (reader.next(r)) {
                if (records++ == 0) first_line = r.line;
            }
            const auto& s = reader.stats();
            CHECK(first_line == 1); // every published log opens with ANNOTATE START
            CHECK(s.lines == want->lines);
            CHECK(s.annotates == want->annotate);
            CHECK(s.constants == want->constant);
            CHECK(s.calls == want->call);
            CHECK(s.mutates == want->mutate);
            CHECK(s.copies == want->copy);
            CHECK(s.copy_froms == want->copy_from);
            CHECK(s.releases == want->release);
            CHECK(s.call_results == want->results);
            CHECK(s.view_results == want->views);
            CHECK(s.bound_names == want->bound_at_end);
            CHECK(s.records() == records);
            // None of the tolerated oddities occurs in the published logs.
            CHECK(s.skipped_lines == 0);
            CHECK(s.blank_lines == 0);
            CHECK(s.unknown_releases == 0);
            CHECK(s.reused_names == 0);
            CHECK(s.lines == s.records() + want->constant + 2 * want->results);
        }
    }
    CHECK(found == 8);
}
