#pragma once
// The two ways `fastrun-bench allreduce-mpi` times an all-reduce, shared with the Open MPI
// program (bench/mpi/mpi_allreduce_bench.cpp) so that both sides count the same calls:
//   back to back: `iterations_for` calls in a row, the slowest rank's mean per call (a DDP step);
//   single: barrier, then ONE timed call, `single_calls_for` times; the median over the calls
//   of the slowest rank's time (the OSU benchmarks' pattern: a metric all-reduce after other work).
// Both sides reduce in one buffer of the largest size, allocated once per rank (as OSU does),
// its first bytes refilled for each size: with a buffer allocated per size, fastrun's rows from
// 512 KiB ran at half speed in most runs on this project's VM (docs/benchmarks.md, "Single
// calls", the buffers).
// Header only, without fastrun's libraries: the MPI program includes it too.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace fastrun::bench::pattern {

// About 64 MiB of data per round, 3..2000 ops.
inline int iterations_for(std::size_t bytes) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / bytes, 3, 2000));
}

// 100 single calls as OSU times, fewer from 32 MiB so that a size moves at most about 2 GiB
// (256 MiB: 8 calls), at least 8.
inline int single_calls_for(std::size_t bytes) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{2} << 30) / bytes, 8, 100));
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace fastrun::bench::pattern
