// Progress of point-to-point messages on shm, which has no progress thread
// (docs/collectives.md, "Progress"): programs that MPI's progress rule lets
// finish must finish here too. Real processes (test::run_ranks: a timeout,
// every child reaped), every value checked.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

float value(int message, std::size_t i) {
  return static_cast<float>(message * 1000 + static_cast<int>(i % 997));
}

void check_message(const std::vector<float> &got, int message) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != value(message, i))
      throw std::runtime_error(
          fmt::format("message {} element {}: got {}, expected {}", message, i,
                      got[i], value(message, i)));
}

} // namespace

// Rank 0 posts more than its ring to rank 1 holds, then joins a blocking
// collective (of the same group, or of another group: MPI progresses every
// communicator); rank 1 receives every message before it joins that collective.
// Under MPI this finishes (the collective progresses the pending sends); it
// must not deadlock until the op timeout here.
TEST_CASE("p2p: sends still pending when the sender blocks in a collective "
          "reach a receiver",
          "[shm][gloo][p2p][mp]") {
  for (const char *backend : {"shm", "gloo"}) {
    for (const bool other_group : {false, true}) {
      for (std::size_t count :
           {std::size_t{7000},
            std::size_t{1} << 20}) { // eager (28 KB) and single-copy (4 MiB)
        INFO(backend << ", " << count << " floats"
                     << (other_group ? ", collective on another group" : ""));
        test::RankRunOptions options;
        options.timeout = std::chrono::seconds(60);
        options.extra_env["FASTRUN_OP_TIMEOUT"] = "30";
        const int messages =
            40; // 40 x 28 KB: four times what a 2-rank ring holds
        auto results = test::run_ranks(
            2,
            [backend, count, other_group](int rank) {
              auto ctx = join({backend});
              Group &g = ctx->world();
              auto pair = ctx->new_group(
                  {0, 1}); // the collective's group when other_group
              Group &c = other_group ? *pair : g;
              float token = 1.0f;
              const auto start = std::chrono::steady_clock::now();
              if (rank == 0) {
                std::vector<std::vector<float>> out(messages,
                                                    std::vector<float>(count));
                std::vector<WorkHandle> sends;
                for (int m = 0; m < messages; ++m) {
                  for (std::size_t i = 0; i < count; ++i)
                    out[m][i] = value(m, i);
                  sends.push_back(
                      g.send(view_of(out[m].data(), count), 1, {/*tag=*/3}));
                }
                c.all_reduce(view_of(&token, 1))->wait();
                for (auto &w : sends)
                  w->wait();
              } else {
                std::vector<float> in(count);
                for (int m = 0; m < messages; ++m) {
                  g.recv(view_of(in.data(), count), 0, {3})->wait();
                  check_message(in, m);
                }
                c.all_reduce(view_of(&token, 1))->wait();
              }
              RANK_REQUIRE(token == 2.0f);
              const double took = std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - start)
                                      .count();
              if (took > 20)
                throw std::runtime_error(fmt::format("took {:.1f} s", took));
            },
            options);
        CHECK(test::all_ok(results));
      }
    }
  }
}
