// A hang under the real fastrun CLI: one rank sleeps while the others wait in an all-reduce. The
// launcher's failure summary says which rank did not reach the op and what it was doing
// (docs/errors.md, "How to read a hang").
#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;

TEST_CASE("the launcher's summary explains an op timeout", "[launcher][flight]") {
  for (const char* backend : {"shm", "gloo"}) {
    INFO(backend);
    const auto r = run(cmd({"--nproc", "3"}, {"--join", "--world-allreduce", "--on", "1", "--sleep", "20",
                                              "--world-allreduce"}),
                       {{"FASTRUN_OP_TIMEOUT", "2"}, {"FASTRUN_BACKEND", backend}}, std::chrono::seconds(30));
    INFO(r.err);
    CHECK(r.exit_code == 67);
    CHECK(r.seconds < 15);
    // The job's recorded failure, in the summary, whichever rank the launcher saw fail first.
    CHECK(contains(r.err, "fastrun: the job's first recorded failure: rank "));
    CHECK(contains(r.err, "op #2 all_reduce(float32 x 4, sum) on group 'world' timed out"));
    CHECK(contains(r.err, "rank 1 did not reach op #2"));
    CHECK(contains(r.err, "rank 1: last op #1 all_reduce(float32 x 4, sum) completed"));
  }
}
