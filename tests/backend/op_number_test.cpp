// One numbering authority (process_group/op.h): the Group numbers an op where the user
// calls it, and the backend under it names the op by that number, across a mix of collectives,
// rooted ops built on point-to-point, empty ops and point-to-point (numbered apart), with and
// without FASTRUN_DEBUG=sequence (whose exchange before each collective is part of that op).
// The flight record shows the Group's number; the shm backend's error for the op must show the
// same one. Real processes; rank 1 ends the run by failing its group, which fails rank 0's op.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/flight_recorder.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

TEST_CASE("shm: the backend names an op by the number its Group gave it", "[mp][shm][op_number]") {
  for (const bool sequence : {false, true}) {
    INFO((sequence ? "FASTRUN_DEBUG=sequence" : "no debug mode"));
    test::RankRunOptions options;
    options.timeout = std::chrono::seconds(60);
    options.extra_env["FASTRUN_OP_TIMEOUT"] = "30";  // rank 0's last op ends by rank 1's failure, long before
    if (sequence) options.extra_env["FASTRUN_DEBUG"] = "sequence";
    auto results = test::run_ranks(
        2,
        [&](int rank) {
          auto ctx = join({"shm"});
          Group& g = ctx->world();
          const int peer = 1 - rank;
          std::vector<float> a(64, 1.0f), b(64, 0.0f);
          g.all_reduce(view_of(a.data(), 64))->wait();  // op #1
          if (rank == 0) g.send(view_of(a.data(), 16), peer)->wait();  // p2p op #1
          else g.recv(view_of(b.data(), 16), peer)->wait();
          g.barrier()->wait();                                        // op #2
          g.reduce(view_of(a.data(), 64), {ReduceOp::sum, 0})->wait();  // op #3, point-to-point inside
          g.batch_send_recv({{P2POp::Kind::send, view_of(a.data(), 8), peer, 1},
                             {P2POp::Kind::recv, view_of(b.data(), 8), peer, 1}})
              ->wait();                                               // p2p op #2
          g.all_reduce(view_of(a.data(), 0))->wait();                 // op #4, empty
          g.all_gather(view_of(a.data(), 8), view_of(b.data(), 16))->wait();  // op #5
          if (rank == 1) {
            // Fails this rank's group (a recv rank 0 never sends): its peers' waits end at once.
            bool timed_out = false;
            try {
              g.recv(view_of(b.data(), 4), peer, {9})->wait(std::chrono::milliseconds(300));
            } catch (const TimeoutError&) {
              timed_out = true;
            }
            RANK_REQUIRE(timed_out);
            return;
          }
          std::string error = "no error";
          try {
            g.all_reduce(view_of(a.data(), 64))->wait();  // op #6: rank 1 never comes
          } catch (const Error& e) {
            error = e.what();
          }
          const FlightEntry last = g.flight_record().entries().back();
          RANK_REQUIRE(last.op.op == "all_reduce");
          RANK_REQUIRE(last.op.seq == 6);
          // With the debug mode the exchange before the op is what waits for rank 1.
          const std::string named = fmt::format("{} #{}", sequence ? "all_gather" : "all_reduce", last.op.seq);
          if (error.find(named) == std::string::npos)
            throw std::runtime_error(fmt::format("the backend's error does not name '{}': {}", named, error));
        },
        options);
    INFO(test::describe(results));
    CHECK(test::all_ok(results));
  }
}
