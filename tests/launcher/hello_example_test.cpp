// examples/hello, the first program a user runs, reports a store error as a message and a
// non-zero exit, never an abort (its normal run: examples_test.cpp).
#include <unistd.h>

#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

#ifdef HELLO_BIN  // built with the examples

namespace {
const std::string kHello = HELLO_BIN;
}  // namespace

TEST_CASE("hello without its store: a message within FASTRUN_TIMEOUT, exit 1, no abort", "[launcher][examples]") {
  // It once waited a built-in 300 s and then died of an uncaught exception (SIGABRT).
  const auto r = run({kHello}, {{"FASTRUN_RANK", "0"}, {"FASTRUN_WORLD_SIZE", "2"},
                                {"FASTRUN_STORE", "shm://hello-absent-" + std::to_string(::getpid())},
                                {"FASTRUN_TIMEOUT", "0.2"}},
                     30s);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "hello: rank 0: "));
  CHECK(contains(r.err, "within 0.2 s"));
}

#endif  // HELLO_BIN
