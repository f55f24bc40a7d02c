#pragma once
// Runs a test body as N real rank processes (fork, no exec) with fastrun's environment
// contract, and reaps them with a timeout: the launcher-free way to test the runtime.
//   auto results = fastrun::test::run_ranks(3, [](int rank) { auto ctx = fastrun::join(); ... });
//   REQUIRE(fastrun::test::all_ok(results));   // prints every failed rank's message
// Each child gets FASTRUN_RANK, FASTRUN_WORLD_SIZE, FASTRUN_LOCAL_RANK, FASTRUN_LOCAL_WORLD_SIZE,
// FASTRUN_RUN_ID and FASTRUN_STORE (a fresh shm:// store hosted by the parent and removed when
// run_ranks returns), plus `extra_env`. The body reports failure by throwing (use RANK_REQUIRE,
// not Catch's REQUIRE, inside children); its message comes back through a pipe. The processes
// are test::Children (children.h): _exit, and at the deadline (options.timeout, scaled to the
// build: time_limits.h) the remaining children are SIGKILLed and reaped, and marked timed_out.
// Fork only from a single-threaded test process (no live contexts with comm threads).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/store/factory.h"
#include "test_support/children.h"
#include "test_support/time_limits.h"

#define RANK_REQUIRE(cond)                                                                            \
  do {                                                                                                \
    if (!(cond)) throw std::runtime_error(fmt::format("{}:{}: RANK_REQUIRE({}) failed", __FILE__, __LINE__, #cond)); \
  } while (0)

namespace fastrun::test {

struct RankResult {
  int rank = 0;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string message;  // what the body threw
  bool ok() const { return exit_code == 0 && !timed_out; }
};

struct RankRunOptions {
  std::chrono::milliseconds timeout{30000};  // in a normal build; run_ranks scales it
  std::map<std::string, std::string> extra_env;      // set in every child
  std::map<std::string, std::string> unset_env = {}; // keys unset in every child (values ignored)
  bool set_fastrun_env = true;                       // false: the body sets its own environment
};

inline std::string describe(const std::vector<RankResult>& results) {
  std::string out;
  for (const auto& r : results) {
    if (r.ok()) continue;
    out += fmt::format("rank {}: {}{}{}\n", r.rank,
                       r.timed_out ? "timed out (killed)" : r.signal ? fmt::format("killed by signal {}", r.signal)
                                                                     : fmt::format("exit code {}", r.exit_code),
                       r.message.empty() ? "" : ": ", r.message);
  }
  return out;
}

inline bool all_ok(const std::vector<RankResult>& results) {
  const std::string text = describe(results);
  if (!text.empty()) std::fprintf(stderr, "rank failures:\n%s", text.c_str());
  return text.empty();
}

inline std::vector<RankResult> run_ranks(int n, const std::function<void(int rank)>& body, RankRunOptions options = {}) {
  static std::atomic<int> counter{0};
  const std::string name = fmt::format("fastrun-test-{}-{}", getpid(), counter++);
  std::unique_ptr<HostedStore> hosted;
  if (options.set_fastrun_env) hosted = host_store("shm://" + name);

  Children children(/*capture_messages=*/true);  // destroyed before `hosted`
  for (int rank = 0; rank < n; ++rank)
    children.spawn([&, rank] {
      for (const auto& kv : options.unset_env) ::unsetenv(kv.first.c_str());
      if (options.set_fastrun_env) {
        ::setenv("FASTRUN_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("FASTRUN_WORLD_SIZE", std::to_string(n).c_str(), 1);
        ::setenv("FASTRUN_LOCAL_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("FASTRUN_LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
        ::setenv("FASTRUN_RUN_ID", name.c_str(), 1);
        ::setenv("FASTRUN_STORE", hosted->address().c_str(), 1);
      }
      // CPU ranks unless the case gives devices, as the launcher starts ranks without --devices:
      // otherwise on a GPU machine, or under the CPU model of CUDA (docs/cuda-model.md), every
      // rank sees device 0 and join() refuses two ranks on one GPU.
      if (!options.extra_env.count("CUDA_VISIBLE_DEVICES") && !options.extra_env.count("FASTRUN_CUDA_MODEL_DEVICES"))
        ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
      for (const auto& kv : options.extra_env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
      body(rank);
      return 0;
    });

  std::vector<RankResult> results;
  for (auto& s : children.wait_all(scaled(options.timeout))) {
    RankResult r;
    r.rank = static_cast<int>(results.size());
    r.exit_code = s.exited ? s.code : -1;
    r.signal = s.timed_out ? 0 : s.signal;
    r.timed_out = s.timed_out;
    r.message = std::move(s.message);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace fastrun::test
