// SPDX-License-Identifier: Apache-2.0
#include <dtr/error.hpp>

#include <doctest/doctest.h>

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
