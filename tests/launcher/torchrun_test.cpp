// fastrun programs under the REAL torchrun, of two versions: Debian's python3-torch 1.13 (through
// test_support/torchrun.py, which fixes its start on Python 3.11) and PyPI's torch 2.x from the
// venv of tools/install-torch2.sh (`python -m torch.distributed.run`); every case is a template
// over the two (TEMPLATE_TEST_CASE: one CTest test each, each skipped on its own). In static
// rendezvous mode the agent serves its own c10d TCPStore on MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True) and every rank joins through it with fastrun's c10d
// client, on one node and across two "nodes" (two agents on 127.0.0.1). In standalone mode
// torchrun 1.13 leaves MASTER_PORT free (rank 0 hosts fastrun's tcp store there), while 2.x
// shares its rendezvous store (a multi-tenant libuv TCPStore on a port of its own, again
// TORCHELASTIC_USE_AGENT_STORE=True), which the ranks join through. Each rank joins,
// all-reduces (rank + 1) and prints the sum and its layout (sparring_partner --allreduce).
// Skipped without torch.
#include <algorithm>
#include <memory>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/skip.h"
#include "test_support/time_limits.h"
#include "test_support/torch_python.h"

using namespace fastrun::test;
using namespace std::chrono_literals;
using Env = std::map<std::string, std::optional<std::string>>;

namespace {

const std::string kTorchrunWrapper = TORCHRUN_WRAPPER;

// The torchrun a case runs under (the template parameter): how to start it, and what differs.
struct Torch1 {
  static bool available() { return torch_python_available(); }
  static std::string skip_reason() { return no_torch_reason(); }
  static std::vector<std::string> start() { return {torch_python(), kTorchrunWrapper}; }
  static constexpr const char* kNoPython = "--no_python";
  // --standalone: MASTER_PORT is left free; rank 0 hosts a tcp store on it.
  static constexpr const char* kStandaloneStore = "store tcp://localhost:";
};
struct Torch2 {
  static bool available() { return torch2_python_available(); }
  static std::string skip_reason() { return no_torch2_reason(); }
  static std::vector<std::string> start() { return {torch2_python(), "-m", "torch.distributed.run"}; }
  static constexpr const char* kNoPython = "--no-python";
  // --standalone: the agent shares its rendezvous store (TORCH_DISABLE_SHARE_RDZV_TCP_STORE unset).
  static constexpr const char* kStandaloneStore = "store c10d://";
};

// TORCHRUN ARGS --no-python sparring_partner PARTNER_ARGS
template <typename T>
std::vector<std::string> torchrun(std::vector<std::string> args, const std::vector<std::string>& partner) {
  std::vector<std::string> v = T::start();
  v.insert(v.end(), args.begin(), args.end());
  v.push_back(T::kNoPython);
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
// torchrun, with this store, the first one tried: no fallback after a store that did not answer.
void check_ranks(const RunResult& r, int world, int local, const std::string& store) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  const std::string sum = "allreduce " + std::to_string(world * (world + 1) / 2) + " ";
  std::size_t sums = 0;
  for (auto at = r.out.find(sum); at != std::string::npos; at = r.out.find(sum, at + 1)) ++sums;
  CHECK(sums == static_cast<std::size_t>(local));
  CHECK(contains(r.out, "from torchrun"));
  CHECK(contains(r.err, store));
  CHECK_FALSE(contains(r.err, "does not answer"));
  CHECK_FALSE(contains(r.err, "(hosted by rank 0) instead"));
}

}  // namespace

TEMPLATE_TEST_CASE("torchrun static rendezvous: ranks join through the agent's c10d store", "[launcher][torchrun]",
                   Torch1, Torch2) {
  if (!TestType::available()) return skip_case(TestType::skip_reason());
  const std::string port = std::to_string(free_port());
  TempDir dir;
  Process agent(torchrun<TestType>({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port,
                          "--nnodes", "1", "--node_rank", "0", "--nproc_per_node", "2"},
                         {"--allreduce"}),
                agent_env(dir), dir.path());
  const auto r = agent.finish(scaled(100s));
  check_ranks(r, 2, 2, "store c10d://127.0.0.1:" + port);
  CHECK(contains(r.out, "layout rank 0 of 2 local 0 of 2 node 0 from torchrun"));
  CHECK(contains(r.out, "layout rank 1 of 2 local 1 of 2 node 0 from torchrun"));
}

TEMPLATE_TEST_CASE("torchrun standalone: the ranks join through rank 0's store or the agent's", "[launcher][torchrun]",
                   Torch1, Torch2) {
  if (!TestType::available()) return skip_case(TestType::skip_reason());
  TempDir dir;
  Process agent(torchrun<TestType>({"--standalone", "--nproc_per_node", "2"}, {"--allreduce"}), agent_env(dir), dir.path());
  const auto r = agent.finish(scaled(100s));
  check_ranks(r, 2, 2, TestType::kStandaloneStore);
}

TEMPLATE_TEST_CASE("torchrun static rendezvous on two nodes: four ranks join through node 0's agent store",
                   "[launcher][torchrun][multinode]", Torch1, Torch2) {
  if (!TestType::available()) return skip_case(TestType::skip_reason());
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> agents;
  for (const char* node : {"0", "1"}) {
    dirs.push_back(std::make_unique<TempDir>());
    agents.push_back(std::make_unique<Process>(
        torchrun<TestType>({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port, "--nnodes", "2",
                  "--node_rank", node, "--nproc_per_node", "2"},
                 {"--allreduce"}),
        agent_env(*dirs.back()), dirs.back()->path()));
  }
  std::string all_out;
  for (std::size_t node = 0; node < agents.size(); ++node) {
    const auto r = agents[node]->finish(scaled(100s));
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

TEMPLATE_TEST_CASE("torchrun static rendezvous: launch_self starts nothing and joins torchrun's world",
                   "[launcher][torchrun][self]", Torch1, Torch2) {
  if (!TestType::available()) return skip_case(TestType::skip_reason());
  const std::string port = std::to_string(free_port());
  TempDir dir;
  Process agent(torchrun<TestType>({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port,
                          "--nnodes", "1", "--node_rank", "0", "--nproc_per_node", "2"},
                         {"--self", "4", "--join", "--world-barrier"}),
                agent_env(dir), dir.path());
  const auto r = agent.finish(scaled(100s));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "joined rank 0 of 2 from torchrun\n"));
  CHECK(contains(r.out, "joined rank 1 of 2 from torchrun\n"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2);
  CHECK(contains(r.err, "store c10d://127.0.0.1:" + port));
  CHECK_FALSE(contains(r.err, "does not answer"));
}

// FASTRUN_STORE=file://… under two torchrun agents used to wait silently for FASTRUN_TIMEOUT
// (300 s) for a store directory that nothing in a torchrun job creates. Now every rank fails at
// once, naming the value and what works instead, and torchrun ends the job (the agents exit
// with 1). A hang would be cut by finish's limit, well below the 300 s.
TEMPLATE_TEST_CASE("torchrun on two nodes with FASTRUN_STORE=file://... that nothing hosts: every rank fails at once",
                   "[launcher][torchrun][multinode]", Torch1, Torch2) {
  if (!TestType::available()) return skip_case(TestType::skip_reason());
  const std::string port = std::to_string(free_port());
  TempDir shared;
  const std::string store = "file://" + shared.str() + "/store";
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> agents;
  for (const char* node : {"0", "1"}) {
    dirs.push_back(std::make_unique<TempDir>());
    Env env = agent_env(*dirs.back());
    env["FASTRUN_STORE"] = store;
    agents.push_back(std::make_unique<Process>(
        torchrun<TestType>({"--rdzv_backend", "static", "--master_addr", "127.0.0.1", "--master_port", port, "--nnodes",
                            "2", "--node_rank", node, "--nproc_per_node", "2"},
                           {"--allreduce"}),
        env, dirs.back()->path()));
  }
  for (std::size_t node = 0; node < agents.size(); ++node) {
    const auto r = agents[node]->finish(scaled(100s));
    CAPTURE(node);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code != 0);
    CHECK(contains(r.err, "FASTRUN_STORE=" + store + " names no existing store"));
    CHECK(contains(r.err, "Unset FASTRUN_STORE: the ranks then join through torchrun's agent store"));
    CHECK_FALSE(contains(r.out, "allreduce"));
  }
}

// The same check without torch: the variables torchrun (or srun) gives a rank, and a
// FASTRUN_STORE of a kind connect_store would wait for (shm://, file://) that does not exist.
TEST_CASE("torchrun or srun variables with FASTRUN_STORE naming a store nothing hosts: join fails at once",
          "[launcher][torchrun]") {
  TempDir dir;
  struct Case {
    Env env;
    std::string store, says;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"},
        {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
       "file://" + dir.str() + "/never",
       "rank 1 of 2 (torchrun environment): FASTRUN_STORE=file://" + dir.str() +
           "/never names no existing store (its directory's owner marker not found)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "shm://fastrun-test-never-hosted",
       "rank 0 of 2 (torchrun environment): FASTRUN_STORE=shm://fastrun-test-never-hosted names no existing store "
       "(its shm segment not found)"},
      {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}}, "file://" + dir.str() + "/never",
       "Unset FASTRUN_STORE: rank 0 then hosts tcp://MASTER_ADDR:MASTER_PORT"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.store);
    Env env = agent_env(dir);
    env.insert(c.env.begin(), c.env.end());
    env["FASTRUN_STORE"] = c.store;
    env["FASTRUN_TIMEOUT"] = "300";
    const auto r = run({kPartner, "--allreduce"}, env, scaled(20s));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 66);
    CHECK(contains(r.err, c.says));  // at once: run() fails the case after 20 s, not FASTRUN_TIMEOUT's 300
  }
}
