// The examples of docs/launching.md run as documented: examples/hello under the fastrun CLI and
// examples/hello_self_spawn starting its own ranks. Each rank must print its place in the job
// all-reduce and pass a barrier with the others, so a rank that never started fails the case.
#ifdef HELLO_BIN
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "process_runner.h"

using namespace fastrun::test;

TEST_CASE("examples: hello under the fastrun CLI, 4 ranks", "[launcher][examples]") {
  const std::string id = fmt::format("t-hello-{}", ::getpid());
  const auto r = run({kFastrun, "--nproc", "4", "--run-id", id, HELLO_BIN});
  CHECK(r.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(contains(r.out, fmt::format("hello from rank {} of 4 (local {}/4, node 0, from fastrun)", rank, rank)));
    CHECK(contains(r.out, fmt::format("rank {}: all-reduce of 1..4 = 10 over shm\n", rank)));
    CHECK(contains(r.out, fmt::format("run {} store shm://{}", id, id)));
    CHECK(contains(r.out, fmt::format("rank {} passed the barrier\n", rank)));
  }
}

TEST_CASE("examples: hello_self_spawn starts its own 3 ranks", "[launcher][examples]") {
  const auto r = run({HELLO_SELF_SPAWN_BIN, "3"}, {{"FASTRUN_RANK", std::nullopt}, {"FASTRUN_RUN_ID", std::nullopt}});
  CHECK(r.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(contains(r.out, fmt::format("[rank {}] hello from rank {} of 3, device", rank, rank)));
    CHECK(contains(r.out, fmt::format("[rank {}] rank {} passed the barrier\n", rank, rank)));
  }
  const auto bad = run({HELLO_SELF_SPAWN_BIN, "--devices", "0,0"}, {{"FASTRUN_RANK", std::nullopt}});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "hello_self_spawn: "));
}
#endif
