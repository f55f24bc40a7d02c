// The fastrun CLI driven against the sparring partner: environment contract, argv fidelity,
// usage errors, exit codes, signals, orphans, output, logs, concurrency, /dev/shm hygiene.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <thread>

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
      {{"--devices", "0,,1"}, "0,1,2", {"entry 1 is empty", "0..2"}},
      {{"--devices", "a"}, "0,1", {"'a'"}},
      {{"--devices", "-1"}, "0,1", {"negative"}},
      {{"--devices", "1,1"}, "0,1", {"twice"}},
      {{"--devices", "7"}, "3,4,5,6", {"7 is out of range", "0..3"}},
      {{"--devices", ""}, "0,1", {"empty"}},
      {{"--nproc", "0"}, std::nullopt, {"--nproc 0"}},
      {{"--nproc", "2", "--devices", "0"}, "0", {"both"}},
      {{"--nproc", "2", "--output", "loud"}, std::nullopt, {"'loud'"}},
      {{"--nproc", "2", "--frobnicate"}, std::nullopt, {"'--frobnicate'"}},
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
  auto r = run({kFastrun, "--nproc", "2", "no-such-program-fastrun-test"});
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

TEST_CASE("signals to the launcher stop the job and SIGUSR1/2 are forwarded", "[launcher][signals]") {
  TempDir dir;
  const std::vector<std::pair<int, int>> rows = {{SIGINT, 130}, {SIGTERM, 143}, {SIGHUP, 129}};
  for (auto [sig, code] : rows) {
    CAPTURE(sig);
    const std::string pids = dir.str() + "/pid-" + std::to_string(sig) + "-%r";
    Process p(cmd({"--nproc", "2"}, {"--pidfile", pids, "--sleep", "30"}), {}, dir.path());
    // Wait until both ranks run, then signal the launcher only.
    for (int i = 0; i < 400 && !(std::filesystem::exists(dir.str() + "/pid-" + std::to_string(sig) + "-1") &&
                                 std::filesystem::exists(dir.str() + "/pid-" + std::to_string(sig) + "-0"));
         ++i)
      std::this_thread::sleep_for(10ms);
    p.signal(sig);
    const auto r = p.finish(10s);
    CHECK(r.exit_code == code);
    CHECK(r.seconds < 5);
  }
  Process p(cmd({"--nproc", "2"}, {"--usr1-exit", "0", "--pidfile", dir.str() + "/usr-%r", "--sleep", "30"}), {},
            dir.path());
  for (int i = 0; i < 400 && !(std::filesystem::exists(dir.str() + "/usr-0") &&
                               std::filesystem::exists(dir.str() + "/usr-1"));
       ++i)
    std::this_thread::sleep_for(10ms);
  p.signal(SIGUSR1);
  const auto r = p.finish(10s);
  CHECK(r.exit_code == 0);  // every rank left through its SIGUSR1 handler
  CHECK(r.seconds < 5);
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
  // A SIGKILLed launcher cannot remove its store or the ranks' segments: --cleanup does.
  CHECK(!shm_entries("fastrun-" + id).empty());
  const auto c = run({kFastrun, "--cleanup"});
  CHECK(c.exit_code == 0);
  CHECK(contains(c.out, "/dev/shm/fastrun-" + id));
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
  for (const Bad& b : {Bad{"FASTRUN_BACKEND", "bogus", "one of auto|shm|gloo|nccl"},
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
