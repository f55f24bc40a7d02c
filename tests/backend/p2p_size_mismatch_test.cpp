// A recv whose buffer does not hold exactly the message it matches (docs/collectives.md: count x
// dtype must match the send's): shm and gloo fail that recv with the same words, the send
// completes, and values are checked element by element before and after. Real processes
// (test::run_ranks: a timeout, every child reaped).
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

float value(int round, std::size_t i) { return static_cast<float>(round * 100000 + static_cast<int>(i)); }

void check_values(const std::vector<float>& got, std::size_t count, int round) {
  for (std::size_t i = 0; i < count; ++i)
    if (got[i] != value(round, i))
      throw std::runtime_error(fmt::format("round {} element {}: got {}, expected {}", round, i, got[i], value(round, i)));
}

std::string expected_error(const std::string& backend, std::size_t message, std::size_t buffer) {
  return fmt::format("{} recv on group 'world' rank 1: recv from rank 0 tag 3 ({} bytes): the message has {} bytes, "
                     "the buffer {} (count x dtype must match the send's)",
                     backend, buffer * 4, message * 4, buffer * 4);
}

// Rank 0 sends `message` floats with tag 3, rank 1 receives them into a buffer of `buffer`;
// then, where the group is still usable, a matching exchange and an all_reduce.
void run_case(const std::string& backend, std::size_t message, std::size_t buffer) {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env["FASTRUN_OP_TIMEOUT"] = "20";
  auto results = test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({backend});
        Group& g = ctx->world();
        // Gloo cannot refuse a message larger than the posted receive: that group fails
        // (p2p_work.h); every other case leaves the group usable, as shm does.
        const bool usable_after = !(backend == "gloo" && message > buffer);
        if (rank == 0) {
          std::vector<float> out(message);
          for (std::size_t i = 0; i < message; ++i) out[i] = value(1, i);
          g.send(view_of(out.data(), message), 1, {3})->wait();
          if (!usable_after) return;
          for (std::size_t i = 0; i < message; ++i) out[i] = value(2, i);
          g.send(view_of(out.data(), message), 1, {3})->wait();
        } else {
          std::vector<float> in(std::max(message, buffer), -1.0f);
          std::string error = "no error";
          try {
            g.recv(view_of(in.data(), buffer), 0, {3})->wait();
          } catch (const BackendError& e) {
            error = e.what();
          }
          const std::string want = expected_error(backend, message, buffer);
          if (error.rfind(want, 0) != 0)
            throw std::runtime_error(fmt::format("recv error:\n  got      {}\n  expected {}...", error, want));
          if (usable_after != (error == want))
            throw std::runtime_error(fmt::format("unexpected tail: {}", error));
          if (!usable_after) {
            bool refused = false;
            try {
              g.recv(view_of(in.data(), message), 0, {3})->wait();
            } catch (const BackendError&) {
              refused = true;
            }
            RANK_REQUIRE(refused);  // the group is unusable, and says so at once
            return;
          }
          g.recv(view_of(in.data(), message), 0, {3})->wait();
          check_values(in, message, 2);
        }
        double x = 1.0;
        g.all_reduce(view_of(&x, 1))->wait();
        RANK_REQUIRE(x == 2.0);
      },
      options);
  REQUIRE(test::all_ok(results));
}

}  // namespace

TEST_CASE("p2p: a recv larger or smaller than its message fails alike on shm and gloo", "[shm][gloo][p2p][mp]") {
  for (const char* backend : {"shm", "gloo"}) {
    // Small messages (shm: through the ring) and large ones (shm: single-copy reads).
    for (const std::size_t count : {std::size_t{10}, std::size_t{40000}}) {
      INFO(backend << ": " << count << " floats sent into a recv of " << count + 2);
      run_case(backend, count, count + 2);
      INFO(backend << ": " << count + 2 << " floats sent into a recv of " << count);
      run_case(backend, count + 2, count);
    }
  }
}
