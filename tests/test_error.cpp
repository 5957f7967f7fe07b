// SPDX-License-Identifier: Apache-2.0
#include <dtr/detail/duration_text.hpp>
#include <dtr/error.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <string>

TEST_CASE("DTR_EXPECTS names the problem and the place") {
    try {
        DTR_EXPECTS(1 + 1 == 3, std::string("arithmetic is broken"));
        FAIL("DTR_EXPECTS did not throw");
    } catch (const dtr::logic_error& e) {
        const std::string what = e.what();
        CHECK(what.find("arithmetic is broken") != std::string::npos);
        CHECK(what.find("test_error.cpp") != std::string::npos);
    }
}

TEST_CASE("out_of_memory is a bad_alloc carrying its figures") {
    const dtr::out_of_memory oom("no room", {.requested = 10, .budget = 5});
    const std::bad_alloc& base = oom;
    CHECK(std::string(base.what()) == "no room");
    CHECK(oom.info().requested == 10);
    CHECK(oom.info().budget == 5);
}

TEST_CASE("parse_error prefixes source and line") {
    const dtr::parse_error e("a.log", 12, "unknown instruction \"FOO\"");
    CHECK(std::string(e.what()) == "a.log:12: unknown instruction \"FOO\"");
    CHECK(e.line() == 12);
}

TEST_CASE("durations in messages read as people read them") {
    using dtr::detail::duration_text;
    CHECK(duration_text(0) == "0 ns");
    CHECK(duration_text(10) == "10 ns");
    CHECK(duration_text(850) == "850 ns");
    CHECK(duration_text(2.5) == "2.50 ns");
    CHECK(duration_text(12'345) == "12.3 us");
    CHECK(duration_text(999'400) == "999 us");
    CHECK(duration_text(3.4e9) == "3.40 s");
    CHECK(duration_text(4948179164.0) == "4.95 s"); // the thrashing message of issue 34
    CHECK(duration_text(61.2e9) == "1 min 1 s");
    CHECK(duration_text(125e9) == "2 min 5 s");
    CHECK(duration_text(7380e9) == "2 h 3 min");
    CHECK(duration_text(-2e6) == "-2.00 ms");
    CHECK(duration_text(std::numeric_limits<double>::infinity()) == "infinite");
    CHECK(duration_text(std::numeric_limits<double>::quiet_NaN()) == "NaN ns");
}
