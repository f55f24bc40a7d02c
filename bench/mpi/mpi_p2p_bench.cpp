// fastrun-bench-mpi: the Open MPI side of `fastrun-bench p2p` (run by it through mpirun, when
// MPI was found at configure time). Prints "<op> <bytes> <seconds>" lines on rank 0 for the
// sizes and with the timing rule of p2p_sizes.h.
//   mpirun -np N fastrun-bench-mpi OP MAX_BYTES [--fresh]
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "mpi_flags.h"
#include "p2p_sizes.h"

namespace {

double time_op(std::size_t iters, const std::function<void()>& op) {
  for (int w = 0; w < 3; ++w) op();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (std::size_t i = 0; i < iters; ++i) op();
    best = std::min(best, (MPI_Wtime() - t0) / static_cast<double>(iters));
  }
  double worst = 0;  // the slowest rank's figure, as fastrun's side reports
  MPI_Allreduce(&best, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

// The input of the next op, written whole with a value that changes from op to op (the fastrun
// side's fresh_input, p2p_bench.cpp): what a program sends is new each time.
void write_input(std::vector<char>& input) {
  static char round = 0;
  std::fill(input.begin(), input.end(), ++round);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::string op = "pingpong";
  std::int64_t max_bytes = 64 << 20;  // signed, with a range: CLI11 would wrap "-5" into an unsigned count
  CLI::App app("Open MPI's side of fastrun-bench p2p", "fastrun-bench-mpi");
  app.add_option("OP", op, "the exchange")->check(CLI::IsMember(std::vector<std::string>(std::begin(fastrun::bench::p2p::kOps), std::end(fastrun::bench::p2p::kOps))))->capture_default_str();
  app.add_option("MAX_BYTES", max_bytes, "largest message")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->capture_default_str();
  bool fresh = false;
  app.add_flag("--fresh", fresh, "every rank writes its input before each op (fastrun-bench p2p --fresh)");
  if (int code = 0; !fastrun::bench::mpi::parse_args(app, argc, argv, rank, code)) return code;
  const auto max = static_cast<std::size_t>(max_bytes);
  const auto N = static_cast<std::size_t>(n);
  for (std::size_t bytes : fastrun::bench::p2p::sizes(max)) {
    double secs = 0;
    const std::size_t iters = fastrun::bench::p2p::iters_for(bytes);
    if (op == "pingpong") {
      std::vector<char> buf(bytes, 1);
      const int count = static_cast<int>(bytes);
      secs = time_op(iters, [&] {
               if (rank == 0) {
                 MPI_Send(buf.data(), count, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                 MPI_Recv(buf.data(), count, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
               } else if (rank == 1) {
                 MPI_Recv(buf.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                 MPI_Send(buf.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
               }
             }) / 2;
    } else if (op == "alltoall") {
      const std::size_t block = std::max<std::size_t>(1, bytes / N);
      std::vector<char> in(block * N, 1), out(block * N);
      secs = time_op(iters, [&] {
        if (fresh) write_input(in);
        MPI_Alltoall(in.data(), static_cast<int>(block), MPI_BYTE, out.data(), static_cast<int>(block), MPI_BYTE,
                     MPI_COMM_WORLD);
      });
    } else if (op == "alltoallv") {
      const std::size_t block = std::max<std::size_t>(1, bytes / N);
      std::vector<char> in(block * N, 1), out(block * N);
      std::vector<int> counts(N, static_cast<int>(block)), displs(N);
      for (std::size_t r = 0; r < N; ++r) displs[r] = static_cast<int>(r * block);
      secs = time_op(iters, [&] {
        if (fresh) write_input(in);
        MPI_Alltoallv(in.data(), counts.data(), displs.data(), MPI_BYTE, out.data(), counts.data(), displs.data(),
                      MPI_BYTE, MPI_COMM_WORLD);
      });
    } else if (op == "gather" || op == "scatter") {
      const std::size_t block = std::max<std::size_t>(1, bytes / N);
      std::vector<char> whole(block * N, 1), mine(block, 1);
      const int c = static_cast<int>(block);
      // The exchange is chosen before the clock starts, as fastrun-bench p2p does.
      std::function<void()> exchange;
      if (op == "gather")
        exchange = [&] {
          if (fresh) write_input(mine);
          MPI_Gather(mine.data(), c, MPI_BYTE, whole.data(), c, MPI_BYTE, 0, MPI_COMM_WORLD);
        };
      else
        exchange = [&] {
          if (fresh) write_input(whole);
          MPI_Scatter(whole.data(), c, MPI_BYTE, mine.data(), c, MPI_BYTE, 0, MPI_COMM_WORLD);
        };
      secs = time_op(iters, exchange);
    }
    if (rank == 0) std::printf("%s %zu %.9g\n", op.c_str(), bytes, secs);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
