// fastrun-bench p2p: point-to-point latency and bandwidth between two ranks, all-to-all busbw,
// gather and scatter, on N ranks forked by the bench (shm or gloo), each row next to Open MPI's
// figure for the same op and size measured in the same run (fastrun-bench-mpi through mpirun,
// when both were found) and the ratio fastrun / MPI of the times (below 1: fastrun is faster).
//   fastrun-bench p2p [--nproc N] [--backend shm|gloo] [--op pingpong|alltoall|alltoallv|gather|scatter|all]
//                     [--max BYTES] [--no-mpi] [--pin]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_registry.h"
#include "fastrun/tools/flags/number_flags.h"
#include "forked_group.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "p2p_sizes.h"

namespace fastrun::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Figures = std::map<std::string, std::map<std::size_t, double>>;  // op -> bytes -> seconds

struct Args {
  int nproc = 2;
  std::string backend = "shm";
  std::string op = "all";
  std::size_t max_bytes = 64u << 20;
  bool mpi = true;
  bool pin = false;  // rank r on the r-th usable CPU, as mpirun binds its ranks (2 ranks: to cores)
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("send/recv latency and bandwidth, all-to-all, gather, scatter", "fastrun-bench p2p");
  flags::integer(app, "--nproc", a.nproc, "ranks to fork (pingpong always uses ranks 0 and 1)", 2, 1024);
  app.add_option("--backend", a.backend, "shm or gloo")->capture_default_str();
  std::vector<std::string> ops{"all"};
  ops.insert(ops.end(), std::begin(p2p::kOps), std::end(p2p::kOps));
  flags::choice(app, "--op", a.op, "which exchange", ops);
  flags::integer(app, "--max", a.max_bytes, "largest message, bytes", 1, std::int64_t{1} << 40);
  app.add_flag_callback("--no-mpi", [&a] { a.mpi = false; }, "skip the Open MPI column");
  app.add_flag("--pin", a.pin, "pin rank r to the r-th usable CPU (mpirun binds its ranks to cores)");
  flags::parse(app, argc, argv);
  return a;
}

std::vector<std::string> ops_of(const Args& a) {
  std::vector<std::string> ops;
  for (const char* op : p2p::kOps)
    if (a.op == "all" || a.op == op) ops.push_back(op);
  return ops;
}

// Open MPI's figures, through mpirun and fastrun-bench-mpi (next to this program), shared memory
// only (btl self,vader, as on one node). Empty when either is missing or the run fails.
Figures mpi_figures(const Args& a, const std::string& op) {
  Figures f;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto program = self.parent_path() / "fastrun-bench-mpi";
  if (ec || !std::filesystem::exists(program)) return f;
  const int np = op == "pingpong" ? 2 : a.nproc;
  const std::string cmd = fmt::format(
      "mpirun --allow-run-as-root --oversubscribe -np {} --mca btl self,vader '{}' {} {} 2>/dev/null", np,
      program.string(), op, a.max_bytes);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return f;
  char name[64];
  std::size_t bytes = 0;
  double secs = 0;
  while (std::fscanf(pipe, "%63s %zu %lf", name, &bytes, &secs) == 3) f[name][bytes] = secs;
  ::pclose(pipe);
  return f;
}

double time_op(Backend& g, std::size_t iters, const std::function<void()>& op) {
  for (int w = 0; w < 3; ++w) op();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    g.barrier()->wait();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iters; ++i) op();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters));
  }
  g.all_reduce(BufferView{&best, 1, DType::float64, DeviceKind::cpu}, {ReduceOp::max})->wait();
  return best;
}

void run_rank(const Args& a, int rank, const std::string& address, const std::string& run_id, const Figures& mpi) {
  if (a.pin) pin_to_cpu(rank);
  auto g = forked_group(a.backend, rank, a.nproc, address, run_id);
  const auto N = static_cast<std::size_t>(a.nproc);
  const double n = a.nproc;
  auto say = [&](const std::string& s) {
    if (rank == 0) std::fputs(s.c_str(), stdout), std::fflush(stdout);
  };
  for (const std::string& op : ops_of(a)) {
    const bool pingpong = op == "pingpong";
    const int ranks = pingpong ? 2 : a.nproc;
    const double bus = pingpong ? 1.0 : (n - 1) / n;
    say(fmt::format("\n{} ({} ranks, backend {}; {}){}\n{:>10} {:>11} {:>10} {:>10} {:>11} {:>10} {:>9}\n", op, ranks,
                    a.backend, pingpong ? "time = one way, half the round trip" : "busbw = algbw x (n-1)/n",
                    mpi.count(op) ? "" : "  [no Open MPI figures: mpirun or fastrun-bench-mpi missing]", "bytes",
                    "time_us", "busbw_GB/s", "", "mpi_us", "mpi_GB/s", "time/mpi"));
    for (std::size_t bytes : p2p::sizes(a.max_bytes)) {
      const std::size_t iters = p2p::iters_for(bytes);
      double secs = 0;
      if (pingpong) {
        std::vector<char> buf(bytes, 1);
        const BufferView v{buf.data(), bytes / 4, DType::int32};  // every size is a multiple of 4
        secs = time_op(*g, iters, [&] {
                 if (rank == 0) {
                   g->send(v, 1)->wait();
                   g->recv(v, 1)->wait();
                 } else if (rank == 1) {
                   g->recv(v, 0)->wait();
                   g->send(v, 0)->wait();
                 }
               }) / 2;
      } else {
        const std::size_t block = std::max<std::size_t>(4, bytes / N) / 4;  // int32 elements per rank
        std::vector<std::int32_t> whole(block * N, 1), mine(block, 1), out(block * N);
        auto w = view_of(whole.data(), whole.size()), m = view_of(mine.data(), mine.size()),
             o = view_of(out.data(), out.size());
        const std::vector<std::size_t> counts(N, block);
        // The exchange is chosen before the clock starts: the timed loop holds the op alone.
        std::function<void()> exchange;
        if (op == "alltoall") exchange = [&] { g->all_to_all(w, o)->wait(); };
        else if (op == "alltoallv") exchange = [&] { g->all_to_allv(w, counts, o, counts)->wait(); };
        else if (op == "gather") exchange = [&] { g->gather(m, o, {0})->wait(); };
        else exchange = [&] { g->scatter(w, m, {0})->wait(); };
        secs = time_op(*g, iters, exchange);
      }
      const double gbs = static_cast<double>(bytes) / secs / 1e9 * bus;
      std::string mpi_cols = fmt::format("{:>11} {:>10} {:>9}", "-", "-", "-");
      if (auto it = mpi.find(op); it != mpi.end())
        if (auto jt = it->second.find(bytes); jt != it->second.end())
          mpi_cols = fmt::format("{:>11.2f} {:>10.2f} {:>9.2f}", jt->second * 1e6,
                                 static_cast<double>(bytes) / jt->second / 1e9 * bus, secs / jt->second);
      say(fmt::format("{:>10} {:>11.2f} {:>10.2f} {:>10} {}\n", bytes, secs * 1e6, gbs, "", mpi_cols));
    }
  }
  g->barrier()->wait();
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!backend::available(a.backend)) throw ConfigError(fmt::format("backend '{}' is not built", a.backend));
  Figures mpi;
  if (a.mpi)
    for (const std::string& op : ops_of(a))
      for (auto& [name, rows] : mpi_figures(a, op)) mpi[name] = rows;
  return run_forked_ranks(a.nproc, "benchp2p", [&](int r, const std::string& address, const std::string& run_id) {
    run_rank(a, r, address, run_id, mpi);
  });
}

const Registration reg{"p2p",
                       "send/recv latency and bandwidth, all-to-all, gather, scatter; with Open MPI's figures (--nproc N)",
                       &run};

}  // namespace
}  // namespace fastrun::bench
