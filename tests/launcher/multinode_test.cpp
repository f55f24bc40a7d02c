// One fastrun per node, on 127.0.0.1 (docs/multinode.md): two and three launchers as nodes of
// one job, through node 0's TCP store on a free port. Real processes, real sockets.
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "multinode_nodes.h"
#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/silent_listener.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

// Two nodes of `ranks` ranks each, every rank sleeping 60 s with its pid in DIR/pid-<rank>.
struct SleepingJob {
  TempDir dir;
  std::uint16_t port = free_port();
  Nodes nodes;
  std::vector<pid_t> pids;

  SleepingJob(int ranks, Strings node0_extra = {})
      : nodes(2, port, {with(ranks, node0_extra), with(ranks, {})}, {sleeper(), sleeper()}, quiet_env()) {
    pids = read_rank_pids(dir.path(), 0, 2 * ranks);
  }
  static Strings with(int ranks, Strings extra) {
    extra.insert(extra.begin(), {"--nproc", std::to_string(ranks)});
    return extra;
  }
  Strings sleeper() const { return {"--pidfile", dir.str() + "/pid-%r", "--sleep", "60"}; }

  // SIGKILLs node `k`'s launcher; returns how the other node ended and how long it took.
  std::pair<RunResult, double> kill_launcher(int k) {
    nodes.launchers[static_cast<std::size_t>(k)]->signal(SIGKILL);
    const auto killed_at = std::chrono::steady_clock::now();
    auto other = nodes.launchers[static_cast<std::size_t>(1 - k)]->finish(15s);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    nodes.launchers[static_cast<std::size_t>(k)]->finish(5s);
    wait_until_gone(pids, 5s);
    for (pid_t p : pids) CHECK(process_gone(p));
    return {other, took};
  }
};

}  // namespace

TEST_CASE("two nodes with uneven rank counts share one global layout", "[launcher][multinode]") {
  TempDir dir;
  const auto port = free_port();
  const std::string dump = dir.str() + "/dump-%r";
  Nodes nodes(2, port, {{"--nproc", "2", "--log-dir", dir.str() + "/logs0"}, {"--nproc", "3", "--log-dir", dir.str() + "/logs1"}},
              {{"--dump", dump, "--barrier"}, {"--dump", dump, "--barrier"}}, quiet_env());
  const auto r = nodes.finish();
  REQUIRE(r[0].exit_code == 0);
  REQUIRE(r[1].exit_code == 0);
  std::set<std::string> run_ids, seeds, master_ports;
  for (int g = 0; g < 5; ++g) {
    const auto d = read_dump(dir.path() / ("dump-" + std::to_string(g)));
    const int node = g < 2 ? 0 : 1;
    const int local = g < 2 ? g : g - 2;
    INFO("global rank " << g);
    CHECK(d.env.at("FASTRUN_RANK") == std::to_string(g));
    CHECK(d.env.at("RANK") == std::to_string(g));
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "5");
    CHECK(d.env.at("WORLD_SIZE") == "5");
    CHECK(d.env.at("FASTRUN_LOCAL_RANK") == std::to_string(local));
    CHECK(d.env.at("LOCAL_RANK") == std::to_string(local));
    CHECK(d.env.at("FASTRUN_LOCAL_WORLD_SIZE") == (node == 0 ? "2" : "3"));
    CHECK(d.env.at("LOCAL_WORLD_SIZE") == (node == 0 ? "2" : "3"));
    CHECK(d.env.at("FASTRUN_NODE_RANK") == std::to_string(node));
    CHECK(d.env.at("GROUP_RANK") == std::to_string(node));
    CHECK(d.env.at("FASTRUN_NNODES") == "2");
    CHECK(d.env.at("FASTRUN_STORE") == "tcp://127.0.0.1:" + std::to_string(port));
    CHECK(d.env.at("FASTRUN_STORE_TOKEN") == "multinode-test-secret");
    CHECK(d.env.at("MASTER_ADDR") == "127.0.0.1");
    CHECK(d.env.at("FASTRUN_GLOO_HOST") == "127.0.0.1");  // the address that routes to node 0
    run_ids.insert(d.env.at("FASTRUN_RUN_ID"));
    seeds.insert(d.env.at("FASTRUN_GLOBAL_SEED"));
    master_ports.insert(d.env.at("MASTER_PORT"));
  }
  CHECK(run_ids.size() == 1);
  CHECK(seeds.size() == 1);
  REQUIRE(master_ports.size() == 1);
  CHECK(*master_ports.begin() != std::to_string(port));  // the ranks' own port, not the job's store
  // Each node files its own ranks, under their global ranks and the shared run id.
  const std::string id = *run_ids.begin();
  for (int g = 0; g < 5; ++g) {
    const std::string logs = dir.str() + (g < 2 ? "/logs0/" : "/logs1/") + id + "/rank-" + std::to_string(g);
    INFO(logs);
    CHECK(std::filesystem::exists(logs + "/stdout.log"));
  }
  CHECK_FALSE(std::filesystem::exists(dir.str() + "/logs0/" + id + "/rank-2"));
}

TEST_CASE("three nodes all-reduce over hier across the nodes", "[launcher][multinode][hier]") {
  const auto port = free_port();
  Env env = quiet_env();
  env["FASTRUN_BACKEND"] = "auto";
  Nodes nodes(3, port, {{"--nproc", "1"}, {"--nproc", "2"}, {"--nproc", "1"}},
              {{"--allreduce"}, {"--allreduce"}, {"--allreduce"}}, env);
  const auto r = nodes.finish(30s);
  for (int k = 0; k < 3; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    REQUIRE(r[static_cast<std::size_t>(k)].exit_code == 0);
  }
  // 1+2+3+4 on every rank; `auto` picks hier (shm inside node 1), never shm alone, across nodes.
  CHECK(contains(r[0].out, "allreduce 10 hier"));
  CHECK(contains(r[1].out, "allreduce 10 hier"));
  CHECK(contains(r[2].out, "allreduce 10 hier"));
}

TEST_CASE("three nodes broadcast and all-gather over hier, two levels", "[launcher][multinode][hier]") {
  // Nodes of 2, 1 and 2 ranks: broadcast roots that lead their node (0, 2, 3) and roots that do
  // not (1, 4); an all-gather whose node blocks differ in size (the leaders broadcast each block).
  const auto port = free_port();
  Env env = quiet_env();
  env["FASTRUN_BACKEND"] = "hier";
  env["FASTRUN_LOG_LEVEL"] = "debug";  // the hier group says whether it took two levels
  const Strings partner = {"--join", "--world-broadcast", "--world-all-gather"};
  Nodes nodes(3, port, {{"--nproc", "2"}, {"--nproc", "1"}, {"--nproc", "2"}}, {partner, partner, partner}, env);
  const auto r = nodes.finish(60s);
  for (int k = 0; k < 3; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    REQUIRE(r[static_cast<std::size_t>(k)].exit_code == 0);
    CHECK(contains(r[static_cast<std::size_t>(k)].out, "broadcast ok hier"));
    CHECK(contains(r[static_cast<std::size_t>(k)].out, "all_gather ok hier"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "3 nodes, node " + std::to_string(k)));
  }
}

TEST_CASE("two nodes of two ranks all-gather over hier, the leaders in place", "[launcher][multinode][hier]") {
  // Nodes of equal size: the leaders' step is one all-gather on the output itself. Device buffers
  // are refused, naming the op, before anything starts, and the group goes on.
  const auto port = free_port();
  Env env = quiet_env();
  env["FASTRUN_BACKEND"] = "hier";
  env["FASTRUN_LOG_LEVEL"] = "debug";
  const Strings partner = {"--join", "--world-all-gather", "--world-device-refused"};
  Nodes nodes(2, port, {{"--nproc", "2"}, {"--nproc", "2"}}, {partner, partner}, env);
  const auto r = nodes.finish(60s);
  for (int k = 0; k < 2; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    REQUIRE(r[static_cast<std::size_t>(k)].exit_code == 0);
    CHECK(contains(r[static_cast<std::size_t>(k)].out, "all_gather ok hier"));
    CHECK(contains(r[static_cast<std::size_t>(k)].out, "device refused hier"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "2 nodes, node " + std::to_string(k)));
  }
}

TEST_CASE("a rank failing on a non-master node stops every node with its code", "[launcher][multinode][failure]") {
  TempDir dir;
  const auto port = free_port();
  const std::string pidfile = dir.str() + "/pid-%r";
  Nodes nodes(3, port, {{"--nproc", "2"}, {"--nproc", "1"}, {"--nproc", "2"}},
              {{"--pidfile", pidfile, "--sleep", "60"},
               {"--pidfile", pidfile, "--sleep", "0.5", "--err", "rank %r gives up", "--exit", "3"},
               {"--pidfile", pidfile, "--sleep", "60"}},
              quiet_env());
  const auto start = std::chrono::steady_clock::now();
  const auto r = nodes.finish();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int k = 0; k < 3; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    CHECK(r[static_cast<std::size_t>(k)].exit_code == 3);
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "rank 2 (pid"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "on node 1 (host "));
  }
  CHECK(took < 5);  // the sleeping ranks (60 s) were stopped about a second after the failure
  const auto pids = read_rank_pids(dir.path(), 0, 5);
  wait_until_gone(pids, 5s);
  for (pid_t p : pids) CHECK(process_gone(p));
}

// As on one node (cli_job_test.cpp): a survivor on node 1 blames rank 0 of node 0 and exits 1
// before rank 0's death shows; node 1 waits for node 0's report of it rather than publish its
// own, so every node names rank 0 and exits with its status.
TEST_CASE("a rank that exits blaming a peer on another node does not hide that death", "[launcher][multinode][failure]") {
  Nodes nodes(2, free_port(), {{"--nproc", "2"}, {"--nproc", "2"}},
              {{"--on", "0", "--until-failure", "--on", "0", "--sleep", "0.2", "--on", "0", "--crash", "kill", "--sleep", "60"},
               {"--on", "2", "--blame-rank-0", "--on", "2", "--exit", "1", "--sleep", "60"}},
              quiet_env());
  const auto r = nodes.finish();
  for (int k = 0; k < 2; ++k) {
    INFO("node " << k << " stderr: " << r[static_cast<std::size_t>(k)].err);
    CHECK(r[static_cast<std::size_t>(k)].exit_code == 128 + SIGKILL);
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "rank 0 (pid"));
    CHECK(contains(r[static_cast<std::size_t>(k)].err, "on node 0 (host "));
    CHECK_FALSE(contains(r[static_cast<std::size_t>(k)].err, "exited with code 1"));
  }
}

TEST_CASE("a node that never arrives fails the others at the join timeout, named", "[launcher][multinode][failure]") {
  const auto port = free_port();
  std::vector<std::unique_ptr<Process>> ls;
  TempDir io0, io1;
  ls.push_back(std::make_unique<Process>(cmd(node_flags(3, 0, port, {"--nproc", "1"}), {"--exit", "0"}),
                                         quiet_env("1"), io0.path()));
  ls.push_back(std::make_unique<Process>(cmd(node_flags(3, 1, port, {"--nproc", "1"}), {"--exit", "0"}),
                                         quiet_env("1"), io1.path()));
  for (auto& l : ls) {
    const auto r = l->finish(10s);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "1 of 3 nodes never arrived"));
    CHECK(contains(r.err, "node [2]"));
    CHECK(r.seconds < 6);
  }
}

TEST_CASE("the master launcher SIGKILLed: the other nodes stop, nothing is left", "[launcher][multinode][failure]") {
  const std::string id = "t-mn-kill-" + std::to_string(::getpid());
  SleepingJob job(2, {"--run-id", id});
  REQUIRE(job.pids.size() == 4);
  const auto [r1, took] = job.kill_launcher(0);
  INFO(r1.err);
  CHECK(r1.exit_code == 1);
  CHECK(contains(r1.err, "node 0 (host "));
  CHECK(contains(r1.err, "node 0's launcher is gone"));
  CHECK(took < 3);  // the lost store connection is seen at once
  CHECK(shm_entries("fastrun-" + id).empty());  // a multi-node job's store is node 0's TCP server
}

TEST_CASE("Ctrl-C on a non-master launcher stops the whole job", "[launcher][multinode][signals]") {
  SleepingJob job(1);
  auto& nodes = job.nodes;
  const auto& pids = job.pids;
  nodes.launchers[1]->signal(SIGINT);
  const auto r = nodes.finish(10s);
  CHECK(r[0].exit_code == 130);
  CHECK(r[1].exit_code == 130);
  CHECK(contains(r[0].err, "got SIGINT"));
  wait_until_gone(pids, 5s);
  for (pid_t p : pids) CHECK(process_gone(p));
}

TEST_CASE("multi-node flags: missing or contradictory combinations are usage errors", "[launcher][multinode][usage]") {
  struct Case {
    Strings args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "5000"}, "needs --node-rank"},
      {{"--nnodes", "2", "--node-rank", "1", "--master-port", "5000"}, "needs --master-addr"},
      {{"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1"}, "needs --master-port"},
      {{"--nnodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1", "--master-port", "5000"},
       "--node-rank 2: give a node rank from 0 to 1"},
      {{"--nnodes", "0"}, "--nnodes 0: give a number of nodes from 1"},
      {{"--node-rank", "1"}, "--node-rank 1 needs --nnodes"},
      {{"--master-addr", "127.0.0.1", "--master-port", "5000"}, "without --nnodes"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "tcp://x", "--master-port", "5000"},
       "--master-addr 'tcp://x'"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "70000"},
       "--master-port 70000: give a port from 1 to 65535"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "0"},
       "--master-port 0: give a port from 1"},
      {{"--nnodes", "x"}, "--nnodes 'x': expected a whole number"},
      // --nnodes MIN:MAX (elastic membership): checked as a whole, before anything starts.
      {{"--nnodes", "3:2"}, "--nnodes '3:2': give N or MIN:MAX, whole numbers with 1 <= MIN <= MAX <= 65536"},
      {{"--nnodes", "0:2"}, "--nnodes '0:2': give N or MIN:MAX"},
      {{"--nnodes", "2:"}, "--nnodes '2:': give N or MIN:MAX"},
      {{"--nnodes", ":3"}, "--nnodes ':3': give N or MIN:MAX"},
      {{"--nnodes", "1:x"}, "--nnodes '1:x': give N or MIN:MAX"},
      {{"--nnodes", "1:2:3"}, "--nnodes '1:2:3': give N or MIN:MAX"},
      {{"--nnodes", "2:70000"}, "--nnodes '2:70000': give N or MIN:MAX"},
      {{"--nnodes", "2:3", "--node-rank", "3", "--master-addr", "127.0.0.1", "--master-port", "5000"},
       "--node-rank 3: give a node rank from 0 to 2 (--nnodes 3)"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "0.0.0.0", "--master-port", "5000"}, "not a wildcard"},
      // A whole number beyond int's range is answered with the flag's range, not "not a number".
      {{"--nnodes", "99999999999"}, "--nnodes 99999999999: give a number of nodes from 1 to 65536"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "99999999999"},
       "--master-port 99999999999: give a port from 1 to 65535"},
      // --last-call only matters to a job that may start without all its nodes.
      {{"--last-call", "5"}, "--last-call 5: only a job of --nnodes MIN:MAX (MIN < MAX) waits for late nodes; this "
                             "job has 1 node"},
      {{"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", "5000", "--last-call", "5"},
       "--last-call 5: only a job of --nnodes MIN:MAX (MIN < MAX) waits for late nodes; this job has 2 nodes"},
  };
  for (const auto& c : cases) {
    Strings args = c.args;
    args.insert(args.end(), {"--nproc", "1"});
    const auto r = run(cmd(args, {"--exit", "0"}), quiet_env("1"));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, c.says));
  }
  // The variables stand in for the flags, and are checked the same way.
  const auto r = run(cmd({"--nproc", "1"}, {"--exit", "0"}),
                     {{"FASTRUN_NNODES", "2"}, {"FASTRUN_NODE_RANK", "5"}, {"FASTRUN_MASTER_ADDR", "127.0.0.1"},
                      {"FASTRUN_MASTER_PORT", "5000"}});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "FASTRUN_NODE_RANK 5: give a node rank from 0 to 1 (FASTRUN_NNODES 2)"));
}

TEST_CASE("node 0 that cannot host the job's store is a usage error naming the flag, before any rank starts",
          "[launcher][multinode][usage]") {
  TempDir dir;
  const SilentListener taken;  // another process holds this port
  struct Case {
    std::string addr;
    int port;
    const char* says;
  };
  for (const Case& c : {Case{"127.0.0.1", taken.port(), "is in use on this host"},
                        Case{"no-such-host.invalid", 5000, "the host does not resolve"}}) {
    Env env = quiet_env("5");
    env["FASTRUN_STORE_TOKEN"] = std::nullopt;
    const auto r = run(cmd({"--nproc", "1", "--nnodes", "2", "--node-rank", "0", "--master-addr", c.addr,
                            "--master-port", std::to_string(c.port)},
                           {"--pidfile", dir.str() + "/pid-%r"}),
                       env);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, fmt::format("node 0: cannot host the job's store on --master-addr {} --master-port {}: ",
                                      c.addr, c.port)));
    CHECK(contains(r.err, c.says));
    CHECK(contains(r.err, "give this host's own address as --master-addr and a port free on it as --master-port"));
    CHECK_FALSE(contains(r.err, "FASTRUN_STORE_TOKEN is not set"));  // the error alone, no warning before it
  }
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("a bad FASTRUN_GLOO_HOST is a usage error before any rank starts", "[launcher][gloo_host][usage]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2"}, {"--pidfile", dir.str() + "/pid-%r", "--allreduce"}),
                     {{"FASTRUN_GLOO_HOST", "no-such-host.invalid"}, {"FASTRUN_BACKEND", "gloo"}});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "FASTRUN_GLOO_HOST='no-such-host.invalid'"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-0"));
}

TEST_CASE("a non-master launcher SIGKILLed: node 0 notices its silence and stops the job", "[launcher][multinode][failure]") {
  SleepingJob job(1);
  REQUIRE(job.pids.size() == 2);
  const auto [r0, took] = job.kill_launcher(1);
  INFO(r0.err);
  CHECK(r0.exit_code == 1);
  CHECK(contains(r0.err, "node 1 (host "));
  CHECK(contains(r0.err, "stopped answering"));
  CHECK(took < 5);  // heartbeat loss after 1.5 s, then SIGTERM to node 0's ranks
}

TEST_CASE("multi-node tokens: a wrong one is refused at once, none is a warning", "[launcher][multinode][token]") {
  SECTION("a launcher with another token is refused without waiting for the join timeout") {
    const auto port = free_port();
    TempDir io0, io1;
    Process node0(cmd(node_flags(2, 0, port, {"--nproc", "1"}), {"--sleep", "30"}), quiet_env("20"), io0.path());
    Env other = quiet_env("20");
    other["FASTRUN_STORE_TOKEN"] = "not-the-job-secret";
    const auto r1 = Process(cmd(node_flags(2, 1, port, {"--nproc", "1"}), {"--exit", "0"}), other, io1.path()).finish(15s);
    INFO(r1.err);
    CHECK(r1.exit_code == 1);
    CHECK(contains(r1.err, "authentication failed"));
    CHECK(r1.seconds < 10);
    node0.signal(SIGTERM);
    node0.finish(10s);
  }
  SECTION("without FASTRUN_STORE_TOKEN the job runs, and node 0 says the store is open") {
    const auto port = free_port();
    Env env = quiet_env();
    env["FASTRUN_STORE_TOKEN"] = std::nullopt;
    Nodes nodes(2, port, {{"--nproc", "1"}, {"--nproc", "1"}}, {{"--barrier"}, {"--barrier"}}, env);
    const auto r = nodes.finish();
    CHECK(r[0].exit_code == 0);
    CHECK(r[1].exit_code == 0);
    CHECK(contains(r[0].err, "FASTRUN_STORE_TOKEN is not set"));
  }
}

TEST_CASE("one node: MASTER_ADDR/MASTER_PORT for a c10d env:// program, GROUP_RANK 0", "[launcher][env]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2"}, {"--dump", dir.str() + "/dump-%r"}));
  REQUIRE(r.exit_code == 0);
  const auto d0 = read_dump(dir.path() / "dump-0");
  const auto d1 = read_dump(dir.path() / "dump-1");
  CHECK(d0.env.at("MASTER_ADDR") == "127.0.0.1");
  CHECK(d0.env.at("MASTER_PORT") == d1.env.at("MASTER_PORT"));
  CHECK(std::stoi(d0.env.at("MASTER_PORT")) > 0);
  CHECK(d0.env.at("GROUP_RANK") == "0");
  CHECK(d0.env.count("FASTRUN_STORE_TOKEN") == 0);
}

TEST_CASE("nodes sharing one --log-dir file every rank under one run directory", "[launcher][multinode][logs]") {
  TempDir dir;
  const auto port = free_port();
  const std::string logs = dir.str() + "/shared-logs";
  Nodes nodes(2, port, {{"--nproc", "1", "--log-dir", logs, "--run-id", "t-mn-shared-logs"},
                        {"--nproc", "2", "--log-dir", logs}},
              {{"--out", "hello from %r"}, {"--out", "hello from %r"}}, quiet_env());
  const auto r = nodes.finish();
  INFO(r[0].err << r[1].err);
  REQUIRE(r[0].exit_code == 0);
  REQUIRE(r[1].exit_code == 0);
  for (int g = 0; g < 3; ++g)
    CHECK(read_file(logs + "/t-mn-shared-logs/rank-" + std::to_string(g) + "/stdout.log") ==
          "hello from " + std::to_string(g) + "\n");
}

TEST_CASE("Ctrl-C while waiting for node 0 stops the launcher at once", "[launcher][multinode][signals]") {
  TempDir io;
  Process node1(cmd(node_flags(2, 1, free_port(), {"--nproc", "1"}), {"--exit", "0"}), quiet_env("60"), io.path());
  std::this_thread::sleep_for(500ms);
  node1.signal(SIGINT);
  const auto r = node1.finish(10s);
  INFO(r.err);
  CHECK(r.exit_code == 130);
  CHECK(contains(r.err, "got SIGINT while waiting for the other nodes"));
  CHECK(r.seconds < 3);
}

TEST_CASE("a second launcher with a node rank already taken is refused, naming the first", "[launcher][multinode][usage]") {
  const auto port = free_port();
  TempDir io0, io1, io2;
  Process node1(cmd(node_flags(3, 1, port, {"--nproc", "1"}), {"--exit", "0"}), quiet_env("3"), io1.path());
  Process node0(cmd(node_flags(3, 0, port, {"--nproc", "1"}), {"--exit", "0"}), quiet_env("3"), io0.path());
  std::this_thread::sleep_for(300ms);  // let node 1 claim its rank first
  const auto again = Process(cmd(node_flags(3, 1, port, {"--nproc", "1"}), {"--exit", "0"}), quiet_env("3"),
                             io2.path())
                         .finish(10s);
  INFO(again.err);
  CHECK(again.exit_code == 2);
  CHECK(contains(again.err, "--node-rank 1: node 1 already joined this job from host "));
  // The job itself still lacks node 2 and fails at the join timeout, naming it.
  for (Process* p : {&node0, &node1}) {
    const auto r = p->finish(10s);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "node [2]"));
  }
}
