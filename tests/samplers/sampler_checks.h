#pragma once
// Helpers for the sampler tests: the share rule written out independently of the library.
#include <cstdint>
#include <vector>

namespace sampler_checks {

// Samples per rank from positions [start, n) with R ranks.
inline std::uint64_t share_size(std::uint64_t n, std::uint64_t start, std::uint64_t R, bool pad) {
  if (start >= n) return 0;
  return pad ? (n - start + R - 1) / R : (n - start) / R;
}

// The indices rank r must yield: order[(start + r + j*R) mod n].
inline std::vector<std::uint64_t> expected_share(const std::vector<std::uint64_t>& order, std::uint64_t start,
                                                 std::uint64_t R, std::uint64_t r, bool pad) {
  const std::uint64_t n = order.size();
  std::vector<std::uint64_t> out;
  for (std::uint64_t j = 0; j < share_size(n, start, R, pad); ++j) out.push_back(order[(start + r + j * R) % n]);
  return out;
}

}  // namespace sampler_checks
