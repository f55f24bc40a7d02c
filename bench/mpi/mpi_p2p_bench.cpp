// fastrun-bench-mpi: the Open MPI side of `fastrun-bench p2p` (run by it through mpirun, when
// MPI was found at configure time). Prints "<op> <bytes> <seconds>" lines on rank 0 for the
// sizes and with the timing rule of p2p_sizes.h.
//   mpirun -np N fastrun-bench-mpi OP MAX_BYTES
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::string op = argc > 1 ? argv[1] : "pingpong";
  const std::size_t max = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (64u << 20);
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
        MPI_Alltoall(in.data(), static_cast<int>(block), MPI_BYTE, out.data(), static_cast<int>(block), MPI_BYTE,
                     MPI_COMM_WORLD);
      });
    } else if (op == "gather" || op == "scatter") {
      const std::size_t block = std::max<std::size_t>(1, bytes / N);
      std::vector<char> whole(block * N, 1), mine(block, 1);
      const int c = static_cast<int>(block);
      secs = time_op(iters, [&] {
        if (op == "gather") MPI_Gather(mine.data(), c, MPI_BYTE, whole.data(), c, MPI_BYTE, 0, MPI_COMM_WORLD);
        else MPI_Scatter(whole.data(), c, MPI_BYTE, mine.data(), c, MPI_BYTE, 0, MPI_COMM_WORLD);
      });
    }
    if (rank == 0) std::printf("%s %zu %.9g\n", op.c_str(), bytes, secs);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
