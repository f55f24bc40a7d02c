// fastrun --max-restarts (docs/launching.md, "Restarts"), driven against the sparring partner:
// a failed attempt is followed by a clean one (fresh store, its own logs, the attempt number in
// the environment) up to the limit; the last failure's code and summary are the job's; a
// signal to the launcher is never restarted; the failing rank's failure.json.
#include <signal.h>

#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fastrun/launcher/restarts.h"
#include "process_runner.h"
#include "test_support/time_limits.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

std::string run_id_arg(const std::string& tag) { return "t-" + tag + "-" + std::to_string(::getpid()); }

nlohmann::json read_json(const std::filesystem::path& p) { return nlohmann::json::parse(read_file(p)); }

}  // namespace

TEST_CASE("the restart back-off: none before the first restart, then doubling from 1 s, capped at 30 s",
          "[launcher][restarts]") {
  using fastrun::launcher::restart_backoff;
  CHECK(restart_backoff(1) == 0ms);
  CHECK(restart_backoff(2) == 1s);
  CHECK(restart_backoff(3) == 2s);
  CHECK(restart_backoff(6) == 16s);
  CHECK(restart_backoff(7) == 30s);
  CHECK(restart_backoff(1000) == 30s);
  CHECK(fastrun::launcher::attempt_log_dir("d/run", 2) == "d/run/attempt-2");
  CHECK(fastrun::launcher::attempt_log_dir("", 2).empty());
}

TEST_CASE("a rank that fails in attempt 0 and not in attempt 1 ends the job with 0", "[launcher][restarts]") {
  TempDir dir;
  const std::string id = run_id_arg("restart-once");
  const std::string d = dir.str();
  // Both attempts join and all-reduce through the job's store: a key left from attempt 0 (its
  // failure record, its join round) would fail attempt 1's join.
  const auto r = run(cmd({"--nproc", "2", "--max-restarts", "1", "--run-id", id, "--log-dir", d + "/logs"},
                         {"--on-attempt", "0", "--dump", d + "/dump0-%r", "--on-attempt", "1", "--dump", d + "/dump1-%r",
                          "--join", "--on", "1", "--on-attempt", "0", "--err", "boom in attempt 0", "--on", "1",
                          "--on-attempt", "0", "--exit", "3", "--world-allreduce", "--out", "done %r"}),
                     {}, 40s);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      const auto dump = read_dump(dir.path() / ("dump" + std::to_string(attempt) + "-" + std::to_string(rank)));
      CHECK(dump.env.at("FASTRUN_RESTART_COUNT") == std::to_string(attempt));
      CHECK(dump.env.at("TORCHELASTIC_RESTART_COUNT") == std::to_string(attempt));
      CHECK(dump.env.at("FASTRUN_RUN_ID") == id);  // the job's id stays; the store under it is new
    }
  }
  CHECK(contains(r.err, "fastrun: attempt 0 of the job failed (1 of --max-restarts 1 left)"));
  CHECK(contains(r.err, "rank 1 (pid "));
  CHECK(contains(r.err, "exited with code 3"));
  CHECK(contains(r.err, "fastrun: starting attempt 1 of the job (restart 1 of --max-restarts 1) in 0 s"));
  // Every attempt keeps its logs; the failing rank of attempt 0 has its record.
  const std::filesystem::path run_dir = dir.path() / "logs" / id;
  CHECK(read_file(run_dir / "attempt-0/rank-1/stderr.log") == "boom in attempt 0\n");
  CHECK(read_file(run_dir / "attempt-1/rank-1/stdout.log").find("done 1\n") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(run_dir / "attempt-1/rank-1/failure.json"));
  const auto rec = read_json(run_dir / "attempt-0/rank-1/failure.json");
  CHECK(rec.at("attempt") == 0);
  CHECK(rec.at("rank") == 1);
  CHECK(rec.at("exit_code") == 3);
  CHECK(rec.at("signal").is_null());
  CHECK(rec.at("launcher_exit_code") == 3);
  CHECK(rec.at("run_id") == id);
  CHECK(rec.at("stderr_tail") == nlohmann::json::array({"boom in attempt 0"}));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("a rank that fails in every attempt exhausts --max-restarts and the job exits with its code",
          "[launcher][restarts]") {
  TempDir dir;
  const std::string id = run_id_arg("restart-exhaust");
  const auto r = run(cmd({"--nproc", "2", "--max-restarts", "2", "--run-id", id, "--log-dir", dir.str()},
                         {"--pidfile", dir.str() + "/pid-%r", "--barrier", "--on", "1", "--err", "always %r", "--on", "1",
                          "--exit", "5", "--sleep", "30"}),
                     {}, 40s);
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.err, "attempt 0 of the job failed (2 of --max-restarts 2 left)"));
  CHECK(contains(r.err, "attempt 1 of the job failed (1 of --max-restarts 2 left)"));
  CHECK(contains(r.err, "starting attempt 2 of the job (restart 2 of --max-restarts 2) in 1 s"));
  // The last summary is the last attempt's, naming it, and nothing follows it.
  const auto last = r.err.rfind("fastrun: attempt 2 of the job failed, the last one --max-restarts 2 allows\n");
  REQUIRE(last != std::string::npos);
  CHECK(contains(r.err.substr(last), "rank 1 (pid "));
  CHECK_FALSE(contains(r.err.substr(last), "starting attempt"));
  CHECK_FALSE(contains(r.err, "attempt 3"));
  const auto rec = read_json(dir.path() / id / "attempt-2/rank-1/failure.json");
  CHECK(rec.at("attempt") == 2);
  CHECK(rec.at("exit_code") == 5);
  CHECK(rec.at("stderr_tail") == nlohmann::json::array({"always 1"}));
  CHECK(contains(r.err, "its failure record: " + (dir.path() / id / "attempt-2/rank-1/failure.json").string()));
  // Rank 0 of the last attempt, stopped by the launcher, is gone with its store and segments.
  wait_until_gone(read_rank_pids(dir.path(), 0, 1), 2s);
  CHECK(process_gone(read_rank_pids(dir.path(), 0, 1)[0]));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("a job with --max-restarts 0 keeps one attempt, the summary and the log layout of a job without restarts",
          "[launcher][restarts]") {
  TempDir dir;
  const std::string id = run_id_arg("restart-none");
  const auto r = run(cmd({"--nproc", "2", "--run-id", id, "--log-dir", dir.str()},
                         {"--dump", dir.str() + "/dump-%r", "--on", "1", "--crash", "kill", "--sleep", "30"}));
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK_FALSE(contains(r.err, "attempt"));
  CHECK(read_dump(dir.path() / "dump-1").env.at("FASTRUN_RESTART_COUNT") == "0");
  CHECK(read_dump(dir.path() / "dump-1").env.at("TORCHELASTIC_RESTART_COUNT") == "0");
  CHECK_FALSE(std::filesystem::exists(dir.path() / id / "attempt-0"));
  // The record of a rank killed by a signal: no exit code, the signal, the OOM hint.
  const auto rec = read_json(dir.path() / id / "rank-1/failure.json");
  CHECK(rec.at("exit_code").is_null());
  CHECK(rec.at("signal") == "SIGKILL");
  CHECK(rec.at("launcher_exit_code") == 137);
  CHECK(contains(rec.at("hint").get<std::string>(), "out of memory"));
  CHECK(rec.at("description") == "killed by signal SIGKILL");
  CHECK(rec.at("pid").get<int>() > 0);
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("the failure record names the collective the failing rank completed last and is null before any",
          "[launcher][restarts][failure_record]") {
  TempDir dir;
  // The stall report off: the board is there for the record all the same (--log-dir).
  const std::string id = run_id_arg("record-op");
  const auto r = run(cmd({"--nproc", "2", "--stall-report", "0", "--run-id", id, "--log-dir", dir.str()},
                         {"--join", "--world-allreduce", "--world-allreduce", "--on", "1", "--crash", "segv", "--sleep",
                          "30"}),
                     {}, scaled(40s));
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGSEGV);
  const auto rec = read_json(dir.path() / id / "rank-1/failure.json");
  INFO(rec.dump());
  const auto& op = rec.at("last_collective");
  CHECK(op.at("group") == "world");
  CHECK(op.at("op") == "all_reduce");
  CHECK(op.at("seq") == 2);
  CHECK(op.at("state") == "completed");
  CHECK(op.at("description") == "op #2 all_reduce(float32 x 4, sum)");
  CHECK(contains(r.err, "fastrun: rank 1's last collective: op #2 all_reduce(float32 x 4, sum) on group 'world' "
                        "(completed)\n"));

  // Without --log-dir there is no record, and the summary still names the op (the board is
  // there for the stall report, on by default).
  const std::string unfiled = run_id_arg("record-op-unfiled");
  const auto plain = run(cmd({"--nproc", "2", "--run-id", unfiled},
                             {"--join", "--world-allreduce", "--on", "1", "--crash", "segv", "--sleep", "30"}),
                         {}, scaled(40s));
  INFO(plain.err);
  CHECK(plain.exit_code == 128 + SIGSEGV);
  CHECK(contains(plain.err, "fastrun: rank 1's last collective: op #1 all_reduce(float32 x 4, sum) on group 'world' "
                            "(completed)\n"));

  // A rank that fails before it joins has been in no collective.
  const std::string before = run_id_arg("record-no-op");
  const auto early = run(cmd({"--nproc", "2", "--run-id", before, "--log-dir", dir.str()},
                             {"--on", "1", "--exit", "3", "--join", "--world-allreduce"}),
                         {}, scaled(40s));
  INFO(early.err);
  CHECK(early.exit_code == 3);
  const auto none = read_json(dir.path() / before / "rank-1/failure.json");
  CHECK(none.contains("last_collective"));
  CHECK(none.at("last_collective").is_null());
  CHECK_FALSE(contains(early.err, "last collective"));
  CHECK_FALSE(contains(early.err, " was in op"));
  CHECK(shm_entries("fastrun-" + id).empty());
  CHECK(shm_entries("fastrun-" + before).empty());
}

TEST_CASE("the failure record of a rank killed while it waits in a collective says it was in that op",
          "[launcher][restarts][failure_record]") {
  TempDir dir;
  const std::string id = run_id_arg("record-in-op");
  // Rank 0 stops itself after op #1; rank 1 enters op #2 and waits there for it. The stall
  // report's line is the event that says rank 1 is in op #2: then it is killed.
  Process p(cmd({"--nproc", "2", "--stall-report", "1", "--run-id", id, "--log-dir", dir.str() + "/logs"},
                {"--pidfile", dir.str() + "/pid-%r", "--join", "--world-allreduce", "--on", "0", "--stop",
                 "--world-allreduce"}),
            {{"FASTRUN_OP_TIMEOUT", "300"}}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  const auto deadline = std::chrono::steady_clock::now() + scaled(30s);
  std::string err;
  while (!contains(err = read_file(p.err_path()), "fastrun: stall on group 'world'") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  INFO(err);
  REQUIRE(contains(err, "fastrun: stall on group 'world'"));
  ::kill(pids[1], SIGKILL);
  ::kill(pids[0], SIGCONT);  // so that the launcher's SIGTERM ends it
  const auto r = p.finish(scaled(30s));
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGKILL);
  const auto rec = read_json(dir.path() / "logs" / id / "rank-1/failure.json");
  INFO(rec.dump());
  const auto& op = rec.at("last_collective");
  CHECK(op.at("group") == "world");
  CHECK(op.at("seq") == 2);
  CHECK(op.at("state") == "in_progress");
  CHECK(op.at("description") == "op #2 all_reduce(float32 x 4, sum)");
  CHECK(contains(r.err, "fastrun: rank 1 was in op #2 all_reduce(float32 x 4, sum) on group 'world'\n"));
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("a signal to the launcher ends a job with restarts left, as without them", "[launcher][restarts]") {
  TempDir dir;
  Process p(cmd({"--nproc", "2", "--max-restarts", "3"}, {"--pidfile", dir.str() + "/pid-%r", "--sleep", "30"}), {},
            dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  p.signal(SIGTERM);
  const auto r = p.finish(15s);
  CHECK(r.exit_code == 143);
  CHECK_FALSE(contains(r.err, "starting attempt"));
  for (pid_t pid : pids) CHECK(process_gone(pid));
}

TEST_CASE("bad --max-restarts values are usage errors before anything starts", "[launcher][restarts]") {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-restarts", "-1"}, "--max-restarts -1: give a number of restarts of 0 or more"},
      {{"--max-restarts", "two"}, "--max-restarts 'two': expected a whole number"},
      {{"--max-restarts", "1.5"}, "--max-restarts '1.5': expected a whole number"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> launcher{"--nproc", "2"};
    launcher.insert(launcher.end(), flags.begin(), flags.end());
    const auto r = run(cmd(launcher, {"--pidfile", dir.str() + "/pid-%r"}));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, message));
  }
  const auto env = run(cmd({"--nproc", "2"}, {"--pidfile", dir.str() + "/pid-%r"}), {{"FASTRUN_MAX_RESTARTS", "-3"}});
  INFO(env.err);
  CHECK(env.exit_code == 2);
  CHECK(contains(env.err, "FASTRUN_MAX_RESTARTS"));
  CHECK(contains(env.err, "-3"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-0"));  // no rank ever started
}

TEST_CASE("FASTRUN_MAX_RESTARTS restarts like the flag", "[launcher][restarts]") {
  const auto r = run(cmd({"--nproc", "1"}, {"--on-attempt", "0", "--exit", "4", "--out", "attempt passed"}),
                     {{"FASTRUN_MAX_RESTARTS", "1"}});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "attempt passed"));
  CHECK(contains(r.err, "attempt 0 of the job failed (1 of --max-restarts 1 left)"));
  // launch_self restarts too: self_launch_restarts_test.cpp.
}
