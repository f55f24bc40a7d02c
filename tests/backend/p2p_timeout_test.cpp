// A shm recv whose send never comes times out (P2PEngine::wait, step 6) with the one op-timeout
// message (op_timeout.h) naming the recv still pending, and the group fails: the peer's own wait
// ends with an error instead of hanging. Real processes (test::run_ranks: a timeout, every child
// reaped); nothing sleeps: rank 0 waits for what rank 1's failure does to the group.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

TEST_CASE("shm p2p: a recv whose send never comes times out naming it and fails the group", "[mp][p2p][shm]") {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env["FASTRUN_OP_TIMEOUT"] = "30";  // the peer's wait: ended by the failure, long before
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({"shm"});
        Group& g = ctx->world();
        std::vector<float> buf(4, 0.0f);
        if (rank == 0) {
          // Never sends tag 7; waits on a message rank 1 never sends either, until rank 1's
          // timeout fails the group.
          bool failed = false;
          try {
            g.recv(view_of(buf.data(), buf.size()), 1, {8})->wait();
          } catch (const TimeoutError&) {
            throw std::runtime_error("rank 0 timed out itself: the failure of rank 1's recv never reached it");
          } catch (const Error&) {
            failed = true;
          }
          RANK_REQUIRE(failed);
          return;
        }
        std::string error = "no error";
        try {
          g.recv(view_of(buf.data(), buf.size()), 0, {7})->wait(std::chrono::milliseconds(500));
        } catch (const TimeoutError& e) {
          error = e.what();
        }
        for (const char* part : {"(shm)", "timed out after", "recv from rank 0 tag 7 (16 bytes)",
                                 "the peer has not posted the matching send/recv"})
          if (error.find(part) == std::string::npos)
            throw std::runtime_error(fmt::format("timeout message lacks '{}': {}", part, error));
        // The flight record's verdict names the peer; it does not compare the p2p op's number
        // with collective numbers (it said "ranks 0,1 did not reach op #1").
        if (error.find("did not reach") != std::string::npos ||
            error.find("the matching send of rank 0 did not come") == std::string::npos)
          throw std::runtime_error("the flight record's verdict on a p2p timeout is wrong: " + error);
        bool refused = false;
        try {
          g.recv(view_of(buf.data(), buf.size()), 0, {7})->wait(std::chrono::milliseconds(500));
        } catch (const TimeoutError&) {
          throw std::runtime_error("the group was still usable after the timeout");
        } catch (const Error&) {
          refused = true;
        }
        RANK_REQUIRE(refused);  // the group is unusable and says so at once
      },
      options);
  INFO(test::describe(results));
  CHECK(test::all_ok(results));
}
