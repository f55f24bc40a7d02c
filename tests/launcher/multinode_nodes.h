#pragma once
// Launchers as the nodes of one job on 127.0.0.1 (docs/multinode.md), for the multi-node tests
// (multinode_test.cpp, multinode_restarts_test.cpp): node 0's TCP store on a free port.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process_runner.h"

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

}  // namespace fastrun::test
