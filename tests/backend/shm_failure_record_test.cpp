// One failure record per group (process_group/group_health.h): on shm a point-to-point failure
// and a collective failure land in the same GroupHealth, so whichever comes first refuses the
// next op of the other kind with the same first message. Real processes (test::run_ranks:
// a timeout, every child reaped); nothing sleeps: each failure is made by the ranks themselves.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/error.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

// What `op` throws (issued and waited), or "no error".
std::string error_of(const std::function<WorkHandle()>& op) {
  try {
    op()->wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// `error` is the refusal of `op` quoting the group's first failure, `first`, whole.
void require_refused_with(const std::string& error, const char* op, const std::string& first) {
  const std::string expected = fmt::format("{} refused: the group is unusable after an earlier failure: {}", op, first);
  if (error.find(expected) == std::string::npos)
    throw std::runtime_error(fmt::format("expected '{}' in: {}", expected, error));
}

}  // namespace

TEST_CASE("shm: a p2p failure refuses the next collective with the same first message", "[mp][p2p][shm][health]") {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env["FASTRUN_OP_TIMEOUT"] = "30";  // rank 0's wait: ended by rank 1's failure, long before
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({"shm"});
        Group& g = ctx->world();
        std::vector<float> buf(4, 0.0f);
        std::string first;
        if (rank == 1) {
          // Rank 0 never sends tag 7: the recv times out, the group's first failure.
          try {
            g.recv(view_of(buf.data(), buf.size()), 0, {7})->wait(std::chrono::milliseconds(300));
          } catch (const TimeoutError& e) {
            // The backend's message, without the flight record the Group appends to a timeout.
            first = e.what();
            first = first.substr(0, first.find("\nflight record:"));
          }
          RANK_REQUIRE(first.find("recv from rank 0 tag 7") != std::string::npos);
        } else {
          // Waits on a message rank 1 never sends, until rank 1's failure fails this rank's recv.
          try {
            g.recv(view_of(buf.data(), buf.size()), 1, {8})->wait();
          } catch (const TimeoutError&) {
            throw std::runtime_error("rank 0 timed out itself: rank 1's failure never reached it");
          } catch (const Error& e) {
            first = e.what();
          }
          RANK_REQUIRE(!first.empty());
        }
        require_refused_with(error_of([&] { return g.all_reduce(view_of(buf.data(), buf.size())); }), "all_reduce",
                             first);
        require_refused_with(error_of([&] { return g.barrier(); }), "barrier", first);
        // A collective built on point-to-point (the shm runtime runs it) says the same.
        require_refused_with(error_of([&] { return g.reduce(view_of(buf.data(), buf.size())); }), "reduce", first);
      },
      options);
  INFO(test::describe(results));
  CHECK(test::all_ok(results));
}

TEST_CASE("shm: a collective failure refuses the next p2p op with the same first message", "[mp][p2p][shm][health]") {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env["FASTRUN_OP_TIMEOUT"] = "30";  // the mismatch is found long before
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({"shm"});
        Group& g = ctx->world();
        std::vector<float> buf(32, 1.0f);
        // The ranks disagree on the count: shm's op check fails the all_reduce on both ranks.
        const std::string first =
            error_of([&] { return g.all_reduce(view_of(buf.data(), rank == 0 ? 10 : 20)); });
        RANK_REQUIRE(first.find("op #1 on group 'world'") != std::string::npos);
        const int peer = 1 - rank;
        const char* one = rank == 0 ? "send" : "recv";
        require_refused_with(error_of([&] {
                               return rank == 0 ? g.send(view_of(buf.data(), 4), peer) : g.recv(view_of(buf.data(), 4), peer);
                             }),
                             one, first);
        require_refused_with(error_of([&] {
                               return g.batch_send_recv({{P2POp::Kind::send, view_of(buf.data(), 4), peer, 0},
                                                         {P2POp::Kind::recv, view_of(buf.data() + 4, 4), peer, 0}});
                             }),
                             "batch_send_recv", first);
      },
      options);
  INFO(test::describe(results));
  CHECK(test::all_ok(results));
}
