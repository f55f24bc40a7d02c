#pragma once
// fastrun's own random numbers, identical on every platform, compiler and standard library
// (std::shuffle and std::uniform_int_distribution are not: their results are unspecified).
//
//   mix64(x)        the SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijection on 2^64.
//   stream_seed(s,e) = mix64(mix64(s) + e): one independent stream per (seed, epoch).
//   SplitMix64      state += 0x9E3779B97F4A7C15; return mix64(state).
//   bounded(s)      uniform in [0, s): Lemire's multiply-shift with rejection (unbiased):
//                   m = next() * s (128 bit); if low64(m) < (2^64 - s) mod s, draw again;
//                   return high64(m).
//   fisher_yates    for i = n-1 down to 1: j = bounded(i + 1); swap(a[i], a[j]).
// Golden sequences in tests/samplers/test_rng.cpp pin all of these.
#include <cstddef>
#include <cstdint>

namespace fastrun::samplers {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t epoch) {
  return mix64(mix64(seed) + epoch);
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    state_ += kGolden;
    return mix64(state_);
  }
  // Uniform in [0, s); s must be > 0.
  std::uint64_t bounded(std::uint64_t s) {
    __extension__ using u128 = unsigned __int128;
    u128 m = static_cast<u128>(next()) * s;
    auto low = static_cast<std::uint64_t>(m);
    if (low < s) {
      const std::uint64_t threshold = (0 - s) % s;
      while (low < threshold) {
        m = static_cast<u128>(next()) * s;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  std::uint64_t state_;
};

// In-place Fisher–Yates shuffle (the definition above). Large arrays prefetch a[j] a few
// steps ahead; the draws and the result are exactly those of the plain loop.
void fisher_yates(std::uint32_t* a, std::size_t n, SplitMix64& rng);
void fisher_yates(std::uint64_t* a, std::size_t n, SplitMix64& rng);

}  // namespace fastrun::samplers
