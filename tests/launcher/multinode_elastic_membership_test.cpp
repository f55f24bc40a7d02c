// fastrun --nnodes MIN:MAX (docs/multinode.md, "Elastic membership"), how the set of nodes is
// chosen: the job starts on the nodes there after the last call once MIN are (torchrun's c10d
// rendezvous), a late node joins the next attempt, and nodes lost together are all left out of the
// next attempt at once (or end the job at once, naming them all, below MIN) rather than after
// FASTRUN_TIMEOUT, which these tests set high so that a wait for it would fail them.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "multinode_nodes.h"
#include "process_runner.h"
#include "test_support/free_port.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

Strings elastic_flags(const std::string& nnodes, const std::string& id, Strings more = {}) {
  // node_flags() gives --nnodes N first: the later --nnodes wins, as on the command line.
  Strings v{"--nproc", "2", "--nnodes", nnodes, "--run-id", id};
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

std::string run_id(const std::string& tag) { return "t-elm-" + tag + "-" + std::to_string(::getpid()); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Attempt 0: a pidfile under DIR/a0 and wait to be stopped; attempt 1: dump the environment, join
// and all-reduce over the whole world, print "done".
Strings two_attempts(const std::string& d) {
  return {"--on-attempt", "0", "--dump", d + "/dump0-%r", "--on-attempt", "0", "--pidfile", d + "/a0/pid-%r",
          "--on-attempt", "0", "--sleep", "60", "--dump", d + "/dump1-%r", "--join", "--world-allreduce",
          "--out", "done %r"};
}

}  // namespace

TEST_CASE("elastic --nnodes 2:3 with 2 nodes there: the job starts on them after the last call and the third joins the next "
          "attempt",
          "[launcher][multinode][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  std::filesystem::create_directories(dir.path() / "a0");
  const Strings flags = elastic_flags("2:3", run_id("last-call"), {"--last-call", "2"});
  const Strings partner = two_attempts(d);
  const std::uint16_t port = free_port();
  const auto env = quiet_env("120");
  TempDir io0, io1, io2;
  const auto started = Clock::now();
  Process node1(cmd(node_flags(3, 1, port, flags), partner), env, io1.path());
  Process node0(cmd(node_flags(3, 0, port, flags), partner), env, io0.path());
  auto pids = read_rank_pids(dir.path() / "a0", 0, 4);
  // Not before the last call (2 s from the second arrival), and on the two nodes there.
  CHECK(seconds_since(started) >= 2.0);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto a0 = read_dump(dir.path() / ("dump0-" + std::to_string(rank)));
    CHECK(a0.env.at("WORLD_SIZE") == "4");
    CHECK(a0.env.at("FASTRUN_NNODES") == "2");
    CHECK(a0.env.at("FASTRUN_NODE_RANK") == std::to_string(rank / 2));
  }
  // The third arrives late: it asks to join, and attempt 1 runs on all three.
  Process node2(cmd(node_flags(3, 2, port, flags), partner), env, io2.path());
  const auto r2 = node2.finish(60s);
  INFO("node 2 stderr: " << r2.err);
  CHECK(r2.exit_code == 0);
  CHECK(contains(r2.err, "fastrun: node 2: the job runs already (--nnodes 2:3); waiting for node 0"));
  const auto r0 = node0.finish(60s);
  const auto r1 = node1.finish(60s);
  INFO("node 0 stderr: " << r0.err);
  INFO("node 1 stderr: " << r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK(contains(r0.err, "fastrun: node 0: 2 of 3 nodes are here (--nnodes 2:3); the job starts in 2 s"));
  CHECK(contains(r0.err, "fastrun: node 0: starting the job on 2 of 3 nodes (--nnodes 2:3): node [2] did not arrive "
                         "within the last call of 2 s and joins at the next attempt when it comes"));
  CHECK(contains(r0.err, "fastrun: starting attempt 1 of the job on 3 nodes (--nnodes 2:3) with node [2] back"));
  for (int rank = 0; rank < 6; ++rank) {
    INFO("rank " << rank);
    const auto a1 = read_dump(dir.path() / ("dump1-" + std::to_string(rank)));
    CHECK(a1.env.at("WORLD_SIZE") == "6");
    CHECK(a1.env.at("FASTRUN_NNODES") == "3");
    CHECK(a1.env.at("FASTRUN_RANK") == std::to_string(rank));
    CHECK(a1.env.at("FASTRUN_RESTART_COUNT") == "1");
  }
  expect_nothing_left(pids, run_id("last-call"));
}

TEST_CASE("elastic --nnodes 2:4: two launchers SIGKILLed together and the next attempt runs at once on the two left",
          "[launcher][multinode][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  std::filesystem::create_directories(dir.path() / "a0");
  const Strings flags = elastic_flags("2:4", run_id("two-lost"));
  const Strings partner = two_attempts(d);
  Nodes nodes(4, free_port(), {flags, flags, flags, flags}, {partner, partner, partner, partner}, quiet_env("120"));
  const auto pids = read_rank_pids(dir.path() / "a0", 0, 8);
  const auto killed = Clock::now();
  nodes.launchers[2]->signal(SIGKILL);
  nodes.launchers[3]->signal(SIGKILL);
  for (int k = 0; k < 2; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "fastrun: starting attempt 1 of the job on 2 nodes (--nnodes 2:4) without lost nodes [2, "
                          "3]; a change of nodes does not count against --max-restarts"));
  }
  // FASTRUN_TIMEOUT is 120 s: the start round did not wait for it.
  const double took = seconds_since(killed);
  INFO("from the kills to the end of the job: " << took << " s");
  CHECK(took < 30.0);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto a1 = read_dump(dir.path() / ("dump1-" + std::to_string(rank)));
    CHECK(a1.env.at("WORLD_SIZE") == "4");
    CHECK(a1.env.at("FASTRUN_NNODES") == "2");
  }
  nodes.launchers[2]->finish(10s);
  nodes.launchers[3]->finish(10s);
  expect_nothing_left(pids, run_id("two-lost"));
}

TEST_CASE("elastic --nnodes 2:3: two launchers SIGKILLed together leave fewer than MIN and the job ends at once naming both",
          "[launcher][multinode][elastic][failure]") {
  TempDir dir;
  const std::string d = dir.str();
  std::filesystem::create_directories(dir.path() / "a0");
  const Strings flags = elastic_flags("2:3", run_id("below-min-two"));
  const Strings partner = {"--pidfile", d + "/a0/pid-%r", "--sleep", "60"};
  Nodes nodes(3, free_port(), {flags, flags, flags}, {partner, partner, partner}, quiet_env("120"));
  const auto pids = read_rank_pids(dir.path() / "a0", 0, 6);
  const auto killed = Clock::now();
  nodes.launchers[1]->signal(SIGKILL);
  nodes.launchers[2]->signal(SIGKILL);
  const auto r = nodes.launchers[0]->finish(60s);
  const double took = seconds_since(killed);
  nodes.launchers[1]->finish(10s);
  nodes.launchers[2]->finish(10s);
  INFO("node 0 stderr: " << r.err);
  INFO("from the kills to the end of the job: " << took << " s");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "fastrun: the job was stopped: nodes 1 (host "));
  CHECK(contains(r.err, ") and 2 (host "));
  CHECK(contains(r.err, ") were lost in attempt 0 and 1 node is left, fewer than the 2 of --nnodes 2:3"));
  CHECK_FALSE(contains(r.err, "starting attempt 1"));
  CHECK(took < 30.0);
  expect_nothing_left(pids, run_id("below-min-two"));
}

TEST_CASE("elastic --nnodes 2:3: a node lost in the back-off before a restart: that attempt is skipped and the next runs "
          "at once on the nodes left",
          "[launcher][multinode][elastic][restarts]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id("lost-in-backoff");
  const Strings flags = elastic_flags("2:3", id, {"--max-restarts", "3"});
  // Node 1's ranks fail in attempts 0..2; restart 3 waits 2 s first, and node 2 is killed then.
  // Attempt 4, on nodes 0 and 1, succeeds.
  Strings sleeper = {"--on-attempt", "0", "--sleep", "60", "--on-attempt", "1", "--sleep", "60",
                     "--on-attempt", "2", "--sleep", "60", "--dump", d + "/dump-%r", "--out", "done %r"};
  Strings failing = {"--on-attempt", "0", "--exit", "3", "--on-attempt", "1", "--exit", "3",
                     "--on-attempt", "2", "--exit", "3", "--dump", d + "/dump-%r", "--out", "done %r"};
  Nodes nodes(3, free_port(), {flags, flags, flags}, {sleeper, failing, sleeper}, quiet_env("120"));
  const std::string notice = "fastrun: starting attempt 3 of the job (restart 3 of --max-restarts 3) in 2 s";
  const auto deadline = Clock::now() + 60s;
  while (!contains(read_file(nodes.launchers[2]->err_path()), notice) && Clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(contains(read_file(nodes.launchers[2]->err_path()), notice));
  const auto killed = Clock::now();
  nodes.launchers[2]->signal(SIGKILL);
  const auto r0 = nodes.launchers[0]->finish(60s);
  const double took = seconds_since(killed);
  const auto r1 = nodes.launchers[1]->finish(20s);
  nodes.launchers[2]->finish(10s);
  INFO("node 0 stderr: " << r0.err);
  INFO("node 1 stderr: " << r1.err);
  INFO("from the kill to the end of the job: " << took << " s");
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK(contains(r0.err, "fastrun: node 2 (host "));
  CHECK(contains(r0.err, ") was lost before attempt 3 started; the job goes on without it"));
  for (const auto* err : {&r0.err, &r1.err})
    CHECK(contains(*err, "fastrun: starting attempt 4 of the job on 2 nodes (--nnodes 2:3) without lost node [2]; a "
                         "change of nodes does not count against --max-restarts"));
  CHECK(took < 30.0);  // FASTRUN_TIMEOUT is 120 s
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto a4 = read_dump(dir.path() / ("dump-" + std::to_string(rank)));
    CHECK(a4.env.at("WORLD_SIZE") == "4");
    CHECK(a4.env.at("FASTRUN_RESTART_COUNT") == "4");
  }
  CHECK(shm_entries("fastrun-" + id).empty());
}
