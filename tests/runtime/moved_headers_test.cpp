// A header that moved keeps what its users relied on (issue 14): join/join.h alone is enough to
// join and hold the Context it returns.
#include <catch2/catch.hpp>

#include "fastrun/runtime/join/join.h"  // new home of join(): must give the complete Context

TEST_CASE("join/join.h alone gives join() and the complete Context", "[join]") {
  // Declarations only matter here; calling them is covered by the join tests.
  std::shared_ptr<fastrun::Context> (*join)(const fastrun::JoinOptions&) = &fastrun::join;
  CHECK(join != nullptr);
  CHECK(sizeof(fastrun::Context) > 0);  // complete type from join/join.h alone
}
