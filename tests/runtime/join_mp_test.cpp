// Joining in real processes: the environment sources, the join timeout naming missing ranks,
// and peers that fail or die in a collective (survivors fail with a named error, not a hang).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/free_port.h"
#include "test_support/rank_runner.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("join: fastrun variables, local layout and peers", "[join][mp]") {
  auto results = test::run_ranks(3, [](int rank) {
    auto ctx = join({"gloo"});
    RANK_REQUIRE(ctx->source() == "fastrun");
    RANK_REQUIRE(ctx->rank() == rank && ctx->world_size() == 3);
    RANK_REQUIRE(ctx->local_rank() == rank && ctx->local_world_size() == 3);
    RANK_REQUIRE(ctx->device() == DeviceKind::cpu && ctx->device_identity() == "cpu");
    RANK_REQUIRE(current_context() == ctx);
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("join: auto prefers shm on one node when it is built, else gloo", "[join][mp]") {
  test::RankRunOptions o;
  o.unset_env = {{"FASTRUN_BACKEND", ""}};
  auto results = test::run_ranks(
      2,
      [](int rank) {
        auto ctx = join();
        const std::string want = backend::available("shm") ? "shm" : "gloo";
        if (ctx->world().backend_name() != want)
          throw std::runtime_error("auto chose " + ctx->world().backend_name() + ", expected " + want);
        RANK_REQUIRE(ctx->world().works_on_host_memory());
        RANK_REQUIRE(&ctx->world().cpu_group() == &ctx->world());
        std::int64_t v = rank + 1;
        ctx->world().all_reduce(view_of(&v, 1))->wait();
        RANK_REQUIRE(v == 3);
      },
      o);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("join: torchrun variables, rank 0 hosts a tcp store on MASTER_PORT", "[join][mp]") {
  const int port = test::free_port();
  test::RankRunOptions o;
  o.set_fastrun_env = false;
  o.unset_env = {{"FASTRUN_RANK", ""}, {"FASTRUN_WORLD_SIZE", ""}, {"FASTRUN_STORE", ""}};
  auto results = test::run_ranks(
      2,
      [port](int rank) {
        ::setenv("RANK", std::to_string(rank).c_str(), 1);
        ::setenv("WORLD_SIZE", "2", 1);
        ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("MASTER_ADDR", "127.0.0.1", 1);
        ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        if (rank == 1) std::this_thread::sleep_for(50ms);  // the host is up first in practice; either order works
        auto ctx = join({"gloo"});
        RANK_REQUIRE(ctx->source() == "torchrun");
        std::int64_t v = rank + 1;
        ctx->world().all_reduce(view_of(&v, 1))->wait();
        RANK_REQUIRE(v == 3);
        ctx->world().barrier()->wait();  // rank 0 hosts the store: nobody leaves before the others are done
      },
      o);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("join: Slurm variables with FASTRUN_STORE", "[join][mp]") {
  auto results = test::run_ranks(2, [](int rank) {
    ::unsetenv("FASTRUN_RANK");
    ::unsetenv("FASTRUN_WORLD_SIZE");
    ::unsetenv("FASTRUN_LOCAL_RANK");
    ::unsetenv("FASTRUN_LOCAL_WORLD_SIZE");
    ::setenv("SLURM_PROCID", std::to_string(rank).c_str(), 1);
    ::setenv("SLURM_NTASKS", "2", 1);
    auto ctx = join({"gloo"});
    RANK_REQUIRE(ctx->source() == "slurm");
    RANK_REQUIRE(ctx->local_world_size() == 2 && ctx->local_rank() == rank);  // computed from host names
    std::int64_t v = 1;
    ctx->world().all_reduce(view_of(&v, 1))->wait();
    RANK_REQUIRE(v == 2);
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("join: a timeout names the ranks that never arrived", "[join][mp]") {
  test::RankRunOptions o;
  o.extra_env = {{"FASTRUN_TIMEOUT", "1"}};
  auto results = test::run_ranks(
      4,
      [](int rank) {
        if (rank >= 2) return;  // ranks 2 and 3 never join
        const auto start = std::chrono::steady_clock::now();
        try {
          join({"gloo"});
        } catch (const TimeoutError& e) {
          const std::string m = e.what();
          RANK_REQUIRE(m.find("never arrived: [2, 3]") != std::string::npos);
          RANK_REQUIRE(m.find("FASTRUN_TIMEOUT") != std::string::npos);
          RANK_REQUIRE(seconds_since(start) < 5);
          return;
        }
        throw std::runtime_error("join did not time out");
      },
      o);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("peer failure: a rank killed mid-collective fails the others with its rank", "[join][mp][failure]") {
  auto results = test::run_ranks(3, [](int rank) {
    auto ctx = join({"gloo"});
    std::vector<float> v(1 << 16, 1.0f);
    ctx->world().all_reduce(view_of(v.data(), v.size()))->wait();
    if (rank == 2) ::raise(SIGKILL);
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 1000; ++i) ctx->world().all_reduce(view_of(v.data(), v.size()))->wait();
    } catch (const PeerFailure& e) {
      const std::string m = e.what();
      if (m.find("rank 2") == std::string::npos) throw std::runtime_error("message does not name rank 2: " + m);
      RANK_REQUIRE(seconds_since(start) < 10);
      return;
    }
    throw std::runtime_error("the collectives kept succeeding after rank 2 died");
  });
  REQUIRE(results[2].signal == SIGKILL);
  results.pop_back();
  REQUIRE(test::all_ok(results));
}

TEST_CASE("peer failure: the failure key fails a blocked collective within a second or so", "[join][mp][failure]") {
  auto results = test::run_ranks(2, [](int rank) {
    auto ctx = join({"gloo"});
    if (rank == 1) {  // publishes its failure and never takes part in the collective
      ctx->report_failure("injected failure");
      std::this_thread::sleep_for(3s);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> v(8, 1.0);
    try {
      ctx->world().all_reduce(view_of(v.data(), v.size()))->wait();
    } catch (const PeerFailure& e) {
      const std::string m = e.what();
      if (m.find("rank 1: injected failure") == std::string::npos) throw std::runtime_error("unexpected: " + m);
      RANK_REQUIRE(seconds_since(start) < 2.5);
      // The group is now unusable, and says why at once (the same BackendError on every backend).
      bool refused = false;
      try {
        ctx->world().barrier();
      } catch (const BackendError& again) {
        refused = std::string(again.what()).find("rank 1: injected failure") != std::string::npos;
      }
      RANK_REQUIRE(refused);
      return;
    }
    throw std::runtime_error("the all_reduce did not fail");
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("op timeout: a collective nobody joins times out with its name", "[join][mp][failure]") {
  test::RankRunOptions o;
  o.extra_env = {{"FASTRUN_OP_TIMEOUT", "0.5"}};
  auto results = test::run_ranks(
      2,
      [](int rank) {
        auto ctx = join({"gloo"});
        if (rank == 1) {
          std::this_thread::sleep_for(2s);
          return;
        }
        std::vector<double> v(8, 1.0);
        try {
          ctx->world().all_reduce(view_of(v.data(), v.size()))->wait();
        } catch (const TimeoutError& e) {
          RANK_REQUIRE(std::string(e.what()).find("all_reduce") != std::string::npos);
          return;
        }
        throw std::runtime_error("no timeout");
      },
      o);
  REQUIRE(test::all_ok(results));
}
