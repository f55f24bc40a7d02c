// fastrun programs under the REAL torchrun (python3-torch 1.13, through test_support/torchrun.py,
// which fixes its start on Python 3.11): in standalone mode (rank 0 hosts fastrun's tcp store on
// the MASTER_PORT the agent picked) and in static rendezvous mode, where the agent serves its own
// c10d TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True) and every rank joins through
// it with fastrun's c10d client, on one node and across two "nodes" (two agents on 127.0.0.1).
// Each rank joins, all-reduces (rank + 1) and prints the sum and its layout (sparring_partner
// --allreduce). Skipped without torch.
#include <algorithm>
#include <memory>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/skip.h"
#include "test_support/torch_python.h"

using namespace fastrun::test;
using namespace std::chrono_literals;
using Env = std::map<std::string, std::optional<std::string>>;

namespace {

const std::string kTorchrunWrapper = TORCHRUN_WRAPPER;

// python3 torchrun.py ARGS --no_python sparring_partner PARTNER_ARGS
std::vector<std::string> torchrun(std::vector<std::string> args, const std::vector<std::string>& partner) {
  std::vector<std::string> v{torch_python(), kTorchrunWrapper};
  v.insert(v.end(), args.begin(), args.end());
  v.push_back("--no_python");
  v.push_back(kPartner);
  v.insert(v.end(), partner.begin(), partner.end());
  return v;
}

// No fastrun job around the agent; info logs say which store each rank used; torchrun's log
// directory (a mkdtemp) goes into the test's own directory, removed with it.
Env agent_env(const TempDir& dir) {
  return {{"FASTRUN_RANK", std::nullopt}, {"FASTRUN_WORLD_SIZE", std::nullopt}, {"FASTRUN_STORE", std::nullopt},
          {"FASTRUN_LOG_LEVEL", "info"}, {"TMPDIR", dir.str()}};
}

// Each of an agent's `local` ranks printed the right sum over `world` ranks, joined from
// torchrun, with this store.
void check_ranks(const RunResult& r, int world, int local, const std::string& store) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  const std::string sum = "allreduce " + std::to_string(world * (world + 1) / 2) + " ";
  std::size_t sums = 0;
  for (auto at = r.out.find(sum); at != std::string::npos; at = r.out.find(sum, at + 1)) ++sums;
  CHECK(sums == static_cast<std::size_t>(local));
  CHECK(contains(r.out, "from torchrun"));
  CHECK(contains(r.err, store));
}

}  // namespace

TEST_CASE("torchrun static rendezvous: ranks join through the agent's c10d store", "[launcher][torchrun]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  const std::string port = std::to_string(free_port());
  TempDir dir;
  Process agent(torchrun({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port,
                          "--nnodes", "1", "--node_rank", "0", "--nproc_per_node", "2"},
                         {"--allreduce"}),
                agent_env(dir), dir.path());
  const auto r = agent.finish(100s);
  check_ranks(r, 2, 2, "store c10d://127.0.0.1:" + port);
  CHECK(contains(r.out, "layout rank 0 of 2 local 0 of 2 node 0 from torchrun"));
  CHECK(contains(r.out, "layout rank 1 of 2 local 1 of 2 node 0 from torchrun"));
}

TEST_CASE("torchrun standalone: rank 0 hosts fastrun's store on the agent's MASTER_PORT", "[launcher][torchrun]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  TempDir dir;
  Process agent(torchrun({"--standalone", "--nproc_per_node", "2"}, {"--allreduce"}), agent_env(dir), dir.path());
  const auto r = agent.finish(100s);
  check_ranks(r, 2, 2, "store tcp://localhost:");
}

TEST_CASE("torchrun static rendezvous on two nodes: four ranks join through node 0's agent store",
          "[launcher][torchrun][multinode]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> agents;
  for (const char* node : {"0", "1"}) {
    dirs.push_back(std::make_unique<TempDir>());
    agents.push_back(std::make_unique<Process>(
        torchrun({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port, "--nnodes", "2",
                  "--node_rank", node, "--nproc_per_node", "2"},
                 {"--allreduce"}),
        agent_env(*dirs.back()), dirs.back()->path()));
  }
  std::string all_out;
  for (std::size_t node = 0; node < agents.size(); ++node) {
    const auto r = agents[node]->finish(100s);
    CAPTURE(node);
    check_ranks(r, 4, 2, "store c10d://127.0.0.1:" + port);
    all_out += r.out;
  }
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(contains(all_out, "layout rank " + std::to_string(rank) + " of 4 local " + std::to_string(rank % 2) +
                                " of 2 node " + std::to_string(rank / 2) + " from torchrun"));
  }
}

TEST_CASE("torchrun static rendezvous: launch_self starts nothing and joins torchrun's world", "[launcher][torchrun][self]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  const std::string port = std::to_string(free_port());
  TempDir dir;
  Process agent(torchrun({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port,
                          "--nnodes", "1", "--node_rank", "0", "--nproc_per_node", "2"},
                         {"--self", "4", "--join", "--world-barrier"}),
                agent_env(dir), dir.path());
  const auto r = agent.finish(100s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "joined rank 0 of 2 from torchrun\n"));
  CHECK(contains(r.out, "joined rank 1 of 2 from torchrun\n"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2);
}
