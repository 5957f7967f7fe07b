// SPDX-License-Identifier: Apache-2.0
// The one translation unit that holds doctest's runner for the tools' tests under bench/ (the
// library's tests have their own in tests/: neither suite reaches into the other's build).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
