// fastrun-bench p2p: point-to-point latency and bandwidth between two ranks, all-to-all busbw,
// gather and scatter, on N ranks forked by the bench (shm or gloo). Each row shows fastrun's time,
// the bare exchange's time for the same bytes measured by the same ranks run by run in between
// (bare_exchange.h) and the ratio, and Open MPI's figure for the same op and size, measured just
// before (fastrun-bench-mpi through mpirun, when both were found), with the ratio fastrun / MPI
// of the times (below 1: fastrun is faster).
//   fastrun-bench p2p [--nproc N] [--backend shm|gloo] [--op pingpong|alltoall|alltoallv|gather|scatter|all]
//                     [--max BYTES] [--no-mpi] [--pin] [--fresh] [--group]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bare_exchange.h"
#include "bench_registry.h"
#include "fastrun/tools/flags/number_flags.h"
#include "forked_group.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/group.h"
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
  bool fresh = false;  // every rank writes its input before each op (fresh_input)
  bool group = false;  // the ops through a Group over the backend, as a program's join() gives them
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("send/recv latency and bandwidth, all-to-all, gather, scatter", "fastrun-bench p2p");
  flags::integer(app, "--nproc", a.nproc,
                 "ranks to fork (pingpong: ranks 0 and 1 exchange, the others wait, in both columns)", 2, 1024);
  app.add_option("--backend", a.backend, "shm or gloo")->capture_default_str();
  std::vector<std::string> ops{"all"};
  ops.insert(ops.end(), std::begin(p2p::kOps), std::end(p2p::kOps));
  flags::choice(app, "--op", a.op, "which exchange", ops);
  flags::integer(app, "--max", a.max_bytes, "largest message, bytes", 1, std::int64_t{1} << 40);
  app.add_flag_callback("--no-mpi", [&a] { a.mpi = false; }, "skip the Open MPI column");
  app.add_flag("--pin", a.pin, "pin rank r to the r-th usable CPU (mpirun binds its ranks to cores)");
  app.add_flag("--fresh", a.fresh,
               "every rank writes its input before each op, as a program sends new data each time (all-to-alls, "
               "gather, scatter; a ping-pong sends what it just received anyway); without it the input never "
               "changes, as in the OSU benchmarks");
  app.add_flag("--group", a.group,
               "call the ops on a Group over the backend, as a program calls join()'s groups (op numbers, flight "
               "record), instead of on the backend directly, as Open MPI's column calls MPI");
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
  // As many ranks as fastrun's column: a ping-pong's other ranks wait in the next barrier on
  // both sides (on 2 cores, 4 ranks of which 2 idle is not 2 ranks).
  const int np = a.nproc;
  const std::string cmd = fmt::format(
      "mpirun --allow-run-as-root --oversubscribe -np {} --mca btl self,vader '{}' {} {}{} 2>/dev/null", np,
      program.string(), op, a.max_bytes, a.fresh ? " --fresh" : "");
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return f;
  char name[64];
  std::size_t bytes = 0;
  double secs = 0;
  while (std::fscanf(pipe, "%63s %zu %lf", name, &bytes, &secs) == 3) f[name][bytes] = secs;
  ::pclose(pipe);
  return f;
}

// Seconds per op, the slowest rank's: fastrun's, and the bare exchange's of the same bytes
// (bare_exchange.h; 0 where the row is too large for its mapping).
struct Times {
  double op = 0;
  double bare = 0;
};

// The best of 3 timed runs of `iters` ops after 3 warm-up ones (p2p_sizes.h), for the op and,
// run by run in between, for `bare` when given: both see the same minutes of the machine.
Times time_op(Backend& g, std::size_t iters, const std::function<void()>& op, const std::function<void()>& bare) {
  auto timed = [&](const std::function<void()>& f) {
    g.barrier()->wait();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iters; ++i) f();
    return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters);
  };
  for (int w = 0; w < 3; ++w) {
    op();
    if (bare) bare();
  }
  double best[2] = {1e30, bare ? 1e30 : 0};
  for (int rep = 0; rep < 3; ++rep) {
    best[0] = std::min(best[0], timed(op));
    if (bare) best[1] = std::min(best[1], timed(bare));
  }
  g.all_reduce(BufferView{best, 2, DType::float64, DeviceKind::cpu}, {ReduceOp::max})->wait();
  return {best[0], best[1]};
}

// The bare exchange of a row (bare_exchange.h): the blocks rank `rank` sends and receives in
// the row's op, with the same buffers; empty when the row does not fit the mapping.
std::function<void()> bare_of(BareExchange& bare, const std::string& op, int rank, int nproc, std::size_t block_bytes,
                              std::byte* whole, std::byte* mine, std::byte* out) {
  if (!bare.fits(block_bytes)) return {};
  using Block = BareExchange::Block;
  std::vector<Block> sends, recvs;
  BareExchange::Local local;
  bool recv_first = false;
  if (op == "pingpong") {
    if (rank > 1) return [] {};
    sends.push_back({1 - rank, whole, block_bytes});
    recvs.push_back({1 - rank, whole, block_bytes});
    recv_first = rank == 1;
  } else {
    const auto at = [block_bytes](std::byte* b, int r) { return b + static_cast<std::size_t>(r) * block_bytes; };
    for (int p = 0; p < nproc; ++p) {
      if (p == rank) continue;
      if (op == "alltoall" || op == "alltoallv") {
        sends.push_back({p, at(whole, p), block_bytes});
        recvs.push_back({p, at(out, p), block_bytes});
      } else if (rank == 0) {  // the root of a gather or scatter
        if (op == "gather") recvs.push_back({p, at(out, p), block_bytes});
        else sends.push_back({p, at(whole, p), block_bytes});
      }
    }
    if (rank != 0 && op == "gather") sends.push_back({0, mine, block_bytes});
    if (rank != 0 && op == "scatter") recvs.push_back({0, mine, block_bytes});
    if (op == "alltoall" || op == "alltoallv") local = {at(out, rank), at(whole, rank), block_bytes};
    else if (rank == 0 && op == "gather") local = {out, mine, block_bytes};
    else if (rank == 0) local = {mine, whole, block_bytes};  // scatter
  }
  return [&bare, rank, block_bytes, recv_first, sends = std::move(sends), recvs = std::move(recvs), local] {
    bare.run(rank, sends, recvs, local, block_bytes, recv_first);
  };
}

// The bare exchange of a row delivers what fastrun's op does: inputs that differ by rank and
// element, both outputs compared (`mine` is scatter's output). Throws where they differ, so that
// a column that moves the wrong blocks (or none) cannot pass for a figure.
void check_bare(const std::string& op, int rank, const std::function<void()>& exchange,
                const std::function<void()>& bare, std::vector<std::int32_t>& whole, std::vector<std::int32_t>& mine,
                std::vector<std::int32_t>& out) {
  auto fill = [&] {
    for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = rank * 1000003 + static_cast<std::int32_t>(i);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = -(rank * 1000003 + static_cast<std::int32_t>(i)) - 1;
    std::fill(out.begin(), out.end(), 0);
  };
  fill();
  exchange();
  const auto want_out = out;
  const auto want_mine = mine;
  fill();
  bare();
  if (out != want_out || mine != want_mine)
    throw Error(
        fmt::format("fastrun-bench p2p: the bare {} of rank {} delivered other bytes than fastrun's", op, rank));
  std::fill(whole.begin(), whole.end(), 1);
  std::fill(mine.begin(), mine.end(), 1);
}

// `op` after a write of the whole of `input` (a value that changes from op to op): the data a
// program sends is new each time, so its lines sit modified in the sender's cache, where an
// unchanged input stays in the receiver's cache after the first op and never crosses between
// cores again for a protocol that reads it in place (docs/benchmarks.md, "The bare column").
// The write is part of the time, on both sides.
std::function<void()> fresh_input(std::span<std::int32_t> input, std::function<void()> op) {
  return [input, op = std::move(op), round = 0]() mutable {
    std::fill(input.begin(), input.end(), ++round);
    op();
  };
}

// Rank `rank`'s part of op `op`'s table.
void run_rank(const Args& a, int rank, const std::string& address, const std::string& run_id, const std::string& op,
              const Figures& mpi, BareExchange& bare) {
  if (a.pin) pin_to_cpu(rank);
  std::unique_ptr<Backend> g = forked_group(a.backend, rank, a.nproc, address, run_id);
  if (a.group) g = std::make_unique<Group>(std::shared_ptr<Backend>(std::move(g)), std::vector<int>{}, Group::CpuFactory{},
                                           GroupPolicy{.name = "world", .job_store = nullptr});
  const auto N = static_cast<std::size_t>(a.nproc);
  const double n = a.nproc;
  auto say = [&](const std::string& s) {
    if (rank == 0) std::fputs(s.c_str(), stdout), std::fflush(stdout);
  };
  const bool pingpong = op == "pingpong";
  const std::string ranks =
      pingpong && a.nproc > 2 ? fmt::format("ranks 0 and 1 of {}", a.nproc) : fmt::format("{} ranks", a.nproc);
  const double bus = pingpong ? 1.0 : (n - 1) / n;
  say(fmt::format("\n{} ({}, backend {}{}; {}){}\n{:>10} {:>11} {:>10} {:>10} {:>9} {:>11} {:>10} {:>9}\n", op,
                  ranks, a.backend, a.group ? " under a Group" : "",
                  pingpong ? "time = one way, half the round trip" : "busbw = algbw x (n-1)/n",
                  mpi.count(op) ? "" : "  [no Open MPI figures: mpirun or fastrun-bench-mpi missing]", "bytes",
                  "time_us", "busbw_GB/s", "bare_us", "time/bare", "mpi_us", "mpi_GB/s", "time/mpi"));
  for (std::size_t bytes : p2p::sizes(a.max_bytes)) {
    const std::size_t iters = p2p::iters_for(bytes);
    // A row's bare exchange starts from 0 on every rank (bare_exchange.h: between two barriers).
    g->barrier()->wait();
    bare.reset(rank);
    g->barrier()->wait();
    Times t;
    if (pingpong) {
      std::vector<char> buf(bytes, 1);
      const BufferView v{buf.data(), bytes / 4, DType::int32};  // every size is a multiple of 4
      auto* b = reinterpret_cast<std::byte*>(buf.data());
      t = time_op(*g, iters,
                  [&] {
                    if (rank == 0) {
                      g->send(v, 1)->wait();
                      g->recv(v, 1)->wait();
                    } else if (rank == 1) {
                      g->recv(v, 0)->wait();
                      g->send(v, 0)->wait();
                    }
                  },
                  bare_of(bare, op, rank, a.nproc, bytes, b, b, b));
      t.op /= 2;
      t.bare /= 2;
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
      auto bytes_of = [](std::vector<std::int32_t>& v) { return reinterpret_cast<std::byte*>(v.data()); };
      auto bare_op = bare_of(bare, op, rank, a.nproc, block * 4, bytes_of(whole), bytes_of(mine), bytes_of(out));
      if (bare_op) check_bare(op, rank, exchange, bare_op, whole, mine, out);
      if (a.fresh) {
        const std::span<std::int32_t> input = op == "gather" ? std::span(mine) : std::span(whole);
        exchange = fresh_input(input, std::move(exchange));
        if (bare_op) bare_op = fresh_input(input, std::move(bare_op));
      }
      t = time_op(*g, iters, exchange, bare_op);
    }
    const double gbs = static_cast<double>(bytes) / t.op / 1e9 * bus;
    // Times in µs to the nanosecond: a small message's one-way time is 0.1-0.2 µs here, and a
    // change of a few percent would not show in a second decimal.
    const std::string bare_cols = t.bare > 0 ? fmt::format("{:>10.3f} {:>9.2f}", t.bare * 1e6, t.op / t.bare)
                                             : fmt::format("{:>10} {:>9}", "-", "-");
    std::string mpi_cols = fmt::format("{:>11} {:>10} {:>9}", "-", "-", "-");
    if (auto it = mpi.find(op); it != mpi.end())
      if (auto jt = it->second.find(bytes); jt != it->second.end())
        mpi_cols = fmt::format("{:>11.3f} {:>10.2f} {:>9.2f}", jt->second * 1e6,
                               static_cast<double>(bytes) / jt->second / 1e9 * bus, t.op / jt->second);
    say(fmt::format("{:>10} {:>11.3f} {:>10.2f} {} {}\n", bytes, t.op * 1e6, gbs, bare_cols, mpi_cols));
  }
  g->barrier()->wait();
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!backend::available(a.backend)) throw ConfigError(fmt::format("backend '{}' is not built", a.backend));
  // Mapped before the ranks fork, so that they share it; regions up to the largest row's blocks.
  BareExchange bare(a.nproc, a.max_bytes);
  // Op by op, Open MPI's run just before fastrun's ranks run the same op: the two columns are
  // seconds apart, not the whole sweep.
  int rc = 0;
  for (const std::string& op : ops_of(a)) {
    const Figures mpi = a.mpi ? mpi_figures(a, op) : Figures{};
    rc |= run_forked_ranks(a.nproc, "benchp2p", [&](int r, const std::string& address, const std::string& run_id) {
      run_rank(a, r, address, run_id, op, mpi, bare);
    });
    if (rc != 0) break;
  }
  return rc;
}

const Registration reg{"p2p",
                       "send/recv latency and bandwidth, all-to-all, gather, scatter; with Open MPI's figures (--nproc N)",
                       &run};

}  // namespace
}  // namespace fastrun::bench
