// fastrun-mpi-allreduce MIN MAX [ROUNDS] [PATTERN]: Open MPI's MPI_Allreduce (in place, float32,
// sum) at sizes MIN..MAX bytes (doubling), the counterpart `fastrun-bench allreduce-mpi` runs
// beside fastrun's shm all-reduce (docs/benchmarks.md, "All-reduce against Open MPI"). Built only
// when CMake finds MPI; nothing else depends on it.
//
// Prints lines on rank 0, per size and pattern (PATTERN: back-to-back, single or both, the
// default), with the same rules as fastrun-bench (allreduce_pattern.h):
//   "b2b <bytes> <seconds per op>": calls back to back, the slowest rank's mean, best of ROUNDS;
//   "single <bytes> <seconds>": barrier, then one timed call, the slowest rank's time, median
//   of the calls (the OSU pattern).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "../allreduce_pattern.h"
#include "mpi_flags.h"

namespace {

using fastrun::bench::pattern::iterations_for;
using fastrun::bench::pattern::median;
using fastrun::bench::pattern::single_calls_for;

void all_reduce(float* data, std::size_t count) {
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// Back to back: the slowest rank's mean per op, best of `rounds`.
double back_to_back(std::span<float> buf, int rounds) {
  const int iters = iterations_for(buf.size() * sizeof(float));
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) all_reduce(buf.data(), buf.size());
    double t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, t);
  }
  return best;
}

// The OSU pattern: barrier, one timed call; the median over calls of the slowest rank's time.
double single(std::span<float> buf) {
  std::vector<double> t(static_cast<std::size_t>(single_calls_for(buf.size() * sizeof(float))));
  for (double& ti : t) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    all_reduce(buf.data(), buf.size());
    ti = MPI_Wtime() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return median(t);
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
  app.add_option("MIN_BYTES", min_bytes, "smallest message")
      ->required()
      ->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 40));
  app.add_option("MAX_BYTES", max_bytes, "largest message")
      ->required()
      ->check(CLI::Range(std::int64_t{4}, std::int64_t{1} << 40));
  app.add_option("ROUNDS", rounds, "timed rounds; the best is shown")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  std::string pattern = "both";
  app.add_option("PATTERN", pattern, "back-to-back, single (barrier, one timed call) or both")
      ->check(CLI::IsMember({"back-to-back", "single", "both"}))
      ->capture_default_str();
  if (int code = 0; !fastrun::bench::mpi::parse_args(app, argc, argv, rank, code)) return code;
  // One buffer for every size, as the OSU benchmarks allocate theirs (allreduce_pattern.h).
  std::vector<float> whole(static_cast<std::size_t>(max_bytes) / sizeof(float));
  for (auto bytes = static_cast<std::size_t>(min_bytes); bytes <= static_cast<std::size_t>(max_bytes); bytes *= 2) {
    const std::span<float> buf(whole.data(), bytes / sizeof(float));
    std::fill(buf.begin(), buf.end(), 1.0f + static_cast<float>(rank));
    all_reduce(buf.data(), buf.size());  // warm-up
    if (pattern != "single") {
      const double t = back_to_back(buf, rounds);
      if (rank == 0) std::printf("b2b %zu %.9f\n", bytes, t);
    }
    if (pattern != "back-to-back") {
      const double t = single(buf);
      if (rank == 0) std::printf("single %zu %.9f\n", bytes, t);
    }
    if (rank == 0) std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
