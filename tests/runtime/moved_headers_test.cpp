// Headers that moved keep their old paths working for users (issue 14): the old fastNLP driver
// path forwards to fastnlp_compat/, and join/join.h alone is enough to join.
#include <catch2/catch.hpp>

#include "fastrun/runtime/driver/driver.h"  // old path: must still declare the driver surface
#include "fastrun/runtime/join/join.h"      // new home of join(): must give the complete Context

TEST_CASE("the old driver path and join/join.h each give what they used to", "[driver][join]") {
  // Declarations only matter here; calling them is covered by the driver and join tests.
  int (*rank)() = &fastrun::global_rank;
  std::shared_ptr<fastrun::Context> (*join)(const fastrun::JoinOptions&) = &fastrun::join;
  CHECK(rank != nullptr);
  CHECK(join != nullptr);
  CHECK(sizeof(fastrun::Context) > 0);  // complete type from join/join.h alone
}
