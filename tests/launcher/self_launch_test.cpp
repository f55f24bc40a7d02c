// The in-process spawn, through the sparring partner's --self mode (fastrun::launch_self).
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "process_runner.h"

using namespace fastrun::test;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {
}  // namespace

TEST_CASE("launch_self: rank 0 re-executes itself with the same argv and the contract", "[launcher][self]") {
  TempDir dir;
  const Strings argv = {kPartner, "--self", "3", "--dump", dir.str() + "/dump-%r", "--rest", "a b", "", "--"};
  const auto r = run(argv, {{"FASTRUN_RANK", std::nullopt}, {"CUDA_VISIBLE_DEVICES", std::nullopt}});
  REQUIRE(r.exit_code == 0);
  std::set<std::string> ids, stores, seeds;
  for (int rank = 0; rank < 3; ++rank) {
    const auto d = read_dump(dir.path() / ("dump-" + std::to_string(rank)));
    CHECK(d.argv == argv);
    CHECK(d.env.at("FASTRUN_RANK") == std::to_string(rank));
    CHECK(d.env.at("RANK") == std::to_string(rank));
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "3");
    ids.insert(d.env.at("FASTRUN_RUN_ID"));
    stores.insert(d.env.at("FASTRUN_STORE"));
    seeds.insert(d.env.at("FASTRUN_GLOBAL_SEED"));
  }
  CHECK(ids.size() == 1);
  CHECK(stores.size() == 1);
  CHECK(seeds.size() == 1);
  CHECK(shm_entries("fastrun-" + *ids.begin()).empty());
}

TEST_CASE("launch_self: devices are pinned including rank 0", "[launcher][self]") {
  TempDir dir;
  const auto r = run({kPartner, "--self-devices", "2,0", "--dump", dir.str() + "/dump-%r"},
                     {{"FASTRUN_RANK", std::nullopt}, {"CUDA_VISIBLE_DEVICES", "4,5,6"}});
  REQUIRE(r.exit_code == 0);
  CHECK(read_dump(dir.path() / "dump-0").env.at("CUDA_VISIBLE_DEVICES") == "6");
  CHECK(read_dump(dir.path() / "dump-1").env.at("CUDA_VISIBLE_DEVICES") == "4");
  CHECK(read_dump(dir.path() / "dump-1").env.at("USER_CUDA_VISIBLE_DEVICES") == "4,5,6");
}

TEST_CASE("launch_self: a failing child ends the job with its status", "[launcher][self]") {
  auto r = run({kPartner, "--self", "3", "--on", "2", "--exit", "4", "--sleep", "30"}, {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 4);
  CHECK(r.seconds < 5);
  CHECK(contains(r.err, "rank 2"));
  // Rank 0 finishes first and exits 0; rank 1 then crashes: the process reports the crash.
  r = run({kPartner, "--self", "2", "--on", "1", "--sleep", "0.3", "--on", "1", "--crash", "abort"},
          {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 128 + 6);
  // Rank 0 waits for slower ranks that succeed.
  r = run({kPartner, "--self", "2", "--on", "1", "--sleep", "0.3", "--on", "1", "--out", "late %r"},
          {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "late 1\n"));
  CHECK(r.seconds >= 0.3);
}

TEST_CASE("launch_self: log_dir files rank 0 too and tag_output tags it", "[launcher][self]") {
  TempDir dir;
  const auto r = run({kPartner, "--self", "2", "--self-log-dir", dir.str(), "--self-tag", "--out", "hello %r", "--err",
                      "oops %r"},
                     {{"FASTRUN_RANK", std::nullopt}, {"FASTRUN_RUN_ID", std::nullopt}});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "[rank 0] hello 0\n"));
  CHECK(contains(r.out, "[rank 1] hello 1\n"));
  CHECK(contains(r.err, "[rank 1] oops 1\n"));
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(dir.path()), {});
  REQUIRE(runs.size() == 1);
  CHECK(read_file(runs[0] / "rank-0/stdout.log") == "hello 0\n");
  CHECK(read_file(runs[0] / "rank-1/stderr.log") == "oops 1\n");
}

TEST_CASE("launch_self: SIGTERM to rank 0 stops the children and removes the store", "[launcher][self]") {
  TempDir dir;
  const std::string id = "self-term-" + std::to_string(::getpid());
  Process p({kPartner, "--self", "3", "--self-run-id", id, "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"},
            {{"FASTRUN_RANK", std::nullopt}}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 3);
  p.signal(SIGTERM);
  const auto r = p.finish(10s);
  CHECK(WIFSIGNALED(r.status));
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(r.seconds < 5);
  for (pid_t pid : pids) CHECK(process_gone(pid));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("launch_self: a failing child with rank 0 relayed keeps rank 0's output", "[launcher][self]") {
  TempDir dir;
  const auto r = run({kPartner, "--self", "2", "--self-log-dir", dir.str(), "--self-run-id", "relayed-fail", "--on", "0",
                      "--out", "zero was here", "--barrier", "--on", "1", "--exit", "3", "--sleep", "30"},
                     {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 3);
  CHECK(r.seconds < 5);
  CHECK(contains(r.out, "zero was here\n"));
  CHECK(read_file(dir.path() / "relayed-fail/rank-0/stdout.log") == "zero was here\n");
  CHECK(contains(r.err, "rank 1"));
  CHECK(shm_entries("fastrun-relayed-fail").empty());
}

// Ranks 1 and 2 record the signals they get: SIGTERM from rank 0's exit path, not PDEATHSIG's
// SIGKILL (which would record nothing), whatever the machine's speed.
TEST_CASE("launch_self: rank 0 exiting non-zero stops the other ranks", "[launcher][self]") {
  TempDir dir;
  const auto r = run({kPartner, "--self", "3", "--self-run-id", "rank0-fails", "--trap-signals", dir.str() + "/sig-%r",
                      "--pidfile", dir.str() + "/pid-%r", "--barrier", "--on", "0", "--exit", "5", "--sleep", "30"},
                     {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 5);
  CHECK(contains(r.err, "rank 0"));
  CHECK(contains(r.err, "exited with code 5"));
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 1, 3);
  wait_until_gone(pids, 2s);
  for (int rank = 1; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(process_gone(pids[static_cast<std::size_t>(rank - 1)]));
    CHECK(read_file(dir.path() / ("sig-" + std::to_string(rank))) == "TERM\n");
  }
  CHECK(shm_entries("fastrun-rank0-fails").empty());
}

TEST_CASE("launch_self: output decides what ranks 1.. show on the terminal", "[launcher][self]") {
  struct Row {
    std::string mode;
    bool out, err;  // rank 1's stdout / stderr shown
  };
  for (const Row& row : {Row{"all", true, true}, Row{"only_error", false, true}, Row{"ignore", false, false}}) {
    CAPTURE(row.mode);
    const auto r = run({kPartner, "--self", "2", "--self-output", row.mode, "--out", "out %r", "--err", "err %r"},
                       {{"FASTRUN_RANK", std::nullopt}});
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "out 0\n"));  // rank 0 always shows
    CHECK(contains(r.err, "err 0\n"));
    CHECK(contains(r.out, "out 1\n") == row.out);
    CHECK(contains(r.err, "err 1\n") == row.err);
  }
  const auto bad = run({kPartner, "--self", "2", "--self-output", "bogus"}, {{"FASTRUN_RANK", std::nullopt}});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "'bogus': accepted values are all, only_error, ignore"));
}

TEST_CASE("launch_self: kill_timeout is the grace before a rank ignoring SIGTERM is killed", "[launcher][self]") {
  const auto r = run({kPartner, "--self", "2", "--self-kill-timeout", "0.5", "--on", "1", "--ignore-term", "--barrier",
                      "--on", "0", "--exit", "5", "--sleep", "30"},
                     {{"FASTRUN_RANK", std::nullopt}});
  CHECK(r.exit_code == 5);
  CHECK(r.seconds >= 0.5);
  CHECK(r.seconds < 4.5);  // well under the default 5 s grace: the option was used
  CHECK(contains(r.err, "did not stop within"));
  CHECK(contains(r.err, "0.5 s and got SIGKILL"));
}

TEST_CASE("launch_self: SIGKILL of rank 0 leaves no child running", "[launcher][self]") {
  TempDir dir;
  const std::string id = "self-kill9-" + std::to_string(::getpid());
  Process p({kPartner, "--self", "3", "--self-run-id", id, "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"},
            {{"FASTRUN_RANK", std::nullopt}}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 1, 3);
  p.signal(SIGKILL);
  p.finish(5s);
  wait_until_gone(pids, 2s);
  for (pid_t pid : pids) CHECK(process_gone(pid));
  // Rank 0's janitor removes the store once the children are gone (no `fastrun --cleanup`).
  for (int i = 0; i < 500 && !shm_entries("fastrun-" + id).empty(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(shm_entries("fastrun-" + id).empty());
  for (const auto& e : shm_entries("fastrun-" + id)) ::unlink(("/dev/shm/" + e).c_str());
}

TEST_CASE("launch_self: what ranks 1..N-1 leave running is stopped, rank 0's own children are not",
          "[launcher][self]") {
  TempDir dir;
  const auto r = run({kPartner, "--self", "2", "--background", dir.str() + "/pid-%r"}, {{"FASTRUN_RANK", std::nullopt}});
  CAPTURE(r.err);
  CHECK(r.exit_code == 0);
  const std::vector<pid_t> bg = read_rank_pids(dir.path(), 0, 2);
  CHECK(!process_gone(bg[0]));  // rank 0 is the program's own process: its children are its business
  CHECK(process_gone(bg[1]));   // rank 1's, left in its process group: stopped with the job
  for (pid_t pid : bg) ::kill(pid, SIGKILL);
  wait_until_gone(bg, 5s);
}
