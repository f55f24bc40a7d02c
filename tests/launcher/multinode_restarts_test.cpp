// fastrun --max-restarts across nodes (docs/launching.md, "Restarts"): two launchers on
// 127.0.0.1 as two nodes of 2 ranks each. A failure on one node restarts the whole job on both,
// with a fresh store and the attempt number from node 0's store; the count is the job's; a
// signal to a launcher ends the job; nothing is left behind.
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

std::string run_id_arg(const std::string& tag) { return "t-mn-" + tag + "-" + std::to_string(::getpid()); }

// The last attempt's four ranks (pids in DIR/pid-<rank>) are gone, and so are the job's segments.
void expect_nothing_left(const TempDir& dir, const std::string& id) {
  fastrun::test::expect_nothing_left(read_rank_pids(dir.path(), 0, 4), id);
}

Strings two_ranks(Strings more) {
  more.insert(more.begin(), {"--nproc", "2"});
  return more;
}

}  // namespace

TEST_CASE("two nodes: a rank of node 1 failing in attempt 0 restarts both and attempt 1 succeeds",
          "[launcher][multinode][restarts]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("restart-once");
  const Strings flags = two_ranks({"--max-restarts", "1", "--run-id", id, "--log-dir", d + "/logs"});
  // Every attempt joins through its store: a key left from attempt 0 (its join round, its
  // failure record) would fail attempt 1's join. In attempt 0 global rank 3 (node 1) fails after
  // the join while the others sleep; attempt 1 all-reduces over gloo across the nodes.
  const Strings partner = {"--on-attempt", "0", "--dump", d + "/dump0-%r", "--on-attempt", "1", "--dump",
                           d + "/dump1-%r", "--pidfile", d + "/pid-%r", "--join", "--on", "3", "--on-attempt", "0",
                           "--err", "boom in attempt 0", "--on", "3", "--on-attempt", "0", "--exit", "5",
                           "--on-attempt", "0", "--sleep", "60", "--world-allreduce", "--out", "done %r"};
  Nodes nodes(2, free_port(), {flags, flags}, {partner, partner}, quiet_env());
  const auto r = nodes.finish(60s);
  for (int k = 0; k < 2; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    CHECK(r[static_cast<std::size_t>(k)].exit_code == 0);
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "attempt 0 of the job failed (1 of --max-restarts 1 left)"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err,
                   "fastrun: starting attempt 1 of the job (restart 1 of --max-restarts 1) in 0 s"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "rank 3 (pid "));
    CHECK_FALSE(contains(r[static_cast<std::size_t>(k)].err, "attempt 2"));
  }
  // Every rank of both attempts saw its attempt number and its attempt's own store.
  for (int rank = 0; rank < 4; ++rank) {
    const auto a0 = read_dump(dir.path() / ("dump0-" + std::to_string(rank)));
    const auto a1 = read_dump(dir.path() / ("dump1-" + std::to_string(rank)));
    CHECK(a0.env.at("FASTRUN_RESTART_COUNT") == "0");
    CHECK(a1.env.at("FASTRUN_RESTART_COUNT") == "1");
    CHECK(a1.env.at("TORCHELASTIC_RESTART_COUNT") == "1");
    CHECK(a0.env.at("FASTRUN_STORE") != a1.env.at("FASTRUN_STORE"));
    CHECK(a1.env.at("FASTRUN_RUN_ID") == id);
    CHECK(a1.env.at("FASTRUN_WORLD_SIZE") == "4");
  }
  // Logs per attempt, as on one node, both nodes under one run directory.
  const std::filesystem::path run_dir = dir.path() / "logs" / id;
  CHECK(read_file(run_dir / "attempt-0/rank-3/stderr.log") == "boom in attempt 0\n");
  CHECK(std::filesystem::exists(run_dir / "attempt-0/rank-3/failure.json"));
  for (int rank = 0; rank < 4; ++rank)
    CHECK(contains(read_file(run_dir / ("attempt-1/rank-" + std::to_string(rank)) / "stdout.log"),
                   "done " + std::to_string(rank) + "\n"));
  expect_nothing_left(dir, id);
}

TEST_CASE("two nodes: a rank failing in every attempt exhausts the job's restarts and both exit with its code",
          "[launcher][multinode][restarts]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("restart-exhaust");
  const Strings flags = two_ranks({"--max-restarts", "2", "--run-id", id, "--log-dir", d + "/logs"});
  // The barrier (through the attempt's store) before rank 2 fails: every rank has written its
  // pidfile in every attempt before any is stopped.
  const Strings partner = {"--pidfile", d + "/pid-%r", "--barrier", "--on", "2", "--err", "always %r", "--on", "2",
                           "--exit", "6", "--sleep", "60"};
  Nodes nodes(2, free_port(), {flags, flags}, {partner, partner}, quiet_env());
  const auto r = nodes.finish(60s);
  for (int k = 0; k < 2; ++k) {
    const std::string& err = r[static_cast<std::size_t>(k)].err;
    INFO("node " << k << " stderr: " << err);
    CHECK(r[static_cast<std::size_t>(k)].exit_code == 6);
    CHECK(contains(err, "attempt 0 of the job failed (2 of --max-restarts 2 left)"));
    CHECK(contains(err, "attempt 1 of the job failed (1 of --max-restarts 2 left)"));
    CHECK(contains(err, "starting attempt 2 of the job (restart 2 of --max-restarts 2) in 1 s"));
    const auto last = err.rfind("fastrun: attempt 2 of the job failed, the last one --max-restarts 2 allows\n");
    REQUIRE(last != std::string::npos);
    CHECK(contains(err.substr(last), "rank 2 (pid "));
    CHECK_FALSE(contains(err.substr(last), "starting attempt"));
    CHECK_FALSE(contains(err, "attempt 3"));
  }
  CHECK(read_file(dir.path() / "logs" / id / "attempt-2/rank-2/stderr.log") == "always 2\n");
  expect_nothing_left(dir, id);
}

TEST_CASE("two nodes with restarts left: SIGTERM to node 1's launcher ends the job on both",
          "[launcher][multinode][restarts][signals]") {
  TempDir dir;
  const Strings flags = two_ranks({"--max-restarts", "3"});
  const Strings partner = {"--pidfile", dir.str() + "/pid-%r", "--sleep", "60"};
  Nodes nodes(2, free_port(), {flags, flags}, {partner, partner}, quiet_env());
  const auto pids = read_rank_pids(dir.path(), 0, 4);
  nodes.launchers[1]->signal(SIGTERM);
  const auto r = nodes.finish(20s);
  for (int k = 0; k < 2; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    CHECK(r[static_cast<std::size_t>(k)].exit_code == 143);
    CHECK_FALSE(contains(r[static_cast<std::size_t>(k)].err, "starting attempt"));
  }
  CHECK(contains(r[0].err, "got SIGTERM"));
  wait_until_gone(pids, 5s);
  for (pid_t p : pids) CHECK(process_gone(p));
}

// The next attempt's start round waits FASTRUN_TIMEOUT for every node, then names the ones that
// did not come (by --node-rank and host, not by their place in the round). Node 1 is slow to end
// attempt 0: its rank ignores SIGTERM and its --kill-timeout is 8 s, while its launcher stays
// alive (so it is not lost, only late).
TEST_CASE("two nodes: a node that does not come to the next attempt within FASTRUN_TIMEOUT is named",
          "[launcher][multinode][restarts][timeout]") {
  TempDir dir;
  const std::string id = run_id_arg("restart-late");
  const Strings flags0 = two_ranks({"--max-restarts", "1", "--run-id", id});
  const Strings flags1 = two_ranks({"--max-restarts", "1", "--run-id", id, "--kill-timeout", "8"});
  // Rank 0 fails only after the barrier: every rank has written its pid file by then (one
  // stopped before writing it would fail expect_nothing_left's read).
  const Strings partner = {"--pidfile", dir.str() + "/pid-%r", "--on", "2", "--ignore-term", "--barrier", "--on", "0",
                           "--exit", "5", "--sleep", "60"};
  Nodes nodes(2, free_port(), {flags0, flags1}, {partner, partner}, quiet_env("3"));
  const auto r0 = nodes.launchers[0]->finish(30s);
  const auto r1 = nodes.launchers[1]->finish(30s);
  INFO("node 0 stderr: " << r0.err << "\nnode 1 stderr: " << r1.err);
  CHECK(r0.exit_code != 0);
  CHECK(contains(r0.err, "node 0: attempt 1 could not start: node 1 (host "));
  CHECK(contains(r0.err, ") did not come back within 3 s (FASTRUN_TIMEOUT)"));
  CHECK(r1.exit_code != 0);
  expect_nothing_left(dir, id);
}

TEST_CASE("two nodes with different --max-restarts: the second is a usage error naming node 0's",
          "[launcher][multinode][restarts][usage]") {
  TempDir dir;
  const std::string err = second_node_refused(dir, two_ranks({"--max-restarts", "2"}), two_ranks({"--max-restarts", "1"}));
  INFO(err);
  CHECK(contains(err, "--max-restarts 1 (or FASTRUN_MAX_RESTARTS): node 0 runs this job with --max-restarts 2"));
}

TEST_CASE("two nodes with restarts left: a launcher SIGKILLed ends the job on the other node without a restart",
          "[launcher][multinode][restarts][failure]") {
  for (int killed : {0, 1}) {
    TempDir dir;
    const std::string id = run_id_arg("restart-lost-" + std::to_string(killed));
    const Strings flags = two_ranks({"--max-restarts", "3", "--run-id", id});
    const Strings partner = {"--pidfile", dir.str() + "/pid-%r", "--sleep", "60"};
    Nodes nodes(2, free_port(), {flags, flags}, {partner, partner}, quiet_env());
    const auto pids = read_rank_pids(dir.path(), 0, 4);
    nodes.launchers[static_cast<std::size_t>(killed)]->signal(SIGKILL);
    const auto other = nodes.launchers[static_cast<std::size_t>(1 - killed)]->finish(30s);
    nodes.launchers[static_cast<std::size_t>(killed)]->finish(5s);
    INFO("node " << killed << " SIGKILLed; the other's stderr: " << other.err);
    // A lost node cannot take part in another attempt of a fixed set of nodes.
    CHECK(other.exit_code == 1);
    CHECK(contains(other.err, killed == 0 ? "node 0's launcher is gone" : "its launcher stopped answering"));
    CHECK_FALSE(contains(other.err, "starting attempt"));
    wait_until_gone(pids, 5s);
    for (pid_t p : pids) CHECK(process_gone(p));
    CHECK(shm_entries("fastrun-" + id).empty());
  }
}
