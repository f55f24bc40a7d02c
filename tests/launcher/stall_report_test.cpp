// The stall report under the real fastrun CLI (docs/errors.md, "Stall report"): a rank stopped
// with SIGSTOP before an all-reduce is named, with the op and its last completed op, within the
// threshold plus one poll; once it is continued the job finishes with exit 0 and a "stall over"
// line. Threshold 0 prints nothing; a bad value is refused before any rank starts.
#include <signal.h>

#include <fstream>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/time_limits.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// The state letter of /proc/<pid>/stat ('T': stopped); '?' when unreadable.
char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = all.rfind(')');
  return paren == std::string::npos || paren + 2 >= all.size() ? '?' : all[paren + 2];
}

// Polls until `done` or `deadline`; true when done.
template <class F>
bool poll_until(Clock::time_point deadline, F done) {
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// "have waited 2.4 s" in `line` -> 2.4 (-1 when absent).
double waited_seconds(const std::string& text) {
  const std::string mark = "have waited ";
  const auto at = text.find(mark);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + mark.size()));
}

// The report of 3 ranks whose rank 1 stopped after op #1, at a 2 s threshold: it names rank 1 and
// its last op, and the others' wait (at least the threshold, at most it plus a poll and the
// machine's slowness).
void check_rank1_named(const std::string& err) {
  CHECK(contains(err, "fastrun: stall on group 'world': op #2 all_reduce(float32 x 4, sum): rank 1 has not "
                      "arrived, ranks 0,2 have waited "));
  CHECK(contains(err, "; rank 1: last op #1 all_reduce(float32 x 4, sum) completed "));
  const double waited = waited_seconds(err);
  CHECK(waited >= 2.0);
  CHECK(waited < 4.0 + (kTimeScale - 1));
}

}  // namespace

TEST_CASE("a stopped rank is named by the stall report and the job goes on", "[launcher][stall]") {
  for (const char* backend : {"shm", "gloo"}) {
    INFO(backend);
    TempDir dir;
    const std::string run_id = std::string("stall-") + backend + "-" + std::to_string(::getpid());
    Process p(cmd({"--nproc", "3", "--stall-report", "2", "--run-id", run_id},
                  {"--pidfile", dir.str() + "/pid-%r", "--join", "--world-allreduce", "--on", "1", "--stop",
                   "--world-allreduce"}),
              {{"FASTRUN_BACKEND", backend}, {"FASTRUN_OP_TIMEOUT", "300"}}, dir.path());
    const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 3);
    REQUIRE(poll_until(Clock::now() + scaled(30s), [&] { return process_state(pids[1]) == 'T'; }));
    const auto stopped = Clock::now();

    // The report: 2 s after the first waiting rank began op #2, plus at most one poll (1 s). The
    // test's own limit is wider (a busy 2-core machine, sanitizers); the launcher's printed wait
    // is the precise check.
    std::string err;
    const bool reported = poll_until(stopped + 4s + scaled(4s), [&] {
      err = read_file(p.err_path());
      return contains(err, "fastrun: stall on group 'world'");
    });
    const double seen_after = std::chrono::duration<double>(Clock::now() - stopped).count();
    ::kill(pids[1], SIGCONT);
    INFO(err);
    REQUIRE(reported);
    CHECK(seen_after < 4 + 4.0 * kTimeScale);
    check_rank1_named(err);

    const auto r = p.finish(scaled(30s));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(count(r.err, "fastrun: stall on group") == 1);  // once
    CHECK(contains(r.err, "fastrun: stall over on group 'world': op #2 all_reduce(float32 x 4, sum) went on after "));
    CHECK(r.err.find("stall over") > r.err.find("stall on"));
    wait_until_gone(pids, scaled(5s));
    for (pid_t pid : pids) CHECK(process_gone(pid));
    CHECK(shm_entries("fastrun-" + run_id).empty());
  }
}

TEST_CASE("FASTRUN_STALL_REPORT sets the threshold and 0 turns the report off", "[launcher][stall]") {
  // Rank 1 computes for 3 s while rank 0 waits in the all-reduce: past a 1 s threshold, not 0.
  const auto job = cmd({"--nproc", "2"}, {"--join", "--on", "1", "--sleep", "3", "--world-allreduce"});
  const auto on = run(job, {{"FASTRUN_STALL_REPORT", "1"}}, scaled(30s));
  INFO(on.err);
  CHECK(on.exit_code == 0);
  CHECK(contains(on.err, "fastrun: stall on group 'world': op #1 all_reduce(float32 x 4, sum): rank 1 has not arrived"));
  CHECK(contains(on.err, "rank 1: no collective on this group yet"));
  CHECK(contains(on.err, "fastrun: stall over on group 'world'"));
  for (const auto& off : {run(job, {{"FASTRUN_STALL_REPORT", "0"}}, scaled(30s)),
                          run(cmd({"--nproc", "2", "--stall-report", "0"},
                                  {"--join", "--on", "1", "--sleep", "3", "--world-allreduce"}),
                              {{"FASTRUN_STALL_REPORT", "1"}}, scaled(30s))}) {
    INFO(off.err);
    CHECK(off.exit_code == 0);
    CHECK_FALSE(contains(off.err, "stall"));
  }
}

TEST_CASE("a bad stall threshold is refused before any rank starts", "[launcher][stall]") {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::optional<std::string>>>> rows{
      {{"--stall-report", "-1"}, {}},
      {{"--stall-report", "86401"}, {}},
      {{"--stall-report", "2s"}, {}},
      {{}, {{"FASTRUN_STALL_REPORT", "soon"}}},
  };
  const std::vector<std::string> expected{
      "--stall-report -1: give whole seconds from 1 to 86400, or 0 for no stall report",
      "--stall-report 86401: give whole seconds from 1 to 86400, or 0 for no stall report",
      "--stall-report '2s': expected a whole number", "FASTRUN_STALL_REPORT"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::string> args{"--nproc", "2"};
    args.insert(args.end(), rows[i].first.begin(), rows[i].first.end());
    const auto r = run(cmd(args, {"--dump", dir.str() + "/ran-%r"}), rows[i].second);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, expected[i]));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "ran-0"));
  }
}

// Without a fastrun launcher (torchrun's variables set by hand here; the same path serves srun
// and mpirun) local rank 0 hosts the node's board and prints the report on its own stderr.
TEST_CASE("without the fastrun launcher local rank 0 names a stopped rank and the job goes on", "[launcher][stall]") {
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 3; ++r) {
    const std::string rs = std::to_string(r);
    dirs.push_back(std::make_unique<TempDir>());
    ranks.push_back(std::make_unique<Process>(
        std::vector<std::string>{kPartner, "--join", "--world-allreduce", "--on", "1", "--stop", "--world-allreduce"},
        std::map<std::string, std::optional<std::string>>{
            {"FASTRUN_RANK", std::nullopt}, {"FASTRUN_WORLD_SIZE", std::nullopt}, {"FASTRUN_STORE", std::nullopt},
            {"FASTRUN_RUN_ID", std::nullopt}, {"RANK", rs}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", rs},
            {"LOCAL_WORLD_SIZE", "3"}, {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
            {"FASTRUN_STALL_REPORT", "2"}, {"FASTRUN_OP_TIMEOUT", "300"}},
        dirs.back()->path()));
  }
  const pid_t late = ranks[1]->pid();
  REQUIRE(poll_until(Clock::now() + scaled(30s), [&] { return process_state(late) == 'T'; }));
  const auto stopped = Clock::now();
  std::string err;
  const bool reported = poll_until(stopped + 4s + scaled(4s), [&] {
    err = read_file(ranks[0]->err_path());
    return contains(err, "fastrun: stall on group 'world'");
  });
  ::kill(late, SIGCONT);
  INFO(err);
  REQUIRE(reported);
  check_rank1_named(err);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto done = ranks[r]->finish(scaled(30s));
    CAPTURE(r);
    INFO(done.err);
    CHECK(done.exit_code == 0);
    if (r == 0) {
      CHECK(count(done.err, "fastrun: stall on group") == 1);
      CHECK(contains(done.err, "fastrun: stall over on group 'world': op #2 all_reduce(float32 x 4, sum) went on after "));
    } else {
      CHECK_FALSE(contains(done.err, "stall"));  // one report per node, from local rank 0
    }
  }
}
