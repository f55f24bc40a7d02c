#pragma once
// What `fastrun-bench p2p` and its Open MPI twin (mpi/mpi_p2p_bench.cpp) both measure, so the
// two columns of a table come from the same sizes, repetitions and timing rule: the best of 3
// timed runs of `iters_for(bytes)` back-to-back operations, after 3 warm-up ones.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace fastrun::bench::p2p {

inline std::size_t iters_for(std::size_t bytes) {
  return std::clamp<std::size_t>((std::size_t{256} << 20) / std::max<std::size_t>(bytes, 1) / 8, 3, 20000);
}

// 8 B, then powers of 4 from 64 B up to `max`.
inline std::vector<std::size_t> sizes(std::size_t max) {
  std::vector<std::size_t> s{8};
  for (std::size_t b = 64; b <= max; b *= 4) s.push_back(b);
  return s;
}

// Operations, by the names both programs print: "pingpong" (time = half the round trip),
// "alltoall" (bytes = one rank's whole input), "alltoallv" (the same blocks through the
// per-rank-counts call: what its counts check costs), "gather" and "scatter" (bytes = the root's
// whole buffer; root 0).
inline const char* const kOps[] = {"pingpong", "alltoall", "alltoallv", "gather", "scatter"};

}  // namespace fastrun::bench::p2p
