// fastrun-bench launch: what starting a job costs, beside the floor.
//   job:   `fastrun --nproc N fastrun-bench launch --as-rank barrier` — every rank starts, passes
//          one barrier through the job's shm store, exits; the launcher creates and removes the
//          store, relays output and reaps.
//   join:  the same with `--as-rank join`: every rank calls fastrun::join() (default backend:
//          shm on one node) and passes one barrier on the world group: what a real job's start
//          costs. Target (issue 14): within 2x the floor.
//   floor: a minimal launcher (this process) forks and execs N copies of
//          `fastrun-bench launch --as-rank noop` and reaps them: the same binary, so the same
//          dynamic-loading cost, with no store, no pipes, no supervision.
//   fail:  from a rank's failure (its last timestamp before _exit(1)) to the launcher's exit,
//          when the other ranks honour SIGTERM.
//   nodes: with --nodes K, one `fastrun --nnodes K --node-rank k` per node, each of --ranks
//          ranks, against a one-node job of the same total: from the first launcher's start to
//          the last rank through a barrier on the job's (global) store, and to the last exit.
//          --on-node PREFIX (once per node, e.g. `nsenter -t PID -n -u -m --`) starts a node's
//          launcher on its host (bench/on_hosts.sh makes the hosts); without it every
//          launcher runs here and the master is 127.0.0.1.
// Options: --ranks 2,4,8,16,32  --reps 7  --fastrun PATH (default: next to this binary, or
// ../tools/fastrun in a build tree). Medians are printed; nothing is asserted.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_nodes.h"
#include "bench_process.h"
#include "bench_registry.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/join.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/tools/flags/number_flags.h"

namespace fastrun::bench {
namespace {

// The rank side: noop | barrier | fail (barrier, then rank 0 records the time and exits 1 while
// the others sleep until stopped).
int as_rank(const std::string& mode) {
  if (mode == "noop") return 0;
  if (mode == "join") {
    auto ctx = join();
    ctx->world().barrier()->wait();
    return 0;
  }
  auto store = connect_store(std::getenv("FASTRUN_STORE"));
  const int world = static_cast<int>(env::get_int(env::kWorldSize));
  store_barrier(*store, "bench/launch", world, std::chrono::seconds(60));
  if (const char* dir = std::getenv("BENCH_LAUNCH_STAMP_DIR"))
    write_stamp(fmt::format("{}/rank-{}", dir, std::getenv("FASTRUN_RANK")));
  if (mode == "barrier") return 0;
  if (env::get_int(env::kRank) == 0) {
    write_stamp(std::getenv("BENCH_LAUNCH_FAIL_FILE"));
    ::_exit(1);
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}

double floor_ms(const std::string& exe, int n) {
  const double t0 = now_ms();
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) pids.push_back(start({exe, "launch", "--as-rank", "noop"}, {}));
  for (pid_t p : pids) reap(p);
  return now_ms() - t0;
}

// mode: barrier (a store barrier) or join (fastrun::join() and a barrier on the world group).
double job_ms(const std::string& fastrun, const std::string& exe, int n, const std::string& mode = "barrier") {
  const double t0 = now_ms();
  const int code = reap(start({fastrun, "--nproc", std::to_string(n), exe, "launch", "--as-rank", mode}, {}));
  const double dt = now_ms() - t0;
  if (code != 0) throw Error(fmt::format("fastrun job of {} ranks exited {}", n, code));
  return dt;
}

double fail_ms(const std::string& fastrun, const std::string& exe, int n, const std::string& file) {
  const pid_t pid = start({fastrun, "--nproc", std::to_string(n), "--output", "ignore", exe, "launch", "--as-rank",
                           "fail"},
                          {"BENCH_LAUNCH_FAIL_FILE=" + file}, /*quiet_stderr=*/true);
  const int code = reap(pid);
  const double end = now_ms();
  if (code != 1) throw Error(fmt::format("failing job of {} ranks exited {} (expected 1)", n, code));
  const double t = read_stamp(file);
  if (t < 0) throw Error("the failing rank left no timestamp in " + file);
  return end - t;
}

struct Rendezvous {
  double through = 0;  // first launcher start -> last rank through the barrier
  double exit = 0;     // first launcher start -> last launcher exit
};

// Starts one launcher per entry of `argvs` (node 0 first), each with its node's prefix, and
// times the job as Rendezvous. Every rank stamps its time after the barrier into `dir`.
Rendezvous time_job(const std::vector<std::vector<std::string>>& argvs, int world, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> env = {"BENCH_LAUNCH_STAMP_DIR=" + dir,
                                        fmt::format("FASTRUN_STORE_TOKEN=bench-launch-{}", ::getpid())};
  const double t0 = now_ms();
  std::vector<pid_t> pids;
  for (const auto& argv : argvs) pids.push_back(start(argv, env));
  int failed = 0;
  for (pid_t p : pids) failed = std::max(failed, reap(p));
  Rendezvous r{0, now_ms() - t0};
  if (failed != 0) throw Error(fmt::format("a launcher of the {}-rank job exited {}", world, failed));
  for (int rank = 0; rank < world; ++rank) {
    const double t = read_stamp(fmt::format("{}/rank-{}", dir, rank));
    if (t < 0) throw Error(fmt::format("rank {} of {} left no stamp in {}", rank, world, dir));
    r.through = std::max(r.through, t - t0);
  }
  return r;
}

void nodes_table(const Nodes& nodes, const std::string& fastrun, const std::string& exe, const std::vector<int>& ranks,
                 int reps) {
  const std::string dir = fmt::format("/tmp/fastrun-bench-stamps-{}", ::getpid());
  std::printf("fastrun-bench launch --nodes %d: medians of %d runs (ms) from the first launcher's start; "
              "rdv = the last rank through a barrier on the job's store, exit = the last launcher's exit\n",
              nodes.count, reps);
  std::printf("%s\n", nodes.where().c_str());
  std::printf("%-13s %6s | %-10s %10s | %-10s %10s\n", "nodes x ranks", "total", "1 node rdv", "exit",
              fmt::format("{} nodes rdv", nodes.count).c_str(), "exit");
  std::fflush(stdout);  // the header now: bench/on_hosts.sh's test waits for it
  const std::vector<std::string> rank_cmd = {exe, "launch", "--as-rank", "barrier"};
  for (int n : ranks) {
    const int total = n * nodes.count;
    std::vector<double> one_rdv, one_exit, many_rdv, many_exit;
    for (int r = 0; r < reps; ++r) {
      const auto one =
          time_job({joined(joined(nodes.on(0), {fastrun, "--nproc", std::to_string(total)}), rank_cmd)}, total, dir);
      one_rdv.push_back(one.through);
      one_exit.push_back(one.exit);
      const std::string port = std::to_string(free_port());
      std::vector<std::vector<std::string>> argvs;
      for (int k = 0; k < nodes.count; ++k)
        argvs.push_back(joined(joined(nodes.on(k), {fastrun, "--nnodes", std::to_string(nodes.count), "--node-rank",
                                                  std::to_string(k), "--master-addr", nodes.master, "--master-port",
                                                  port, "--nproc", std::to_string(n)}),
                               rank_cmd));
      const auto many = time_job(argvs, total, dir);
      many_rdv.push_back(many.through);
      many_exit.push_back(many.exit);
    }
    std::printf("%-13s %6d | %10.2f %10.2f | %10.2f %10.2f\n", fmt::format("{} x {}", nodes.count, n).c_str(), total,
                median(one_rdv), median(one_exit), median(many_rdv), median(many_exit));
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
}

int run_launch(int argc, char** argv) {
  std::vector<int> ranks = {2, 4, 8, 16, 32};
  int reps = 7;
  std::string fastrun;
  Nodes nodes;
  // A rank of the timed jobs: at once, so that the floor measures exec and not flag parsing.
  if (argc == 3 && std::strcmp(argv[1], "--as-rank") == 0) return as_rank(argv[2]);
  CLI::App app("job start-up vs fork/exec floor, and failure-to-exit time", "fastrun-bench launch");
  flags::integer_list(app, "--ranks", ranks, "rank counts to time, comma-separated", 1, 4096);
  flags::integer(app, "--reps", reps, "repetitions per rank count; the median is shown", 1, 10000);
  app.add_option("--fastrun", fastrun, "the launcher to time (default: the fastrun next to this binary)")
      ->type_name("PATH");
  add_node_flags(app, nodes, 2,
                 "instead: K launchers (--nnodes K) of --ranks ranks each, against one node (bench/on_hosts.sh)");
  flags::parse(app, argc, argv);
  const std::string exe = self_exe();
  fastrun = find_fastrun(fastrun, "launch");
  check_nodes(nodes, "launch");
  if (nodes.count > 0) {
    nodes_table(nodes, fastrun, exe, ranks, reps);
    return 0;
  }
  const std::string fail_file = fmt::format("/tmp/fastrun-bench-fail-{}", ::getpid());

  std::printf("fastrun-bench launch: medians of %d runs (ms); floor = fork+exec+reap of N bare copies of the rank "
              "binary\n",
              reps);
  std::printf("job = store barrier only (target 1.5 x floor + 5 ms); join = fastrun::join() + a world barrier "
              "(target 2 x floor); the runs of one row are interleaved\n");
  std::printf("%5s %10s %10s %8s %6s %10s %8s %6s %14s\n", "ranks", "floor", "job", "ratio", "ok", "join", "ratio",
              "ok", "fail->exit");
  for (int n : ranks) {
    std::vector<double> f, j, jn, x;
    floor_ms(exe, n);  // warm the page cache
    for (int r = 0; r < reps; ++r) {
      f.push_back(floor_ms(exe, n));
      j.push_back(job_ms(fastrun, exe, n));
      jn.push_back(job_ms(fastrun, exe, n, "join"));
      x.push_back(fail_ms(fastrun, exe, n, fail_file));
    }
    const double fm = median(f), jm = median(j), jnm = median(jn), xm = median(x);
    std::printf("%5d %10.2f %10.2f %8.2f %6s %10.2f %8.2f %6s %14.2f\n", n, fm, jm, jm / fm,
                jm <= 1.5 * fm + 5.0 ? "yes" : "NO", jnm, jnm / fm, jnm <= 2 * fm ? "yes" : "NO", xm);
    std::fflush(stdout);
  }
  std::filesystem::remove(fail_file);
  return 0;
}

Registration reg{"launch", "job start-up vs fork/exec floor, and failure-to-exit time", &run_launch};

}  // namespace
}  // namespace fastrun::bench
