#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "test_support/scoped_env.h"

using namespace fastrun;

TEST_CASE("every registered variable is FASTRUN_-prefixed, unique and documented", "[env]") {
  std::set<std::string_view> names;
  for (const env::Variable* v : env::all()) {
    CHECK(v->name.substr(0, 8) == "FASTRUN_");
    CHECK(!v->help.empty());
    CHECK(names.insert(v->name).second);
    CHECK(env::find(v->name) == v);
  }
  CHECK(env::find("FASTRUN_NOPE") == nullptr);
}

TEST_CASE("integers are validated and the error names variable, value and accepted form", "[env]") {
  test::ScopedEnv e("FASTRUN_WORLD_SIZE", "abc");
  try {
    env::get_int(env::kWorldSize);
    FAIL("no error");
  } catch (const ConfigError& err) {
    std::string msg = err.what();
    CHECK(msg.find("FASTRUN_WORLD_SIZE") != std::string::npos);
    CHECK(msg.find("'abc'") != std::string::npos);
    CHECK(msg.find("integer") != std::string::npos);
  }
  CHECK_THROWS_AS(env::parse_int(env::kWorldSize, "0"), ConfigError);   // below min 1
  CHECK_THROWS_AS(env::parse_int(env::kWorldSize, "3x"), ConfigError);  // trailing junk
  CHECK_THROWS_AS(env::parse_int(env::kWorldSize, ""), ConfigError);
  CHECK_THROWS_AS(env::parse_int(env::kNoSync, "3"), ConfigError);      // above max 2
  CHECK(env::parse_int(env::kWorldSize, "4") == 4);
}

TEST_CASE("defaults apply only when unset, and no default means not given", "[env]") {
  test::ScopedEnv a("FASTRUN_NO_SYNC", nullptr);
  test::ScopedEnv b("FASTRUN_RANK", nullptr);
  CHECK(env::get_int(env::kNoSync) == 0);
  CHECK_FALSE(env::find_int(env::kRank).has_value());
  CHECK_THROWS_AS(env::get_int(env::kRank), ConfigError);
  test::ScopedEnv c("FASTRUN_RANK", "3");
  CHECK(env::get_int(env::kRank) == 3);
}

TEST_CASE("choices and seconds are validated", "[env]") {
  CHECK(env::parse_choice(env::kBackend, "gloo") == "gloo");
  CHECK_THROWS_WITH(env::parse_choice(env::kBackend, "mpi"), Catch::Contains("auto|shm|gloo|hier|nccl"));
  CHECK(env::parse_seconds(env::kTimeout, "0.5") == 0.5);
  CHECK_THROWS_AS(env::parse_seconds(env::kTimeout, "-1"), ConfigError);
  CHECK_THROWS_AS(env::parse_seconds(env::kTimeout, "inf"), ConfigError);
  CHECK_THROWS_AS(env::parse_seconds(env::kTimeout, "10s"), ConfigError);
  // A timeout is never 0; the last call may be (it was refused, though --last-call 0 was not).
  CHECK_THROWS_WITH(env::parse_seconds(env::kTimeout, "0"), Catch::Contains("> 0"));
  CHECK(env::parse_seconds(env::kLastCall, "0") == 0);
  CHECK_THROWS_WITH(env::parse_seconds(env::kLastCall, "-1"),
                    "FASTRUN_LAST_CALL='-1' is not valid: expected a number of seconds from 0 to 86400 (e.g. 30 or 0.5)");
}

TEST_CASE("seconds are capped at a day, and a timeout converts without overflow", "[env]") {
  // 1e10 once failed the join at once ("timed out after -9.22e+15 s"), 1e300 timed out after 0 s.
  CHECK(env::parse_seconds(env::kTimeout, "86400") == 86400);
  for (const char* huge : {"86400.5", "1e10", "1e300"}) {
    CHECK_THROWS_WITH(env::parse_seconds(env::kTimeout, huge),
                      Catch::Contains(std::string("FASTRUN_TIMEOUT='") + huge + "'") && Catch::Contains("<= 86400"));
    CHECK_THROWS_WITH(env::parse_seconds(env::kOpTimeout, huge), Catch::Contains("FASTRUN_OP_TIMEOUT"));
  }
  {
    test::ScopedEnv t("FASTRUN_TIMEOUT", "86400");
    CHECK(env::get_timeout(env::kTimeout) == std::chrono::hours(24));
  }
  {
    test::ScopedEnv t("FASTRUN_OP_TIMEOUT", "1e-300");  // rounds up: never a zero timeout
    CHECK(env::get_timeout(env::kOpTimeout) == std::chrono::milliseconds(1));
  }
}

TEST_CASE("help text lists every variable with its default", "[env]") {
  std::string text = env::help_text();
  for (const env::Variable* v : env::all()) CHECK(text.find(std::string(v->name)) != std::string::npos);
  CHECK(text.find("default: 300") != std::string::npos);
}

TEST_CASE("all() lists the variables of variables.def once each, in its order", "[env]") {
  // The constants and all() come from the same X-macro list, so they cannot drift apart.
  const auto& vars = env::all();
  REQUIRE(vars.size() >= 2);
  CHECK(vars.front() == &env::kRank);
  std::vector<const env::Variable*> expected = {
#define FASTRUN_ENV_VARIABLE(constant, ...) &env::constant,
#include "fastrun/runtime/env/variables.def"
#undef FASTRUN_ENV_VARIABLE
  };
  CHECK(vars == expected);
}
