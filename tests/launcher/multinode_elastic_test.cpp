// fastrun --nnodes MIN:MAX (docs/multinode.md, "Elastic membership"): three launchers on
// 127.0.0.1 as three nodes of 2 ranks each. A node whose launcher is SIGKILLed is left out of the
// next attempt, which runs on the nodes left with ranks renumbered contiguously, as long as MIN
// are left; below MIN the job ends naming the lost node and MIN. A launcher started again with
// the lost node's --node-rank stops the running attempt, and the next one runs on all three.
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "multinode_nodes.h"
#include "process_runner.h"
#include "test_support/free_port.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

std::string run_id_arg(const std::string& tag) { return "t-el-" + tag + "-" + std::to_string(::getpid()); }

Strings elastic_flags(const std::string& nnodes, Strings more) {
  // node_flags() gives --nnodes 3 first: the later --nnodes wins, as on the command line.
  more.insert(more.begin(), {"--nproc", "2", "--nnodes", nnodes});
  return more;
}

}  // namespace

TEST_CASE("three nodes with --nnodes 2:3: node 2's launcher SIGKILLed and the job goes on with 2 nodes and 4 ranks",
          "[launcher][multinode][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("shrink");
  const Strings flags = elastic_flags("2:3", {"--run-id", id, "--log-dir", d + "/logs"});
  // Attempt 0: all six ranks join, write their pid and wait to be stopped. Attempt 1 (the four
  // ranks of nodes 0 and 1) dumps its environment and all-reduces across both nodes over gloo.
  const Strings partner = {"--on-attempt", "1", "--dump", d + "/dump1-%r", "--join", "--on-attempt", "0",
                           "--pidfile", d + "/pid-%r", "--on-attempt", "0", "--sleep", "60", "--world-allreduce",
                           "--out", "done %r"};
  Nodes nodes(3, free_port(), {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  const auto pids = read_rank_pids(dir.path(), 0, 6);
  nodes.launchers[2]->signal(SIGKILL);
  nodes.launchers[2]->finish(10s);
  for (int k = 0; k < 2; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "its launcher stopped answering"));
    CHECK(contains(r.err, "fastrun: starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [2]; "
                          "a change of nodes does not count against --max-restarts"));
    CHECK_FALSE(contains(r.err, "attempt 2"));
  }
  // Attempt 1: ranks 0..3, node ranks 0 and 1, the world of the two nodes left.
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto a1 = read_dump(dir.path() / ("dump1-" + std::to_string(rank)));
    CHECK(a1.env.at("FASTRUN_RANK") == std::to_string(rank));
    CHECK(a1.env.at("FASTRUN_WORLD_SIZE") == "4");
    CHECK(a1.env.at("WORLD_SIZE") == "4");
    CHECK(a1.env.at("FASTRUN_NNODES") == "2");
    CHECK(a1.env.at("FASTRUN_NODE_RANK") == std::to_string(rank / 2));
    CHECK(a1.env.at("FASTRUN_LOCAL_RANK") == std::to_string(rank % 2));
    CHECK(a1.env.at("FASTRUN_RESTART_COUNT") == "1");
    CHECK(contains(read_file(dir.path() / "logs" / id / ("attempt-1/rank-" + std::to_string(rank)) / "stdout.log"),
                   "done " + std::to_string(rank) + "\n"));
  }
  CHECK_FALSE(std::filesystem::exists(dir.path() / "dump1-4"));
  expect_nothing_left(pids, id);
}

TEST_CASE("three nodes with --nnodes 2:3: a second node lost leaves fewer than MIN and the job ends naming it",
          "[launcher][multinode][elastic][failure]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("below-min");
  const Strings flags = elastic_flags("2:3", {"--run-id", id, "--max-restarts", "3"});
  // A folder of pidfiles per attempt: the test knows when each attempt's ranks all run.
  std::filesystem::create_directories(dir.path() / "a0");
  std::filesystem::create_directories(dir.path() / "a1");
  const Strings partner = {"--on-attempt", "0", "--pidfile", d + "/a0/pid-%r", "--on-attempt", "1", "--pidfile",
                           d + "/a1/pid-%r", "--sleep", "60"};
  Nodes nodes(3, free_port(), {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  auto pids = read_rank_pids(dir.path() / "a0", 0, 6);
  nodes.launchers[2]->signal(SIGKILL);
  const auto pids1 = read_rank_pids(dir.path() / "a1", 0, 4);
  pids.insert(pids.end(), pids1.begin(), pids1.end());
  nodes.launchers[1]->signal(SIGKILL);
  const auto r = nodes.launchers[0]->finish(60s);
  nodes.launchers[1]->finish(10s);
  nodes.launchers[2]->finish(10s);
  INFO("node 0 stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [2]"));
  CHECK(contains(r.err, "fastrun: the job was stopped: node 1 (host "));
  CHECK(contains(r.err, ") was lost in attempt 1 and 1 node is left, fewer than the 2 of --nnodes 2:3"));
  CHECK_FALSE(contains(r.err, "starting attempt 2"));
  expect_nothing_left(pids, id);
}

TEST_CASE("nodes with different --nnodes MIN:MAX: the second is a usage error naming node 0's",
          "[launcher][multinode][elastic][usage]") {
  TempDir dir;
  const std::string err = second_node_refused(dir, elastic_flags("1:2", {}), elastic_flags("2", {}));
  INFO(err);
  CHECK(contains(err, "--nnodes 2: node 0 runs this job with --nnodes 1:2; give every node the same"));
}

TEST_CASE("three nodes with --nnodes 2:3: node 2 lost then started again and the next attempt runs on 3 nodes",
          "[launcher][multinode][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("grow");
  const Strings flags = elastic_flags("2:3", {"--run-id", id});
  for (const char* a : {"a0", "a1"}) std::filesystem::create_directories(dir.path() / a);
  // Attempts 0 (3 nodes) and 1 (2 nodes): pidfiles, then wait to be stopped. Attempt 2 (3 nodes
  // again): dump the environment, join and all-reduce across the three.
  const Strings partner = {"--on-attempt", "0", "--pidfile", d + "/a0/pid-%r", "--on-attempt", "1", "--pidfile",
                           d + "/a1/pid-%r", "--on-attempt", "0", "--sleep", "60", "--on-attempt", "1", "--sleep",
                           "60", "--dump", d + "/dump2-%r", "--join", "--world-allreduce", "--out", "done %r"};
  const std::uint16_t port = free_port();
  Nodes nodes(3, port, {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  auto pids = read_rank_pids(dir.path() / "a0", 0, 6);
  nodes.launchers[2]->signal(SIGKILL);
  nodes.launchers[2]->finish(10s);
  const auto pids1 = read_rank_pids(dir.path() / "a1", 0, 4);
  pids.insert(pids.end(), pids1.begin(), pids1.end());
  TempDir io;
  Process back(cmd(node_flags(3, 2, port, flags), partner), quiet_env(), io.path());
  const auto rb = back.finish(60s);
  INFO("node 2 (back) stderr: " << rb.err);
  CHECK(rb.exit_code == 0);
  CHECK(contains(rb.err, "fastrun: node 2: the job runs already (--nnodes 2:3); waiting for node 0"));
  for (int k = 0; k < 2; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [2]"));
    CHECK(contains(r.err, "fastrun: the job grows: node 2 (host "));  // nothing failed
    CHECK(contains(r.err, "is back and joins at the next attempt (--nnodes 2:3)"));
    CHECK_FALSE(contains(r.err, "the job failed on node 0"));
    CHECK(contains(r.err, "fastrun: starting attempt 2 of the job on 3 nodes (--nnodes 2:3) with node [2] back; a "
                          "change of nodes does not count against --max-restarts"));
  }
  for (int rank = 0; rank < 6; ++rank) {
    INFO("rank " << rank);
    const auto a2 = read_dump(dir.path() / ("dump2-" + std::to_string(rank)));
    CHECK(a2.env.at("FASTRUN_RANK") == std::to_string(rank));
    CHECK(a2.env.at("WORLD_SIZE") == "6");
    CHECK(a2.env.at("FASTRUN_NNODES") == "3");
    CHECK(a2.env.at("FASTRUN_NODE_RANK") == std::to_string(rank / 2));
    CHECK(a2.env.at("FASTRUN_RESTART_COUNT") == "2");
  }
  expect_nothing_left(pids, id);
}
