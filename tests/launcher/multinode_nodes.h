#pragma once
// Launchers as the nodes of one job on 127.0.0.1 (docs/multinode.md), for the multi-node tests
// (multinode_test.cpp, multinode_restarts_test.cpp): node 0's TCP store on a free port.
#include <signal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"

namespace fastrun::test {

using Strings = std::vector<std::string>;

using Env = std::map<std::string, std::optional<std::string>>;

// The launcher flags of node `k` of `n` whose node 0 listens on `port`.
inline Strings node_flags(int n, int k, std::uint16_t port, Strings more) {
  Strings v{"--nnodes", std::to_string(n), "--node-rank", std::to_string(k), "--master-addr", "127.0.0.1",
            "--master-port", std::to_string(port)};
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

inline Env quiet_env(const char* timeout = "20") {
  return {{"FASTRUN_TIMEOUT", timeout}, {"FASTRUN_STORE_TOKEN", "multinode-test-secret"},
          {"FASTRUN_GLOBAL_SEED", std::nullopt}, {"FASTRUN_GLOO_HOST", std::nullopt}};
}

// One launcher per node; node 0 last, so that the others' retrying connect is exercised.
struct Nodes {
  std::vector<std::unique_ptr<TempDir>> io;
  std::vector<std::unique_ptr<Process>> launchers;  // index = node rank

  Nodes(int n, std::uint16_t port, const std::vector<Strings>& launcher_args, const std::vector<Strings>& partner_args,
        const Env& env) {
    launchers.resize(static_cast<std::size_t>(n));
    for (int k = n - 1; k >= 0; --k) {
      io.push_back(std::make_unique<TempDir>());
      launchers[static_cast<std::size_t>(k)] = std::make_unique<Process>(
          cmd(node_flags(n, k, port, launcher_args[static_cast<std::size_t>(k)]), partner_args[static_cast<std::size_t>(k)]),
          env, io.back()->path());
    }
  }
  std::vector<RunResult> finish(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::vector<RunResult> out;
    for (auto& l : launchers) out.push_back(l->finish(timeout));
    return out;
  }
};

// Every pid is gone within 5 s, and so are the job's /dev/shm segments.
inline void expect_nothing_left(const std::vector<pid_t>& pids, const std::string& run_id) {
  wait_until_gone(pids, std::chrono::seconds(5));
  for (pid_t p : pids) CHECK(process_gone(p));
  CHECK(shm_entries("fastrun-" + run_id).empty());
}

// Two launchers whose flags disagree on something node 0 fixes for the job: node 1's usage error
// (exit 2, before it starts a rank: DIR/pid-2 is never written); node 0 is then stopped.
inline std::string second_node_refused(const TempDir& dir, const Strings& node0_flags, const Strings& node1_flags) {
  const Strings partner = {"--pidfile", dir.str() + "/pid-%r", "--sleep", "60"};
  Nodes nodes(2, free_port(), {node0_flags, node1_flags}, {partner, partner}, quiet_env());
  const auto r1 = nodes.launchers[1]->finish(std::chrono::seconds(20));
  CHECK(r1.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-2"));
  nodes.launchers[0]->signal(SIGTERM);
  nodes.launchers[0]->finish(std::chrono::seconds(20));
  return r1.err;
}

}  // namespace fastrun::test
