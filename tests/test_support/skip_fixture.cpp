// Cases for skip_verdicts_test.cmake, which runs each under CTest and checks the verdict: not a
// test of its own (two of its cases must fail).
#include <cstdio>

#include <catch2/catch.hpp>

#include "test_support/skip.h"

TEST_CASE("passes") { CHECK(1 + 1 == 2); }

TEST_CASE("skips") {
  fastrun::test::skip_case("the fixture cannot run here");
}

// Prints what a skip prints, then fails: CTest must say Failed (a regular expression on the
// output would have said Skipped).
TEST_CASE("prints the skip text then fails") {
  std::printf("%s not really\n", fastrun::test::kSkipMarker);
  std::fflush(stdout);
  CHECK(1 + 1 == 3);
}

// A failed check, then a skip (as a skip in a later SECTION would be): still a failure.
TEST_CASE("fails then skips") {
  CHECK(1 + 1 == 3);
  fastrun::test::skip_case("too late: a check failed already");
}
