#include "fastrun/samplers/sequential_sampler.h"

#include <algorithm>
#include <numeric>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

std::vector<std::uint64_t> sorted_by_length(const std::vector<std::uint64_t>& lengths) {
  std::vector<std::uint64_t> idx(lengths.size());
  std::iota(idx.begin(), idx.end(), std::uint64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::uint64_t a, std::uint64_t b) { return lengths[a] > lengths[b]; });
  return idx;
}

std::uint64_t lengths_hash(const std::vector<std::uint64_t>& lengths) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::uint64_t v : lengths) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

SequentialSampler::SequentialSampler(std::uint64_t n) : ReproducibleSampler(n) {
  if (n > (std::uint64_t{1} << 63))
    throw SamplerError("SequentialSampler: n = " + std::to_string(n) + " (accepted: n <= 2^63)");
}

SortedSampler::SortedSampler(std::vector<std::uint64_t> lengths)
    : ReproducibleSampler(lengths.size()), lengths_(std::move(lengths)), hash_(lengths_hash(lengths_)) {}

Order SortedSampler::build_order(std::uint64_t) const { return Order::table(sorted_by_length(lengths_)); }

void SortedSampler::write_fields(StateWriter& w) const { w.add_u64("lengths_hash", hash_); }

void SortedSampler::read_fields(const StateReader& r) {
  r.require_equal("lengths_hash", hash_, "the lengths must be the same as when the state was saved");
}

}  // namespace fastrun::samplers
