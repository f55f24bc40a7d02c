// fastrun-bench allreduce|allgather|broadcast [--backend NAME] [--min 4K] [--max 256M]
//                                             [--iters N | --mpi-iters [--round-budget S]] [--rounds R]
//                                             [--spawn N]
// Collective bandwidth for any backend and rank count, nccl-tests style (docs/runtime.md, "Gloo figures"):
//   algbw = S / t;  busbw = algbw * factor, factor = 2(n-1)/n (allreduce), (n-1)/n (allgather,
//   S = the whole gathered buffer), 1 (broadcast).
// Run it under the launcher (`fastrun --nproc 2 fastrun-bench allreduce --backend gloo`) or
// let it fork its own ranks with --spawn N (a shm:// store hosted by the parent). Rank 0 prints
// one row per size (4 KiB ... 256 MiB, doubling), with this machine's memcpy bandwidth for the
// same size measured by the same process beside it. t is the slowest rank's mean time, the best
// of R rounds. --mpi-iters --rounds 3 times each size as fastrun-mpi-allreduce times Open MPI's
// (bench/mpi/: 64 MiB / size calls, 3..2000, best of 3 rounds), so that bench/allreduce_on_hosts.sh
// can put the two side by side. Until 2026-12-06 that script timed fastrun's 2..50 calls once
// against Open MPI's best of 3 rounds of up to 2,000; on this project's VM, whose speed moves
// from minute to minute, fastrun's times under that rule were 1.1-2x (one 4 KiB row 5x) those of
// the same build timed as Open MPI is (docs/benchmarks.md, "Timed as Open MPI is").
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allreduce_pattern.h"
#include "bench_registry.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/tools/flags/number_flags.h"

namespace fastrun::bench {
namespace {

struct Args {
  std::string op;
  std::string backend = "auto";
  std::size_t min = 4 << 10;
  std::size_t max = 256 << 20;
  int iters = 0;  // 0 = by size
  bool mpi_iters = false;  // by size as the Open MPI program counts, within round_budget
  // --mpi-iters: a round stops short of the Open MPI program's count where it would take longer
  // than this (gloo at 4 KiB: about 4 ms a call), so that a sweep of slow backends ends.
  double round_budget = 0.25;
  int rounds = 1;
  int spawn = 0;
};

std::string human(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

Args parse(int argc, char** argv) {
  Args a;
  a.op = argv[0];
  CLI::App app(a.op + " bandwidth, any backend", "fastrun-bench " + a.op);
  app.add_option("--backend", a.backend, "auto|gloo|shm|nccl: the backend (auto: what join() picks)")->capture_default_str();
  flags::byte_count(app, "--min", a.min, "smallest message, bytes with K/M/G suffix", 4, "4K");
  flags::byte_count(app, "--max", a.max, "largest message, doubling from --min", 4, "256M");
  auto* iters = flags::integer(app, "--iters", a.iters, "timed iterations per size (0: by size, 2..50)", 0, 1000000);
  auto* mpi_iters = app.add_flag("--mpi-iters", a.mpi_iters,
                                 "time as many calls per size as fastrun-mpi-allreduce (64 MiB / size, 3..2000), "
                                 "fewer where a round would pass --round-budget")
                         ->excludes(iters);
  flags::decimal(app, "--round-budget", a.round_budget,
                 "--mpi-iters: seconds a round may take before it stops short of the count (at least 3 calls)", 1e-6,
                 3600)
      ->needs(mpi_iters);
  flags::integer(app, "--rounds", a.rounds, "timed rounds per size; the row shows the best", 1, 1000);
  flags::integer(app, "--spawn", a.spawn, "start N ranks itself (0: run as one rank of a fastrun job)", 0, 1024);
  flags::parse(app, argc, argv);
  if (a.min < 4 || a.min > a.max) throw ConfigError(fmt::format("--min {} / --max {}: need 4 <= min <= max", a.min, a.max));
  return a;
}

// `per_call`: seconds one call took after the warm-up, the slowest rank's (--mpi-iters only).
int iterations_for(std::size_t bytes, const Args& a, double per_call) {
  if (a.iters > 0) return a.iters;
  if (a.mpi_iters) {
    const double fit = per_call > 0 ? a.round_budget / per_call : 1e9;
    return static_cast<int>(std::clamp<double>(fit, 3, pattern::iterations_for(bytes)));
  }
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{128} << 20) / bytes, 2, 50));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Mean seconds per memcpy of `bytes` (warm buffers).
double memcpy_seconds(std::size_t bytes, int iters) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::memcpy(b.data(), a.data(), bytes);
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    a[static_cast<std::size_t>(i) % bytes] = static_cast<char>(i);
    std::memcpy(b.data(), a.data(), bytes);
  }
  return (now_s() - t0) / iters;
}

int run_ranks_body(const Args& a) {
  auto ctx = join({a.backend});
  Group& g = ctx->world();
  const int n = g.size();
  const bool cuda = ctx->device() == DeviceKind::cuda && g.backend_name() == "nccl";
  if (cuda)
    throw ConfigError("this benchmark drives host buffers; for nccl use the GPU check script (it owns device buffers)");
  const double factor = a.op == "allreduce" ? 2.0 * (n - 1) / n : a.op == "allgather" ? double(n - 1) / n : 1.0;
  if (g.rank() == 0) {
    fmt::print("# fastrun-bench {}: backend {}, {} ranks, float32, host memory; t = slowest rank's mean{}\n", a.op,
               g.backend_name(), n, a.rounds > 1 ? fmt::format(", best of {} rounds", a.rounds) : "");
    fmt::print("# {:>9} {:>11} {:>6} {:>11} {:>11} {:>11} {:>12}\n", "size", "count", "iters", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)", "memcpy(GB/s)");
  }
  for (std::size_t bytes = a.min; bytes <= a.max; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    if (a.op == "allgather" && count % static_cast<std::size_t>(n) != 0) continue;
    std::vector<float> buf(count, 1.0f + static_cast<float>(g.rank()));
    std::vector<float> in(a.op == "allgather" ? count / static_cast<std::size_t>(n) : 0, 1.0f);
    auto once = [&] {
      if (a.op == "allreduce") g.all_reduce(view_of(buf.data(), count))->wait();
      else if (a.op == "broadcast") g.broadcast(view_of(buf.data(), count))->wait();
      else g.all_gather(view_of(in.data(), in.size()), view_of(buf.data(), count))->wait();
    };
    // The slowest rank's seconds per call over `calls` calls.
    auto timed = [&](int calls) {
      g.barrier()->wait();
      const double t0 = now_s();
      for (int i = 0; i < calls; ++i) once();
      double t = (now_s() - t0) / calls;
      g.all_reduce(BufferView{&t, 1, DType::float64, DeviceKind::cpu}, {ReduceOp::max})->wait();
      return t;
    };
    once();  // warm-up: connections, page faults
    const int iters = iterations_for(bytes, a, a.mpi_iters ? timed(1) : 0.0);
    double t = timed(iters);
    for (int r = 1; r < a.rounds; ++r) t = std::min(t, timed(iters));
    if (g.rank() == 0) {
      const double mc = static_cast<double>(bytes) / memcpy_seconds(bytes, std::max(iters, 3)) / 1e9;
      const double algbw = static_cast<double>(bytes) / t / 1e9;
      // Nanoseconds shown below 10 us, where a small op's cost is a fraction of a microsecond.
      fmt::print("{:>11} {:>11} {:>6} {:>11.{}f} {:>11.3f} {:>11.3f} {:>12.2f}\n", human(bytes), count, iters, t * 1e6,
                 t < 1e-5 ? 3 : 1,
                 algbw, algbw * factor, mc);
      std::fflush(stdout);
    }
  }
  g.barrier()->wait();
  return 0;
}

// --spawn N: this process hosts a shm:// store and forks N ranks that run the body.
int spawn(const Args& a) {
  auto hosted = host_store(fmt::format("shm://fastrun-bench-{}", getpid()));
  std::vector<pid_t> pids;
  for (int r = 0; r < a.spawn; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw_errno("fastrun-bench: fork", errno);
    if (pid == 0) {
      setenv("FASTRUN_RANK", std::to_string(r).c_str(), 1);
      setenv("FASTRUN_WORLD_SIZE", std::to_string(a.spawn).c_str(), 1);
      setenv("FASTRUN_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("FASTRUN_LOCAL_WORLD_SIZE", std::to_string(a.spawn).c_str(), 1);
      setenv("FASTRUN_STORE", hosted->address().c_str(), 1);
      int code = 1;
      try {
        code = run_ranks_body(a);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fastrun-bench %s rank %d: %s\n", a.op.c_str(), r, e.what());
      }
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, code);
  }
  return worst;
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  // Under a launcher the environment already says who we are: --spawn is ignored.
  if (a.spawn > 0 && !env::raw(env::kRank)) return spawn(a);
  return run_ranks_body(a);
}

const Registration reg_allreduce{"allreduce", "all-reduce bandwidth, any backend (--backend NAME, --spawn N)", &run};
const Registration reg_allgather{"allgather", "all-gather bandwidth, any backend (--backend NAME, --spawn N)", &run};
const Registration reg_broadcast{"broadcast", "broadcast bandwidth, any backend (--backend NAME, --spawn N)", &run};

}  // namespace
}  // namespace fastrun::bench
