// The fastrun CLI driven against the sparring partner: environment contract, argv fidelity,
// usage errors, exit codes, signals, orphans, output, logs, concurrency, /dev/shm hygiene.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <catch2/catch.hpp>

#include "fastrun/launcher/device_plan.h"
#include "process_runner.h"

using namespace fastrun::test;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

std::string run_id_arg(const std::string& tag) { return "t-" + tag + "-" + std::to_string(::getpid()); }

}  // namespace

TEST_CASE("every rank gets the environment contract", "[launcher][env]") {
  TempDir dir;
  const std::string id = run_id_arg("env");
  const auto r = run(cmd({"--nproc", "3", "--run-id", id}, {"--dump", dir.str() + "/dump-%r"}),
                     {{"FASTRUN_GLOBAL_SEED", std::nullopt}, {"CUDA_VISIBLE_DEVICES", "5,6"}});
  REQUIRE(r.exit_code == 0);
  std::set<std::string> seeds;
  for (int rank = 0; rank < 3; ++rank) {
    const auto d = read_dump(dir.path() / ("dump-" + std::to_string(rank)));
    const std::string rs = std::to_string(rank);
    CHECK(d.env.at("FASTRUN_RANK") == rs);
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "3");
    CHECK(d.env.at("FASTRUN_LOCAL_RANK") == rs);
    CHECK(d.env.at("FASTRUN_LOCAL_WORLD_SIZE") == "3");
    CHECK(d.env.at("FASTRUN_NODE_RANK") == "0");
    CHECK(d.env.at("FASTRUN_NNODES") == "1");
    CHECK(d.env.at("FASTRUN_RUN_ID") == id);
    CHECK(d.env.at("FASTRUN_STORE") == "shm://" + id);
    CHECK(d.env.at("RANK") == rs);
    CHECK(d.env.at("WORLD_SIZE") == "3");
    CHECK(d.env.at("LOCAL_RANK") == rs);
    CHECK(d.env.at("LOCAL_WORLD_SIZE") == "3");
    CHECK(d.env.at("CUDA_VISIBLE_DEVICES").empty());  // --nproc ranks are CPU ranks: GPUs hidden
    CHECK(d.env.at("USER_CUDA_VISIBLE_DEVICES") == "5,6");  // the user's value kept
    seeds.insert(d.env.at("FASTRUN_GLOBAL_SEED"));
  }
  CHECK(seeds.size() == 1);
  CHECK(shm_entries("fastrun-" + id).empty());
}

TEST_CASE("the user's seed is kept and a bad one is a usage error", "[launcher][env]") {
  TempDir dir;
  auto r = run(cmd({"--nproc", "2"}, {"--dump", dir.str() + "/dump-%r"}), {{"FASTRUN_GLOBAL_SEED", "1234"}});
  REQUIRE(r.exit_code == 0);
  CHECK(read_dump(dir.path() / "dump-0").env.at("FASTRUN_GLOBAL_SEED") == "1234");
  CHECK(read_dump(dir.path() / "dump-1").env.at("FASTRUN_GLOBAL_SEED") == "1234");
  r = run(cmd({"--nproc", "2"}, {}), {{"FASTRUN_GLOBAL_SEED", "abc"}});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "FASTRUN_GLOBAL_SEED"));
}

TEST_CASE("cli: --devices pins one device per rank through CUDA_VISIBLE_DEVICES", "[launcher][devices]") {
  TempDir dir;
  const auto r = run(cmd({"--devices", "0,2,3"}, {"--dump", dir.str() + "/dump-%r"}),
                     {{"CUDA_VISIBLE_DEVICES", "3,4,5,6"}});
  REQUIRE(r.exit_code == 0);
  const Strings expect = {"3", "5", "6"};
  for (int rank = 0; rank < 3; ++rank) {
    const auto d = read_dump(dir.path() / ("dump-" + std::to_string(rank)));
    CHECK(d.env.at("CUDA_VISIBLE_DEVICES") == expect[static_cast<std::size_t>(rank)]);
    CHECK(d.env.at("USER_CUDA_VISIBLE_DEVICES") == "3,4,5,6");
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "3");
  }
}

TEST_CASE("argv reaches every rank byte for byte", "[launcher][argv]") {
  TempDir dir;
  const Strings data = {"a b", "", "--", "--nproc", "-x", "ünïcödé ✓", std::string("\xff\xfe raw", 6), "  ", "*"};
  Strings partner = {"--dump", dir.str() + "/dump-%r", "--rest"};
  partner.insert(partner.end(), data.begin(), data.end());
  // PROGRAM found on PATH by name, as a shell would.
  const std::string name = std::filesystem::path(kPartner).filename();
  const std::string bin_dir = std::filesystem::path(kPartner).parent_path();
  Strings c = {kFastrun, "--nproc", "2", "--", name};
  c.insert(c.end(), partner.begin(), partner.end());
  const auto r = run(c, {{"PATH", bin_dir + ":/usr/bin:/bin"}});
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const auto d = read_dump(dir.path() / ("dump-" + std::to_string(rank)));
    Strings expect = {name};
    expect.insert(expect.end(), partner.begin(), partner.end());
    CHECK(d.argv == expect);
  }
}

TEST_CASE("usage errors exit 2 before any rank starts", "[launcher][usage]") {
  TempDir dir;
  const std::string marker = dir.str() + "/started-%r";
  struct Row {
    Strings args;
    std::optional<std::string> cvd;
    Strings needles;
  };
  const std::vector<Row> rows = {
      {{"--devices", "0,,1"}, "0,1,2", {"entry 1 is empty", "'all'"}},
      {{"--devices", "gpu0"}, std::nullopt, {"'gpu0' is not a device index", "GPU-<uuid>", "'all'"}},
      {{"--devices", "a"}, "0,1", {"'a'"}},
      {{"--devices", "-1"}, "0,1", {"negative"}},
      {{"--devices", "1,1"}, "0,1", {"twice"}},
      {{"--devices", "7"}, "3,4,5,6", {"7 is out of range", "0..3"}},
      {{"--devices", ""}, "0,1", {"empty"}},
      {{"--nproc", "0"}, std::nullopt, {"--nproc 0"}},
      {{"--nproc", "2", "--devices", "0"}, "0", {"both"}},
      {{"--nproc", "2", "--output", "loud"}, std::nullopt, {"'loud'"}},
      {{"--nproc", "2", "--frobnicate"}, std::nullopt, {"unknown option '--frobnicate'; see fastrun --help"}},
      {{"--nproc", "two"}, std::nullopt, {"fastrun: --nproc 'two': expected a whole number"}},
      {{"--nproc", "2", "--kill-timeout", "soon"}, std::nullopt, {"fastrun: --kill-timeout 'soon': expected seconds"}},
      {{"--nproc", "2", "--tag-output=1"}, std::nullopt, {"fastrun: --tag-output takes no value (got '1')"}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.args);
    std::map<std::string, std::optional<std::string>> env{{"CUDA_VISIBLE_DEVICES", row.cvd}};
    const auto r = run(cmd(row.args, {"--pidfile", marker}), env);
    CHECK(r.exit_code == 2);
    for (const auto& n : row.needles) {
      CAPTURE(r.err);
      CHECK(contains(r.err, n));
    }
  }
  CHECK(std::filesystem::is_empty(dir.path()));  // no rank ever started
  // A typo is named as one even on a machine without GPUs (it was "no GPU found").
  auto r = run(cmd({"--devices", "gpu0"}, {}), {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "'gpu0'"));
  CHECK_FALSE(contains(r.err, "no GPU"));
  r = run({kFastrun, "--nproc", "2", "no-such-program-fastrun-test"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "'no-such-program-fastrun-test' was not found on PATH"));
  if (fastrun::launcher::count_physical_gpus() == 0) {
    r = run(cmd({"--devices", "0"}, {}), {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--nproc"));
  }
  r = run({kFastrun, "--help"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "--devices"));
  r = run({kFastrun, "--version"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "fastrun "));
  r = run({kFastrun, "--help-env"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "FASTRUN_GLOBAL_SEED"));
}

TEST_CASE("exit codes: 0 on success then the failing rank code or 128+signal", "[launcher][exit]") {
  auto r = run(cmd({"--nproc", "3"}, {"--exit", "0"}));
  CHECK(r.exit_code == 0);

  // Rank 1 fails with 3 while the others sleep: they are stopped at once.
  r = run(cmd({"--nproc", "3"}, {"--on", "1", "--err", "boom on rank 1", "--on", "1", "--exit", "3", "--sleep", "30"}));
  CHECK(r.exit_code == 3);
  CHECK(r.seconds < 5);
  CHECK(contains(r.err, "rank 1"));
  CHECK(contains(r.err, "exited with code 3"));
  CHECK(contains(r.err, "  | boom on rank 1"));

  r = run(cmd({"--nproc", "2"}, {"--on", "0", "--crash", "segv", "--sleep", "30"}));
  CHECK(r.exit_code == 128 + SIGSEGV);
  CHECK(contains(r.err, "killed by signal SIGSEGV"));

  r = run(cmd({"--nproc", "2"}, {"--on", "1", "--crash", "abort", "--sleep", "30"}));
  CHECK(r.exit_code == 128 + SIGABRT);
  CHECK(contains(r.err, "SIGABRT"));
}

// A survivor that learns of a peer's death from a broken connection records "rank 0: process
// gone" and exits 1, which can show before the dying rank's own exit does (its sockets close
// first). The job's failure is still the root cause: here rank 0 dies by SIGKILL 0.2 s after
// rank 1 blamed it and exited, and the summary and exit code are rank 0's.
TEST_CASE("a rank that exits blaming a peer's death does not hide that death", "[launcher][exit]") {
  const auto r = run(cmd({"--nproc", "2"}, {"--on", "1", "--blame-rank-0", "--on", "1", "--exit", "1", "--until-failure",
                                            "--sleep", "0.2", "--crash", "kill"}));
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(contains(r.err, "fastrun: rank 0 (pid "));
  CHECK(contains(r.err, "killed by signal SIGKILL"));
  CHECK(contains(r.err, "the job's first recorded failure: rank 0: process gone"));
  CHECK_FALSE(contains(r.err, "exited with code 1"));
}

TEST_CASE("a rank ignoring SIGTERM is killed after --kill-timeout", "[launcher][exit]") {
  const auto r = run(cmd({"--nproc", "2", "--kill-timeout", "0.5"},
                         {"--ignore-term", "--barrier", "--on", "1", "--exit", "5", "--sleep", "30"}));
  CHECK(r.exit_code == 5);
  CHECK(r.seconds >= 0.5);
  CHECK(r.seconds < 5);
  CHECK(contains(r.err, "SIGKILL"));
}

TEST_CASE("the failure key reaches ranks blocked on the store", "[launcher][exit]") {
  const auto r = run(cmd({"--nproc", "2"}, {"--ignore-term", "--barrier", "--on", "1", "--exit", "3", "--wait-failure"}));
  CHECK(r.exit_code == 3);
  CHECK(contains(r.err, "saw failure: rank 1: exited with code 3"));
}

// Each rank records the signals it gets (--trap-signals): a rank stopped by PDEATHSIG's SIGKILL
// after the launcher left records nothing, so these prove the launcher itself forwarded them.
TEST_CASE("signals to the launcher stop the job and SIGUSR1/2 are forwarded", "[launcher][signals]") {
  const std::vector<std::tuple<int, int, std::string>> rows = {
      {SIGINT, 130, "INT\n"}, {SIGTERM, 143, "TERM\n"}, {SIGHUP, 129, "HUP\n"}};
  for (const auto& [sig, code, name] : rows) {
    CAPTURE(sig);
    TempDir dir;
    Process p(cmd({"--nproc", "2"}, {"--trap-signals", dir.str() + "/sig-%r", "--pidfile", dir.str() + "/pid-%r",
                                     "--sleep", "30"}),
              {}, dir.path());
    const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);  // both ranks trap signals now
    p.signal(sig);
    const auto r = p.finish(10s);
    CHECK(r.exit_code == code);
    CHECK(r.seconds < 5);
    for (int rank = 0; rank < 2; ++rank)
      CHECK(read_file(dir.path() / ("sig-" + std::to_string(rank))) == name);
    wait_until_gone(pids, 2s);
    for (pid_t pid : pids) CHECK(process_gone(pid));
  }
  TempDir dir;
  Process p(cmd({"--nproc", "2"}, {"--trap-signals", dir.str() + "/sig-%r", "--pidfile", dir.str() + "/pid-%r",
                                   "--sleep", "30"}),
            {}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  p.signal(SIGUSR1);
  for (int rank = 0; rank < 2; ++rank)
    CHECK(wait_for_content(dir.path() / ("sig-" + std::to_string(rank)), "USR1\n", 5s) == "USR1\n");
  p.signal(SIGUSR2);
  for (int rank = 0; rank < 2; ++rank)
    CHECK(wait_for_content(dir.path() / ("sig-" + std::to_string(rank)), "USR1\nUSR2\n", 5s) == "USR1\nUSR2\n");
  for (pid_t pid : pids) CHECK_FALSE(process_gone(pid));  // forwarded, not a reason to stop
  p.signal(SIGTERM);
  const auto r = p.finish(10s);
  CHECK(r.exit_code == 143);
  for (int rank = 0; rank < 2; ++rank)
    CHECK(read_file(dir.path() / ("sig-" + std::to_string(rank))) == "USR1\nUSR2\nTERM\n");
}

TEST_CASE("a signalled launcher sends SIGTERM, waits --kill-timeout, then SIGKILLs a rank ignoring it",
          "[launcher][signals]") {
  TempDir dir;
  Process p(cmd({"--nproc", "2", "--kill-timeout", "0.5"},
                {"--on", "0", "--trap-signals", dir.str() + "/sig-%r", "--on", "1", "--ignore-term", "--pidfile",
                 dir.str() + "/pid-%r", "--sleep", "30"}),
            {}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 2);
  const auto sent = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  const auto r = p.finish(10s);
  const double stopped = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  CHECK(r.exit_code == 143);
  CHECK(read_file(dir.path() / "sig-0") == "TERM\n");  // rank 0 was sent SIGTERM, not killed
  CHECK(stopped >= 0.5);  // rank 1 was given --kill-timeout before SIGKILL
  CHECK(stopped < 5);
  CHECK(contains(r.err, "fastrun: got SIGTERM"));
  CHECK(contains(r.err, "rank 1 did not stop within --kill-timeout 0.5 s and got SIGKILL"));
  wait_until_gone(pids, 2s);
  for (pid_t pid : pids) CHECK(process_gone(pid));
}

TEST_CASE("rank 0 reads the launcher's stdin and the other ranks an empty one", "[launcher][io]") {
  // Through a pipe: a terminal is not handed over (a background rank reading it gets SIGTTIN).
  const auto r = run({"/bin/sh", "-c", "printf 'fed to the job' | \"$0\" --nproc 2 \"$1\" --echo-stdin", kFastrun,
                      kPartner});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "stdin[0]: fed to the job\n"));
  CHECK(contains(r.out, "stdin[1]: \n"));
}

TEST_CASE("FASTRUN_LOG_LEVEL sets the launcher's verbosity and a bad level is refused", "[launcher][env]") {
  const std::string id = run_id_arg("loglevel");
  const auto quiet = run(cmd({"--nproc", "2", "--run-id", id}, {}), {{"FASTRUN_LOG_LEVEL", std::nullopt}});
  CHECK(quiet.exit_code == 0);
  CHECK_FALSE(contains(quiet.err, "info:"));  // the default is warn
  const auto info = run(cmd({"--nproc", "2", "--run-id", id}, {}), {{"FASTRUN_LOG_LEVEL", "info"}});
  CHECK(info.exit_code == 0);
  CHECK(contains(info.err, " launcher] info: run " + id + ": 2 ranks"));
  const auto bad = run(cmd({"--nproc", "2"}, {}), {{"FASTRUN_LOG_LEVEL", "loud"}});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "FASTRUN_LOG_LEVEL"));
  CHECK(contains(bad.err, "loud"));
  CHECK(contains(bad.err, "error|warn|info|debug"));
}

TEST_CASE("SIGKILL of the launcher leaves no rank running", "[launcher][signals]") {
  TempDir dir;
  const std::string id = run_id_arg("kill9");
  Process p(cmd({"--nproc", "3", "--run-id", id}, {"--ignore-term", "--shm-leftover", "--pidfile", dir.str() + "/pid-%r", "--sleep", "30"}),
            {}, dir.path());
  const std::vector<pid_t> pids = read_rank_pids(dir.path(), 0, 3);
  p.signal(SIGKILL);
  p.finish(5s);
  wait_until_gone(pids, 2s);
  for (pid_t pid : pids) CHECK(process_gone(pid));
  // The launcher's janitor removes its store and the ranks' segments once the ranks are gone:
  // nothing is left, without `fastrun --cleanup`.
  for (int i = 0; i < 500 && !shm_entries("fastrun-" + id).empty(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(shm_entries("fastrun-" + id).empty());
  for (const auto& e : shm_entries("fastrun-" + id)) ::unlink(("/dev/shm/" + e).c_str());
}

TEST_CASE("every FASTRUN_* variable the ranks read is checked before anything starts", "[launcher][env]") {
  // Once each rank refused these only after it started; now the CLI exits 2 and launch_self
  // throws (the partner exits 2), and no rank runs.
  struct Bad {
    const char* name;
    const char* value;
    const char* accepted;
  };
  for (const Bad& b : {Bad{"FASTRUN_BACKEND", "bogus", "one of auto|shm|gloo|hier|nccl"},
                       Bad{"FASTRUN_TIMEOUT", "abc", "seconds > 0 and <= 86400"},
                       Bad{"FASTRUN_OP_TIMEOUT", "1e10", "seconds > 0 and <= 86400"},
                       Bad{"FASTRUN_NO_SYNC", "7", "an integer from 0 to 2"},
                       Bad{"FASTRUN_LOG_LEVEL", "loud", "one of error|warn|info|debug"},
                       Bad{"FASTRUN_SHM_STORE_BYTES", "12", "an integer >= 65536"}}) {
    for (const bool self : {false, true}) {
      TempDir dir;
      const std::string pids = dir.str() + "/pid-%r";
      const auto argv = self ? std::vector<std::string>{kPartner, "--self", "2", "--pidfile", pids}
                             : cmd({"--nproc", "2"}, {"--pidfile", pids});
      const auto r = run(argv, {{"FASTRUN_RANK", std::nullopt}, {b.name, b.value}});
      INFO((self ? "launch_self " : "fastrun ") << b.name << "=" << b.value << ": " << r.err);
      CHECK(r.exit_code == 2);
      CHECK(contains(r.err, std::string(b.name) + "='" + b.value + "'"));
      CHECK(contains(r.err, b.accepted));
      CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-0"));
      CHECK_FALSE(std::filesystem::exists(dir.path() / "pid-1"));
    }
  }
  // What the launcher sets for its ranks is not the user's to get right.
  const auto r = run(cmd({"--nproc", "2"}, {}), {{"FASTRUN_WORLD_SIZE", "abc"}, {"FASTRUN_STORE", "nonsense"}});
  CHECK(r.exit_code == 0);
}
