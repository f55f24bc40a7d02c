// The launcher in a hostile environment: run ids that prefix each other, a SIGKILLed launcher,
// background processes of ranks, a closed console, bad --log-dir, a low fd limit.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "fastrun/runtime/store/factory.h"
#include "process_runner.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

namespace {

bool shm_exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("a job whose run id prefixes another's leaves the other's segments alone", "[launcher][hostile]") {
  TempDir dir;
  const std::string pre = "pre-" + std::to_string(::getpid());
  const std::string pre_x = pre + "-x";
  // Job "pre-x" runs (store and a rank's segment live) while job "pre" starts and ends.
  Process long_job(cmd({"--nproc", "2", "--run-id", pre_x},
                       {"--shm-leftover", "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"}),
                   {}, dir.path());
  read_rank_pids(dir.path(), 0, 2);
  for (int i = 0; i < 500 && !shm_exists("fastrun-" + pre_x + "@leftover-1"); ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(shm_exists("fastrun-" + pre_x + "@leftover-1"));
  const auto r = run(cmd({"--nproc", "2", "--run-id", pre}, {"--shm-leftover", "--barrier"}));
  CHECK(r.exit_code == 0);
  CHECK(!shm_exists("fastrun-" + pre));
  CHECK(!shm_exists("fastrun-" + pre + "@leftover-0"));
  // "pre" ending removed nothing of "pre-x": its store and its rank's segment are still there.
  CHECK(shm_exists("fastrun-" + pre_x));
  CHECK(shm_exists("fastrun-" + pre_x + "@leftover-0"));
  long_job.signal(SIGTERM);
  CHECK(long_job.finish(10s).exit_code == 128 + SIGTERM);
  CHECK(shm_entries("fastrun-" + pre).empty());
}

TEST_CASE("cli: a closed stdout stops the job like SIGPIPE stops a pipeline", "[launcher][hostile]") {
  TempDir dir;
  // `fastrun --nproc 2 yes | head -1`: head leaves after one line; the job must end soon after.
  const std::string id = "yes-" + std::to_string(::getpid());
  // timeout(1) bounds a launcher that would never end (SIGTERM: it still cleans up).
  const std::string line = "timeout 15 " + kFastrun + " --nproc 2 --log-dir " + dir.str() + "/logs --run-id " + id +
                           " /usr/bin/yes | head -n 1; echo \"fastrun=${PIPESTATUS[0]}\" >&2";
  const auto r = run({"/bin/bash", "-c", line}, {}, 20s);
  CAPTURE(r.err);
  CHECK(r.out == "y\n");
  CHECK(contains(r.err, "fastrun=141"));  // 128 + SIGPIPE, as a shell reports a writer it stopped
  CHECK(contains(r.err, "the output was closed (SIGPIPE); stopped 2 ranks"));
  CHECK(r.seconds < 10);
  // The log files got what the ranks wrote until they stopped (at least the line head showed;
  // a rank stopped before it started writing has an empty file): whole "y" lines only.
  std::size_t filed = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = read_file(dir.path() / "logs" / id / ("rank-" + std::to_string(rank)) / "stdout.log");
    CAPTURE(rank);
    CHECK(log.find_first_not_of("y\n") == std::string::npos);
    filed += log.size();
  }
  CHECK(filed >= 2);
}

TEST_CASE("cli: a --log-dir that cannot be created is a usage error before any rank starts", "[launcher][hostile]") {
  TempDir dir;
  const std::string file = dir.str() + "/a-file";
  ::close(::open(file.c_str(), O_CREAT | O_WRONLY, 0644));
  const std::string marker = dir.str() + "/started-%r";
  // A file where the directory should be, a file in the path, a directory nobody may write.
  for (const std::string& log_dir : {file, file + "/logs", std::string("/proc/fastrun-logs")}) {
    CAPTURE(log_dir);
    const auto r = run(cmd({"--nproc", "2", "--log-dir", log_dir}, {"--pidfile", marker}));
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--log-dir"));
    CHECK(contains(r.err, log_dir));
  }
  CHECK(!std::filesystem::exists(dir.str() + "/started-0"));
}

TEST_CASE("cli: the launcher raises its soft fd limit and the ranks get the user's back", "[launcher][hostile]") {
  // 60 ranks hold about 180 fds in the launcher: more than a soft limit of 64 allows.
  const std::string line = "ulimit -S -n 64 && exec " + kFastrun + " --nproc 60 /bin/sh -c 'ulimit -S -n'";
  const auto r = run({"/bin/sh", "-c", line}, {}, 60s);
  CAPTURE(r.err);
  CHECK(r.exit_code == 0);
  std::string expect;
  for (int i = 0; i < 60; ++i) expect += "64\n";
  CHECK(r.out == expect);
}

TEST_CASE("cli: a second SIGTERM kills at once and says so", "[launcher][hostile]") {
  TempDir dir;
  Process p(cmd({"--nproc", "2", "--kill-timeout", "30"},
                {"--ignore-term", "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"}),
            {}, dir.path());
  read_rank_pids(dir.path(), 0, 2);
  // The ranks ignore SIGTERM, so the first one leaves the job stopping; the next kills at once.
  // Repeated, because two signals that arrive before the launcher reads them count as one.
  std::optional<RunResult> result;
  for (int i = 0; i < 50 && !result; ++i) {
    p.signal(SIGTERM);
    result = p.wait(200ms);
  }
  REQUIRE(result);
  const RunResult& r = *result;
  CAPTURE(r.err);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(r.seconds < 10);
  CHECK(contains(r.err, "SIGTERM while stopping the job: ranks 0, 1 got SIGKILL at once"));
  CHECK(!contains(r.err, "did not stop within"));
}

namespace {

// Each rank starts `sleep 30 &` in its own process group and a daemon that leaves it
// (`setsid sleep 31 &`), writes both pids to DIR/bg-<rank>, and exits 0 at once.
std::vector<std::string> background_job(const TempDir& dir, std::vector<std::string> flags) {
  std::vector<std::string> v{kFastrun, "--nproc", "2", "--kill-timeout", "20"};
  v.insert(v.end(), flags.begin(), flags.end());
  const std::string script = "sleep 30 & a=$!; setsid sleep 31 & echo \"$a $!\" > " + dir.str() + "/bg-$FASTRUN_RANK";
  v.insert(v.end(), {"/bin/sh", "-c", script});
  return v;
}

std::vector<pid_t> background_pids(const TempDir& dir) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream in(read_file(dir.path() / ("bg-" + std::to_string(rank))));
    for (pid_t pid; in >> pid;) pids.push_back(pid);
  }
  return pids;
}

}  // namespace

TEST_CASE("cli: processes the ranks leave running are stopped with the job", "[launcher][hostile]") {
  TempDir dir;
  const auto r = run(background_job(dir, {}), {}, 60s);
  CAPTURE(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.seconds < 10);  // they honour SIGTERM: no wait for the 20 s kill timeout
  CHECK(contains(r.err, "stopped the processes the ranks left running (--keep-background keeps them)"));
  const auto pids = background_pids(dir);
  REQUIRE(pids.size() == 4);
  // Gone when the launcher has exited: in the rank's process group, or adopted after setsid.
  for (pid_t pid : pids) {
    CAPTURE(pid);
    CHECK(process_gone(pid));
  }
}

TEST_CASE("cli: --keep-background leaves them running", "[launcher][hostile]") {
  TempDir dir;
  const auto r = run(background_job(dir, {"--keep-background"}), {}, 20s);
  CAPTURE(r.err);
  CHECK(r.exit_code == 0);
  CHECK(!contains(r.err, "left running"));
  const auto pids = background_pids(dir);
  REQUIRE(pids.size() == 4);
  for (pid_t pid : pids) {
    CAPTURE(pid);
    CHECK(!process_gone(pid));
    ::kill(pid, SIGKILL);  // ours to clean up now
  }
  wait_until_gone(pids, 5s);
}

TEST_CASE("cli: --cleanup removes a dead creator's store and its job's segments only", "[launcher][hostile]") {
  const std::string id = "dead-" + std::to_string(::getpid());
  // A creator that dies without removing its store (and without a janitor): a forked child
  // hosts it and leaves through _exit.
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      auto hosted = fastrun::host_store("shm://" + id);
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  for (const std::string& name : {id + "@leftover", id + "-x@leftover"}) {
    ::close(::open(("/dev/shm/fastrun-" + name).c_str(), O_CREAT | O_WRONLY, 0600));
  }
  const auto r = run({kFastrun, "--cleanup"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "removed /dev/shm/fastrun-" + id + "\n"));
  CHECK(!shm_exists("fastrun-" + id));
  CHECK(!shm_exists("fastrun-" + id + "@leftover"));
  CHECK(shm_exists("fastrun-" + id + "-x@leftover"));  // another job's (run id "<id>-x")
  for (const auto& e : shm_entries("fastrun-" + id)) ::unlink(("/dev/shm/" + e).c_str());
}
