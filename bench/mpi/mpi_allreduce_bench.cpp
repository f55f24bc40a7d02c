// fastrun-mpi-allreduce MIN MAX [ROUNDS]: Open MPI's MPI_Allreduce (in place, float32, sum) at
// sizes MIN..MAX bytes (doubling), the counterpart `fastrun-bench allreduce-mpi` runs beside
// fastrun's shm all-reduce (docs/benchmarks.md, "All-reduce against Open MPI"). Built only when
// CMake finds MPI; nothing else depends on it.
//
// Prints one line per size on rank 0: "<bytes> <seconds per op>", the slowest rank's mean over
// the best of ROUNDS timed rounds, with the same iteration counts as fastrun-bench.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>

#include "mpi_flags.h"

namespace {

int iterations_for(std::size_t bytes) {
  // fastrun-bench allreduce-mpi uses the same rule: about 64 MiB of data per round, 3..2000 ops.
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / bytes, 3, 2000));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Signed, with ranges: CLI11 would wrap "-5" into an unsigned count.
  std::int64_t min_bytes = 0, max_bytes = 0;
  int rounds = 3;
  CLI::App app("Open MPI's MPI_Allreduce at sizes MIN..MAX bytes (doubling)", "fastrun-mpi-allreduce");
  app.add_option("MIN_BYTES", min_bytes, "smallest message")->required()->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 40));
  app.add_option("MAX_BYTES", max_bytes, "largest message")->required()->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 40));
  app.add_option("ROUNDS", rounds, "timed rounds; the best is shown")->check(CLI::Range(1, 1000))->capture_default_str();
  if (int code = 0; !fastrun::bench::mpi::parse_args(app, argc, argv, rank, code)) return code;
  for (auto bytes = static_cast<std::size_t>(min_bytes); bytes <= static_cast<std::size_t>(max_bytes); bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> buf(count, 1.0f + static_cast<float>(rank));
    const int iters = iterations_for(bytes);
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // warm-up
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i)
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      best = std::min(best, t);
    }
    if (rank == 0) {
      std::printf("%zu %.9f\n", bytes, best);
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
