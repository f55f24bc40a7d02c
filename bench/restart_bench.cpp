// fastrun-bench restart: what a failure costs a job run with restarts, beside torchrun 2.x's.
//   fastrun:  `fastrun --nproc N --max-restarts 1 fastrun-bench restart --as-rank DIR`. In
//             attempt 0 every rank joins and passes a barrier, then rank 1 records the time and
//             exits 1 while the others wait in a second barrier; the launcher stops them and
//             starts attempt 1, whose ranks join again and pass a barrier.
//   torchrun: the same program in Python (bench/torch_restart.py) under torchrun 2.x's
//             `--standalone --nproc-per-node N --max-restarts 1` with its defaults, init_process_group
//             ("gloo") in place of join().
// Columns (ms, medians): death -> start = from rank 1's death to the first rank of attempt 1
// running (the launcher's detection, stop and restart; for Python, with the interpreter's
// start); start -> joined = from there to the last rank of attempt 1 through the barrier (the
// program's start-up and rendezvous: `import torch` is most of torchrun's); death -> joined =
// both, the "back through join()" (goal: < 1 s on one node). failed = torchrun runs whose
// job did not end with 0 (a note names the first failure of each row); their times are left out.
//   --nodes K: one launcher per node, each of --ranks ranks (fastrun --nnodes K; torchrun
//             --nnodes K with its c10d rendezvous on node 0's address), and the first rank of the
//             last node dies, so that the failure crosses hosts: bench/on_hosts.sh restart puts
//             each node on its own network-namespace host (--on-node, --master-addr).
// Options: --ranks 2,4  --reps 5  --fastrun PATH  --python PATH|none (torch 2.x's python;
// default: FASTRUN_TORCH2_PYTHON, else tools/install-torch2.sh's venv)  --torch-timeout 120
// --nodes K --on-node PREFIX (once per node) --master-addr ADDR.
// Nothing is asserted.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_nodes.h"
#include "bench_process.h"
#include "bench_registry.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/join.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/tools/flags/number_flags.h"

namespace fastrun::bench {
namespace {

namespace fs = std::filesystem;

// `dying`: the rank that dies in attempt 0 (1 on one node; the first rank of the last node with
// --nodes, so that the failure crosses hosts).
int as_rank(const std::string& dir, int dying) {
  const auto attempt = env::find_int(env::kRestartCount).value_or(0);
  const auto rank = env::get_int(env::kRank);
  write_stamp(fmt::format("{}/start-{}-{}", dir, attempt, rank));
  auto ctx = join();
  ctx->world().barrier()->wait();
  if (attempt == 0) {
    if (rank == dying) {
      write_stamp(dir + "/death");
      ::_exit(1);
    }
    ctx->world().barrier()->wait();  // the dying rank never comes: the launcher stops this attempt
    return 1;
  }
  write_stamp(fmt::format("{}/joined-{}", dir, rank));
  return 0;
}

struct Times {
  double to_start = 0, to_joined = 0;  // from the death
};

// Reads the stamps one restarted run left in dir: the death, attempt 1's starts and joins.
Times read_times(const std::string& dir, int n, const std::string& who) {
  const double death = read_stamp(dir + "/death");
  if (death < 0) throw Error(fmt::format("{}: the dying rank of attempt 0 left no stamp in {}", who, dir));
  double first_start = 1e300, last_joined = 0;
  for (int r = 0; r < n; ++r) {
    const double s = read_stamp(fmt::format("{}/start-1-{}", dir, r)), j = read_stamp(fmt::format("{}/joined-{}", dir, r));
    if (s < 0 || j < 0) throw Error(fmt::format("{}: rank {} of attempt 1 left no stamp in {}", who, r, dir));
    first_start = std::min(first_start, s);
    last_joined = std::max(last_joined, j);
  }
  return {first_start - death, last_joined - death};
}

// A run whose job did not end with 0: why, in one line (the last error line of its stderr).
struct Failed {
  std::string why;
};

// One launcher per entry of `argvs` (one per node), started together; each one's stderr goes to a
// file beside the stamps, whose error line tells why a run failed.
std::variant<Times, Failed> run_once(const std::vector<std::vector<std::string>>& argvs, int n, const std::string& dir,
                                     const std::string& who) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> env = {fmt::format("FASTRUN_STORE_TOKEN=bench-restart-{}", ::getpid())};
  std::vector<pid_t> pids;
  for (std::size_t k = 0; k < argvs.size(); ++k)
    pids.push_back(start(argvs[k], env, /*quiet_stderr=*/false, fmt::format("{}.stderr-{}", dir, k)));
  int code = 0;
  for (pid_t p : pids) code = std::max(code, reap(p));
  // The root cause, where Python names one (a RuntimeError), else the last line with "rror".
  std::string error_line, root_cause;
  for (std::size_t k = 0; k < argvs.size(); ++k) {
    const std::string log = fmt::format("{}.stderr-{}", dir, k);
    if (std::FILE* f = std::fopen(log.c_str(), "r")) {
      char buf[4096];
      while (std::fgets(buf, sizeof buf, f)) {
        if (std::strstr(buf, "rror") != nullptr) error_line = buf;
        if (std::strstr(buf, "RuntimeError") != nullptr) root_cause = buf;
      }
      std::fclose(f);
    }
    fs::remove(log);
  }
  if (!root_cause.empty()) error_line = root_cause.substr(0, 400);
  if (code != 0) {
    while (!error_line.empty() && (error_line.back() == '\n' || error_line.back() == ' ')) error_line.pop_back();
    if (code == 124 || code == 128 + 9) error_line = "timed out (--torch-timeout); " + error_line;
    return Failed{fmt::format("{} job of {} ranks with one restart exited {}: {}", who, n, code,
                              error_line.empty() ? "(no error line)" : error_line)};
  }
  return read_times(dir, n, who);
}

// Installed beside the binary (share/fastrun), or read from the source tree of this build.
std::string find_script() {
  const fs::path exe_dir = fs::path(self_exe()).parent_path();
  for (const fs::path& p :
       {exe_dir / "../share/fastrun/torch_restart.py", fs::path(FASTRUN_BENCH_SOURCE_DIR) / "torch_restart.py"})
    if (fs::exists(p)) return p.string();
  return "";
}

// torch 2.x's python, or why there is none. One given with --python that does not import torch
// 2.x is a ConfigError: its user asked for the torchrun columns.
std::string torch2_python(const std::string& given, std::string& why) {
  std::string py = given;
  if (py.empty() && std::getenv("FASTRUN_TORCH2_PYTHON") && *std::getenv("FASTRUN_TORCH2_PYTHON"))
    py = std::getenv("FASTRUN_TORCH2_PYTHON");
  if (py.empty()) py = "/var/cache/fastrun/torch2-venv/bin/python";  // tools/install-torch2.sh's venv
  if (py == "none") {
    why = "--python none";
    return "";
  }
  const std::string check = py + " -c 'import sys, torch.distributed.run; sys.exit(int(torch.__version__[0]) < 2)' "
                                 ">/dev/null 2>&1";
  if (::access(py.c_str(), X_OK) != 0 || std::system(check.c_str()) != 0) {
    if (!given.empty())
      throw ConfigError(fmt::format("restart: --python {} does not import torch 2.x; accepted: a python that does "
                                    "(tools/install-torch2.sh makes one), or none",
                                    given));
    why = fmt::format("{} does not import torch 2.x (tools/install-torch2.sh makes one; or pass --python)", py);
    return "";
  }
  if (find_script().empty()) {
    why = "bench/torch_restart.py not found";
    return "";
  }
  return py;
}

std::string row(const std::vector<Times>& t) {
  std::vector<double> a, b, c;
  for (const Times& x : t) {
    a.push_back(x.to_start);
    b.push_back(x.to_joined - x.to_start);
    c.push_back(x.to_joined);
  }
  return fmt::format("{:>10.1f} {:>10.1f} {:>10.1f}", median(a), median(b), median(c));
}

// The launchers of one run: fastrun's or torchrun's, on one node or one per node of `nodes`; n
// ranks per node, `dying` the rank that dies.
std::vector<std::vector<std::string>> fastrun_argvs(const Nodes& nodes, const std::string& fastrun,
                                                    const std::string& exe, int n, int dying, const std::string& dir) {
  const std::vector<std::string> job = {"--nproc", std::to_string(n), "--max-restarts", "1", "--output", "ignore", exe,
                                        "restart", "--as-rank", dir, std::to_string(dying)};
  if (nodes.count == 0) return {joined({fastrun}, job)};
  const std::string port = std::to_string(free_port());
  std::vector<std::vector<std::string>> argvs;
  for (int k = 0; k < nodes.count; ++k)
    argvs.push_back(joined(nodes.on(k), joined({fastrun, "--nnodes", std::to_string(nodes.count), "--node-rank",
                                                std::to_string(k), "--master-addr", nodes.master, "--master-port", port},
                                               job)));
  return argvs;
}

// Under coreutils' timeout, which stops the agent's whole process group: a rank of a restarted
// torchrun job can wait in gloo's connect for stale peers until its own timeout. Across nodes,
// torchrun's c10d rendezvous on node 0's address (its agent there hosts the store).
std::vector<std::vector<std::string>> torchrun_argvs(const Nodes& nodes, const std::string& py, int timeout, int n,
                                                     int dying, const std::string& dir) {
  const std::vector<std::string> run = {"timeout", "-k", "5", std::to_string(timeout), py, "-m",
                                        "torch.distributed.run"};
  const std::vector<std::string> job = {"--nproc-per-node", std::to_string(n), "--max-restarts", "1", find_script(), dir,
                                        std::to_string(dying)};
  if (nodes.count == 0) return {joined(joined(run, {"--standalone"}), job)};
  const std::string endpoint = fmt::format("{}:{}", nodes.master, free_port());
  const std::string id = fmt::format("bench-restart-{}-{}", ::getpid(), endpoint);
  std::vector<std::vector<std::string>> argvs;
  for (int k = 0; k < nodes.count; ++k)
    argvs.push_back(joined(nodes.on(k), joined(joined(run, {"--nnodes", std::to_string(nodes.count), "--rdzv-backend",
                                                           "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", id}),
                                                job)));
  return argvs;
}

int run_restart(int argc, char** argv) {
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "--as-rank") == 0)
    return as_rank(argv[2], argc == 4 ? static_cast<int>(text::parse_integer("the dying rank", argv[3], 0, 1 << 20)) : 1);
  std::vector<int> ranks = {2, 4};
  int reps = 5, torch_timeout = 120;
  std::string fastrun, python;
  Nodes nodes;
  CLI::App app("from a rank's death to the next attempt through join(), beside torchrun 2.x", "fastrun-bench restart");
  flags::integer_list(app, "--ranks", ranks,
                      "rank counts to time (per node with --nodes), comma-separated; rank 1 dies (with --nodes, the "
                      "first rank of the last node)",
                      2, 256);
  flags::integer(app, "--reps", reps, "repetitions per rank count; the median is shown", 1, 1000);
  flags::integer(app, "--torch-timeout", torch_timeout, "seconds a torchrun run may take before it is stopped and counted "
                 "failed", 5, 3600);
  app.add_option("--fastrun", fastrun, "the launcher to time (default: the fastrun next to this binary)")
      ->type_name("PATH");
  app.add_option("--python", python,
                 "torch 2.x's python for the torchrun columns (refused if it does not import torch 2.x), or none "
                 "(default: FASTRUN_TORCH2_PYTHON, else tools/install-torch2.sh's venv; without torch 2.x there: "
                 "dashes and a note)")
      ->type_name("PATH");
  add_node_flags(app, nodes, 2, "instead of one node: K launchers (fastrun --nnodes K, torchrun's c10d rendezvous) "
                                "of --ranks ranks each (bench/on_hosts.sh)");
  flags::parse(app, argc, argv);
  check_nodes(nodes, "restart");
  const std::string exe = self_exe();
  fastrun = find_fastrun(fastrun, "restart");
  std::string why;
  const std::string py = torch2_python(python, why);
  const std::string dir = fmt::format("/tmp/fastrun-bench-restart-{}", ::getpid());
  struct RemoveAtEnd {  // also when a run throws
    std::string dir;
    int launchers;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(dir, ec);
      for (int k = 0; k < launchers; ++k) fs::remove(fmt::format("{}.stderr-{}", dir, k), ec);
    }
  } remove_at_end{dir, std::max(1, nodes.count)};
  std::vector<std::string> torch_failures;  // the first failure of each row's torchrun runs

  std::printf("fastrun-bench restart: medians of %d runs (ms) from the death of %s in attempt 0; start = the "
              "first rank of attempt 1 running, joined = the last one through join() and a barrier\n",
              reps, nodes.count == 0 ? "rank 1" : "the first rank of the last node");
  if (nodes.count > 0) std::printf("%s\n", nodes.where().c_str());
  if (py.empty()) std::printf("note: torchrun comparison skipped: %s\n", why.c_str());
  std::printf("%7s | %-32s | %-40s\n", "", "fastrun --max-restarts 1", "torchrun 2.x --max-restarts 1");
  std::printf("%7s | %10s %10s %10s | %10s %10s %10s %7s\n", nodes.count == 0 ? "ranks" : "nodes x", "->start",
              "start->jnd", "->joined", "->start", "start->jnd", "->joined", "failed");
  std::fflush(stdout);
  for (int n : ranks) {
    const int total = n * std::max(1, nodes.count), dying = nodes.count == 0 ? 1 : n * (nodes.count - 1);
    std::vector<Times> f, t;
    int torch_failed = 0;
    for (int r = 0; r < reps; ++r) {  // the runs of one row alternate
      auto mine = run_once(fastrun_argvs(nodes, fastrun, exe, n, dying, dir), total, dir, "fastrun");
      if (auto* failed = std::get_if<Failed>(&mine)) throw Error(failed->why);
      f.push_back(std::get<Times>(mine));
      if (py.empty()) continue;
      auto theirs = run_once(torchrun_argvs(nodes, py, torch_timeout, n, dying, dir), total, dir, "torchrun");
      if (auto* failed = std::get_if<Failed>(&theirs)) {
        // Counted, not fatal: what a user of torchrun's restarts meets is part of the comparison.
        if (torch_failed++ == 0) torch_failures.push_back(failed->why);
      } else {
        t.push_back(std::get<Times>(theirs));
      }
    }
    const std::string label = nodes.count == 0 ? std::to_string(n) : fmt::format("{} x {}", nodes.count, n);
    std::printf("%7s | %s | %s %7s\n", label.c_str(), row(f).c_str(),
                t.empty() ? fmt::format("{:>10} {:>10} {:>10}", "-", "-", "-").c_str() : row(t).c_str(),
                py.empty() ? "-" : fmt::format("{}/{}", torch_failed, reps).c_str());
    std::fflush(stdout);
  }
  for (const std::string& why : torch_failures) std::printf("note: a failed torchrun run: %s\n", why.c_str());
  return 0;
}

Registration reg{"restart", "a failure's cost with --max-restarts, beside torchrun 2.x", &run_restart};

}  // namespace
}  // namespace fastrun::bench
