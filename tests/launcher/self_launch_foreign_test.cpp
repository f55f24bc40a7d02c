// launch_self under another launcher: when the environment already describes a world (fastrun's
// CLI, torchrun, srun, mpirun), it starts nothing and join() joins that world. Each rank here is
// a real process started with the variables its launcher sets; had launch_self spawned, the
// output would show extra ranks in private worlds ("joined rank 0 of 4").
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/silent_listener.h"
#include "test_support/skip.h"
#include "test_support/torch_python.h"

using namespace fastrun::test;
using namespace std::chrono_literals;
using Env = std::map<std::string, std::optional<std::string>>;

namespace {

// The partner in launch_self mode (4 ranks asked for), then join and a world barrier (a rank
// that hosts the store must not leave before the others are done).
const std::vector<std::string> kSelfJoin = {"--self", "4", "--join", "--world-barrier"};

// Starts one process per rank with env_of(rank) on top of an environment without fastrun's
// variables, and checks each joined the world of `world` ranks from `source`, and nothing else ran.
void check_world(int world, const std::string& source, const std::function<Env(int)>& env_of) {
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < world; ++r) {
    Env env = {{"FASTRUN_RANK", std::nullopt}, {"FASTRUN_WORLD_SIZE", std::nullopt}, {"FASTRUN_STORE", std::nullopt}};
    for (auto& [k, v] : env_of(r)) env[k] = v;
    std::vector<std::string> argv{kPartner};
    argv.insert(argv.end(), kSelfJoin.begin(), kSelfJoin.end());
    dirs.push_back(std::make_unique<TempDir>());
    ranks.push_back(std::make_unique<Process>(argv, env, dirs.back()->path()));
  }
  for (int r = 0; r < world; ++r) {
    const auto res = ranks[static_cast<std::size_t>(r)]->finish(20s);
    INFO(source << " rank " << r << " stderr: " << res.err);
    CHECK(res.exit_code == 0);
    CHECK(res.out == "joined rank " + std::to_string(r) + " of " + std::to_string(world) + " from " + source + "\n");
  }
}

}  // namespace

// The agent's store is a real torch.distributed.TCPStore (python3-torch); torchrun_test.cpp runs
// the real torchrun.
TEST_CASE("launch_self under torchrun joins torchrun's world through its agent's c10d store", "[launcher][self]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  TorchStoreServer agent_store;
  check_world(2, "torchrun", [&](int r) -> Env {
    const std::string rs = std::to_string(r);
    return {{"RANK", rs}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", rs}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "0"},
            {"ROLE_RANK", rs}, {"ROLE_WORLD_SIZE", "2"}, {"GROUP_WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", std::to_string(agent_store.port())}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
            {"TORCHELASTIC_RUN_ID", "none"}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"TORCHELASTIC_MAX_RESTARTS", "0"},
            {"OMP_NUM_THREADS", "1"}};
  });
}

TEST_CASE("launch_self under a torchrun whose agent store fastrun cannot speak falls back to shm on one node",
          "[launcher][self]") {
  SilentListener agent_store;  // no answer to the client's probe within FASTRUN_TIMEOUT (2 s)
  const std::string port = std::to_string(agent_store.port());
  check_world(2, "torchrun", [&](int r) -> Env {
    const std::string rs = std::to_string(r);
    return {{"RANK", rs}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", rs}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "0"},
            {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
            {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"FASTRUN_TIMEOUT", "2"}};
  });
}

TEST_CASE("launch_self under torchrun-style variables (PyTorchJob) joins their world", "[launcher][self]") {
  const std::string port = std::to_string(free_port());
  check_world(2, "torchrun", [&](int r) -> Env {
    const std::string rs = std::to_string(r);
    return {{"RANK", rs}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
  });
}

TEST_CASE("launch_self under srun joins Slurm's world", "[launcher][self]") {
  const std::string port = std::to_string(free_port());
  check_world(2, "slurm", [&](int r) -> Env {
    const std::string rs = std::to_string(r);
    // srun's per-task variables; MASTER_ADDR/PORT come from the batch script, as usual.
    return {{"SLURM_PROCID", rs}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", rs}, {"SLURM_NODEID", "0"},
            {"SLURM_NNODES", "1"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NPROCS", "2"},
            {"SLURM_STEP_NODELIST", "localhost"}, {"SLURM_JOB_NODELIST", "localhost"}, {"SLURM_STEP_NUM_NODES", "1"},
            {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "2"},
            {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
  });
}

TEST_CASE("launch_self under mpirun joins Open MPI's world", "[launcher][self]") {
  const std::string port = std::to_string(free_port());
  check_world(2, "openmpi", [&](int r) -> Env {
    const std::string rs = std::to_string(r);
    // mpirun's per-process variables; MASTER_ADDR/PORT passed with -x.
    return {{"OMPI_COMM_WORLD_RANK", rs}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", rs},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_NODE_RANK", "0"}, {"PMIX_RANK", rs},
            {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
  });
}

TEST_CASE("launch_self under the fastrun CLI joins the CLI's world", "[launcher][self]") {
  std::vector<std::string> partner = kSelfJoin;
  const auto r = run(cmd({"--nproc", "2"}, partner), {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "joined rank 0 of 2 from fastrun\n"));
  CHECK(contains(r.out, "joined rank 1 of 2 from fastrun\n"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2);
}
