// launch_self with restarts (SelfLaunchOptions::max_restarts, FASTRUN_MAX_RESTARTS), through the
// sparring partner's --self mode: the calling process becomes the job's launcher and every rank,
// rank 0 included, a child it can start again; the attempts follow `fastrun --max-restarts`
// (restarts_test.cpp): the attempt number in the environment, a clean store, per-attempt logs,
// the last attempt's code and summary, and bad values refused before anything starts.
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/time_limits.h"

using namespace fastrun::test;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

std::string run_id_arg(const std::string& tag) { return "t-" + tag + "-" + std::to_string(::getpid()); }

// The variables a test under a launcher might have, which would make the partner a rank.
const std::map<std::string, std::optional<std::string>> kNotARank = {
    {"FASTRUN_RANK", std::nullopt}, {"RANK", std::nullopt}, {"FASTRUN_MAX_RESTARTS", std::nullopt}};

}  // namespace

TEST_CASE("launch_self with max_restarts: a rank that fails in attempt 0 only ends the job with 0",
          "[launcher][self][restarts]") {
  TempDir dir;
  const std::string d = dir.str();
  const std::string id = run_id_arg("self-restart-once");
  // Both attempts join and all-reduce through the job's store, which must hold nothing of attempt 0.
  Process p({kPartner, "--self", "2", "--self-max-restarts", "1", "--self-run-id", id, "--self-log-dir", d + "/logs",
             "--pidfile", d + "/pid-%r", "--on-attempt", "0", "--dump", d + "/dump0-%r", "--on-attempt", "1", "--dump",
             d + "/dump1-%r", "--join", "--on", "1", "--on-attempt", "0", "--err", "boom in attempt 0", "--on", "1",
             "--on-attempt", "0", "--exit", "3", "--world-allreduce", "--out", "done %r"},
            kNotARank, dir.path());
  const auto r = p.finish(scaled(40s));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      const auto dump = read_dump(dir.path() / ("dump" + std::to_string(attempt) + "-" + std::to_string(rank)));
      CHECK(dump.env.at("FASTRUN_RANK") == std::to_string(rank));
      CHECK(dump.env.at("FASTRUN_RESTART_COUNT") == std::to_string(attempt));
      CHECK(dump.env.at("TORCHELASTIC_RESTART_COUNT") == std::to_string(attempt));
      CHECK(dump.env.at("FASTRUN_RUN_ID") == id);
    }
  }
  // Rank 0 is a child of the calling process, which only launched the job.
  CHECK(read_rank_pids(dir.path(), 0, 1)[0] != p.pid());
  CHECK(contains(r.err, "fastrun: attempt 0 of the job failed (1 of --max-restarts 1 left)"));
  CHECK(contains(r.err, "exited with code 3"));
  CHECK(contains(r.err, "fastrun: starting attempt 1 of the job (restart 1 of --max-restarts 1) in 0 s"));
  const std::filesystem::path run_dir = dir.path() / "logs" / id;
  CHECK(read_file(run_dir / "attempt-0/rank-1/stderr.log") == "boom in attempt 0\n");
  CHECK(std::filesystem::exists(run_dir / "attempt-0/rank-1/failure.json"));
  CHECK(contains(read_file(run_dir / "attempt-1/rank-0/stdout.log"), "done 0\n"));
  CHECK(contains(read_file(run_dir / "attempt-1/rank-1/stdout.log"), "done 1\n"));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("launch_self with max_restarts: a rank that fails in every attempt ends the job with its code",
          "[launcher][self][restarts]") {
  TempDir dir;
  const std::string id = run_id_arg("self-restart-exhaust");
  const auto r = run({kPartner, "--self", "2", "--self-max-restarts", "1", "--self-run-id", id, "--on", "1", "--err",
                      "always %r", "--on", "1", "--exit", "5", "--sleep", "30"},
                     kNotARank, scaled(40s));
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.err, "attempt 0 of the job failed (1 of --max-restarts 1 left)"));
  const auto last = r.err.rfind("fastrun: attempt 1 of the job failed, the last one --max-restarts 1 allows\n");
  REQUIRE(last != std::string::npos);
  CHECK(contains(r.err.substr(last), "rank 1 (pid "));
  CHECK_FALSE(contains(r.err.substr(last), "starting attempt"));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("launch_self restarts under FASTRUN_MAX_RESTARTS as under the option", "[launcher][self][restarts]") {
  auto env = kNotARank;
  env["FASTRUN_MAX_RESTARTS"] = "1";
  const auto r = run({kPartner, "--self", "2", "--on-attempt", "0", "--exit", "4", "--out", "rank %r passed"}, env,
                     scaled(40s));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "rank 0 passed"));
  CHECK(contains(r.out, "rank 1 passed"));
  CHECK(contains(r.err, "attempt 0 of the job failed (1 of --max-restarts 1 left)"));
}

TEST_CASE("a signal to the process that launch_self made the launcher ends the job without a restart",
          "[launcher][self][restarts]") {
  TempDir dir;
  Process p({kPartner, "--self", "2", "--self-max-restarts", "3", "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"},
            kNotARank, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  p.signal(SIGTERM);
  const auto r = p.finish(scaled(30s));
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGTERM);  // it dies by the signal, as launch_self's rank 0 would
  CHECK_FALSE(contains(r.err, "starting attempt"));
  for (pid_t pid : pids) CHECK(process_gone(pid));
}

TEST_CASE("launch_self refuses a bad max_restarts before anything starts", "[launcher][self][restarts]") {
  TempDir dir;
  const std::string pidfile = dir.str() + "/pid-%r";
  const auto negative = run({kPartner, "--self", "2", "--self-max-restarts", "-1", "--pidfile", pidfile}, kNotARank);
  INFO(negative.err);
  CHECK(negative.exit_code == 2);
  CHECK(contains(negative.err, "SelfLaunchOptions::max_restarts -1: give a number of restarts of 0 or more"));
  for (const char* bad : {"-3", "two"}) {
    auto env = kNotARank;
    env["FASTRUN_MAX_RESTARTS"] = bad;
    const auto r = run({kPartner, "--self", "2", "--pidfile", pidfile}, env);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "FASTRUN_MAX_RESTARTS"));
    CHECK(contains(r.err, bad));
  }
  CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-0"));  // no rank ever started
  CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-1"));
}
