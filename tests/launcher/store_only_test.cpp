// fastrun --store-only (docs/multinode.md, "A store outside the job"): a launcher that hosts the
// job's store and coordinates it without ranks, and compute nodes started with --external-store,
// all on 127.0.0.1. Node 0 is then an ordinary node: its launcher SIGKILLed, the job goes on on
// nodes 1 and 2, renumbered 0 and 1, and the store-only launcher exits with the job's code.
// Bad combinations of flags are usage errors (exit 2) naming what is wrong, before anything starts.
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

Strings store_only_flags(const std::string& nnodes, std::uint16_t port, Strings more = {}) {
  Strings v{kFastrun, "--store-only", "--nnodes", nnodes, "--master-addr", "127.0.0.1", "--master-port",
            std::to_string(port)};
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

}  // namespace

TEST_CASE("store-only launcher, --external-store: bad combinations of flags are usage errors naming the flag",
          "[launcher][multinode][store-only]") {
  const std::string port = std::to_string(free_port());
  const std::vector<std::pair<Strings, std::string>> table = {
      {{"--store-only", "--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--nproc", "2"},
       "--store-only with --nproc 2: the store-only launcher starts no ranks"},
      {{"--store-only", "--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--", "./train"},
       "--store-only with PROGRAM './train': the store-only launcher starts no program"},
      {{"--store-only", "--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--log-dir", "/tmp"},
       "--store-only with --log-dir: the store-only launcher starts no ranks, so --log-dir would do nothing here"},
      {{"--store-only", "--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--tag-output"},
       "--store-only with --tag-output: the store-only launcher starts no ranks"},
      {{"--store-only", "--bind", "numa", "--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port},
       "--store-only with --bind: the store-only launcher starts no ranks"},
      {{"--store-only", "--nnodes", "2:3", "--master-addr", "127.0.0.1"},
       "--store-only needs --master-port PORT (FASTRUN_MASTER_PORT), 1-65535"},
      {{"--store-only", "--nnodes", "2:3", "--master-port", port},
       "--store-only needs --master-addr HOST (FASTRUN_MASTER_ADDR)"},
      {{"--store-only", "--master-addr", "127.0.0.1", "--master-port", port},
       "--store-only needs --nnodes N or MIN:MAX (FASTRUN_NNODES)"},
      {{"--store-only", "--nnodes", "2:3", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", port},
       "--store-only with --node-rank 0: the store-only launcher is none of the job's nodes"},
      {{"--store-only", "--external-store", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port},
       "--store-only and --external-store were both given"},
      {{"--nproc", "1", "--external-store", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
        kPartner},
       "--external-store needs --master-port PORT"},
  };
  for (const auto& [args, expected] : table) {
    Strings argv{kFastrun};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run(argv, quiet_env());
    INFO("expected: " << expected << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, expected));
  }
}

TEST_CASE("FASTRUN_STORE_ONLY and FASTRUN_EXTERNAL_STORE: the same checks as the flags, naming the variable",
          "[launcher][multinode][store-only]") {
  const std::string port = std::to_string(free_port());
  struct Row {
    Strings args;
    std::vector<std::pair<std::string, std::string>> vars;
    std::string expected;
  };
  const std::vector<Row> table = {
      {{"--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--nproc", "2"},
       {{"FASTRUN_STORE_ONLY", "1"}},
       "FASTRUN_STORE_ONLY=1 with --nproc 2: the store-only launcher starts no ranks"},
      {{"--nnodes", "2:3", "--master-addr", "127.0.0.1", "--master-port", port, "--", "./train"},
       {{"FASTRUN_STORE_ONLY", "1"}},
       "FASTRUN_STORE_ONLY=1 with PROGRAM './train': the store-only launcher starts no program"},
      {{"--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port},
       {{"FASTRUN_STORE_ONLY", "1"}, {"FASTRUN_EXTERNAL_STORE", "1"}},
       "FASTRUN_STORE_ONLY=1 and FASTRUN_EXTERNAL_STORE=1 were both given"},
      {{"--external-store", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port},
       {{"FASTRUN_STORE_ONLY", "1"}},
       "FASTRUN_STORE_ONLY=1 and --external-store were both given"},
      {{"--nproc", "1", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", kPartner},
       {{"FASTRUN_EXTERNAL_STORE", "1"}},
       "FASTRUN_EXTERNAL_STORE=1 needs --master-port PORT"},
      {{"--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port},
       {{"FASTRUN_STORE_ONLY", "yes"}},
       "FASTRUN_STORE_ONLY"},
  };
  for (const auto& row : table) {
    Strings argv{kFastrun};
    argv.insert(argv.end(), row.args.begin(), row.args.end());
    Env env = quiet_env();
    for (const auto& [name, value] : row.vars) env[name] = value;
    const auto r = run(argv, env);
    INFO("expected: " << row.expected << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, row.expected));
  }
}

TEST_CASE("FASTRUN_STORE_ONLY=1 and FASTRUN_EXTERNAL_STORE=1 run a job like --store-only and --external-store",
          "[launcher][multinode][store-only]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::uint16_t port = free_port();
  Env store_env = quiet_env();
  store_env["FASTRUN_STORE_ONLY"] = "1";
  Process store({kFastrun, "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)},
                store_env, dir.path());
  Env node_env = quiet_env();
  node_env["FASTRUN_EXTERNAL_STORE"] = "1";
  const Strings flags = {"--nproc", "2"};
  const Strings partner = {"--join", "--world-allreduce", "--out", "done %r"};
  Nodes nodes(2, port, {flags, flags}, {partner, partner}, node_env);
  for (int k = 0; k < 2; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
  }
  const auto rs = store.finish(30s);
  INFO("store-only stderr: " << rs.err);
  CHECK(rs.exit_code == 0);
}

TEST_CASE("store-only launcher: a compute node without --external-store is refused, and SIGTERM ends it",
          "[launcher][multinode][store-only]") {
  TempDir io;
  const std::uint16_t port = free_port();
  Process store(store_only_flags("2", port), quiet_env(), io.path());
  const auto r1 = run(cmd(node_flags(2, 1, port, {"--nproc", "1"}), {"--exit", "0"}), quiet_env());
  INFO("node 1 stderr: " << r1.err);
  CHECK(r1.exit_code == 2);
  CHECK(contains(r1.err, "is a fastrun --store-only's: give --external-store to every compute node of this job"));
  store.signal(SIGTERM);
  const auto rs = store.finish(20s);
  INFO("store-only stderr: " << rs.err);
  CHECK(rs.exit_code == 128 + SIGTERM);
}

TEST_CASE("store-only launcher with --nnodes 2:3: node 0's launcher SIGKILLed and the job goes on on nodes 1 and 2",
          "[launcher][multinode][store-only][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = "t-so-" + std::to_string(::getpid());
  const std::uint16_t port = free_port();
  Process store(store_only_flags("2:3", port, {"--run-id", id}), quiet_env(), dir.path());
  // Attempt 0: six ranks write their pid and wait to be stopped. Attempt 1 (the four ranks of
  // nodes 1 and 2) dumps its environment and all-reduces across both nodes over gloo.
  const Strings flags = {"--nproc", "2", "--nnodes", "2:3", "--external-store"};
  const Strings partner = {"--on-attempt", "1", "--dump", d + "/dump1-%r", "--join", "--on-attempt", "0",
                           "--pidfile", d + "/pid-%r", "--on-attempt", "0", "--sleep", "60", "--world-allreduce",
                           "--out", "done %r"};
  Nodes nodes(3, port, {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  const auto pids = read_rank_pids(dir.path(), 0, 6);
  nodes.launchers[0]->signal(SIGKILL);
  nodes.launchers[0]->finish(10s);
  for (int k = 1; k < 3; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "node 0 (host "));
    CHECK(contains(r.err, "its launcher stopped answering"));
    CHECK(contains(r.err, "fastrun: starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [0]"));
  }
  const auto rs = store.finish(30s);
  INFO("store-only stderr: " << rs.err);
  CHECK(rs.exit_code == 0);
  CHECK(contains(rs.err, "fastrun: starting attempt 1 of the job on 2 nodes (--nnodes 2:3) without lost node [0]"));
  // Attempt 1: ranks 0..3 on nodes 1 and 2, whose ranks see node ranks 0 and 1.
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto a1 = read_dump(dir.path() / ("dump1-" + std::to_string(rank)));
    CHECK(a1.env.at("FASTRUN_RANK") == std::to_string(rank));
    CHECK(a1.env.at("FASTRUN_WORLD_SIZE") == "4");
    CHECK(a1.env.at("FASTRUN_NNODES") == "2");
    CHECK(a1.env.at("FASTRUN_NODE_RANK") == std::to_string(rank / 2));
  }
  CHECK_FALSE(std::filesystem::exists(dir.path() / "dump1-4"));
  expect_nothing_left(pids, id);
}

TEST_CASE("store-only launcher with --nnodes 2:3: node 0 lost, then started again, joins the next attempt",
          "[launcher][multinode][store-only][elastic]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = "t-so-back-" + std::to_string(::getpid());
  const std::uint16_t port = free_port();
  std::filesystem::create_directories(dir.path() / "a0");
  std::filesystem::create_directories(dir.path() / "a1");
  Process store(store_only_flags("2:3", port, {"--run-id", id}), quiet_env(), dir.path());
  // Attempts 0 and 1 wait to be stopped (their pidfiles say they run); attempt 2 all-reduces.
  const Strings flags = {"--nproc", "1", "--nnodes", "2:3", "--external-store"};
  const Strings partner = {"--on-attempt", "0", "--pidfile", d + "/a0/pid-%r", "--on-attempt", "1", "--pidfile",
                           d + "/a1/pid-%r", "--on-attempt", "0", "--sleep", "60", "--on-attempt", "1", "--sleep",
                           "60", "--on-attempt", "2", "--join", "--world-allreduce", "--out", "done %r"};
  Nodes nodes(3, port, {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  auto pids = read_rank_pids(dir.path() / "a0", 0, 2);
  nodes.launchers[0]->signal(SIGKILL);
  nodes.launchers[0]->finish(10s);
  const auto pids1 = read_rank_pids(dir.path() / "a1", 0, 1);
  pids.insert(pids.end(), pids1.begin(), pids1.end());
  TempDir io;
  Process again(cmd(node_flags(3, 0, port, flags), partner), quiet_env(), io.path());
  const auto r0 = again.finish(60s);
  INFO("node 0 (again) stderr: " << r0.err);
  CHECK(r0.exit_code == 0);
  CHECK(contains(r0.err, "fastrun: node 0: the job runs already (--nnodes 2:3); waiting for the store-only launcher"));
  CHECK(contains(r0.out, "done 0\n"));  // attempt 2's all-reduce over the three nodes, node 0 first again
  for (int k = 1; k < 3; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(60s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "starting attempt 2 of the job on 3 nodes (--nnodes 2:3) with node [0] back"));
    CHECK(contains(r.out, "done " + std::to_string(k) + "\n"));
  }
  const auto rs = store.finish(30s);
  INFO("store-only stderr: " << rs.err);
  CHECK(rs.exit_code == 0);
  CHECK(contains(rs.err, "starting attempt 2 of the job on 3 nodes (--nnodes 2:3) with node [0] back"));
  expect_nothing_left(pids, id);
}

TEST_CASE("store-only launcher: SIGTERM to it while the ranks run stops the job on every node",
          "[launcher][multinode][store-only][signals]") {
  TempDir dir;
  const std::string id = "t-so-term-" + std::to_string(::getpid());
  const std::uint16_t port = free_port();
  Process store(store_only_flags("2:3", port, {"--run-id", id}), quiet_env(), dir.path());
  const Strings flags = {"--nproc", "1", "--nnodes", "2:3", "--external-store"};
  const Strings partner = {"--pidfile", dir.str() + "/pid-%r", "--sleep", "60"};
  Nodes nodes(3, port, {flags, flags, flags}, {partner, partner, partner}, quiet_env());
  const auto pids = read_rank_pids(dir.path(), 0, 2);
  store.signal(SIGTERM);
  const auto rs = store.finish(30s);
  INFO("store-only stderr: " << rs.err);
  CHECK(rs.exit_code == 128 + SIGTERM);
  for (int k = 0; k < 3; ++k) {
    const auto r = nodes.launchers[static_cast<std::size_t>(k)]->finish(30s);
    INFO("node " << k << " stderr: " << r.err);
    CHECK(r.exit_code == 128 + SIGTERM);
    CHECK(contains(r.err, "fastrun: the job was stopped: the store-only launcher (host 127.0.0.1) got SIGTERM"));
  }
  expect_nothing_left(pids, id);
}
