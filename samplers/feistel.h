#pragma once
// A seeded bijection on [0, n) for n up to 2^63, in constant memory: the lazy shuffled order.
//
// Definition (a balanced Feistel network over Z_m x Z_m, pinned by golden values in the tests):
//   m = ceil(sqrt(n)) (1 for n <= 1), so n <= m^2 < n + 2 sqrt(n) + 1 and m < 2^32.
//   A position x in [0, m^2) is the pair (a, b) = (x div m, x mod m).
//   keys k_i = mix64(stream_seed(seed, epoch) + (i + 1) * kGolden), i = 0..kRounds-1.
//   F_i(b) = ((((b XOR k_i) * kGolden mod 2^64) >> 32) * m) >> 32, a value in [0, m)
//            (the top half of one product, scaled to [0, m) by Lemire's multiply-shift);
//   round i: (a, b) -> (b, (a + F_i(b)) mod m)  (a bijection: a = (new b - F_i(b)) mod m);
//   perm(x) = rounds 0..kRounds-1 in turn, read back as a * m + b.
//   order(p) = perm applied to p, and again while the value is >= n ("cycle walking"); since
//   m^2 - n < 2 sqrt(n) + 1, a walk is needed for fewer than 2/sqrt(n) of the positions.
// No division on the hot path: consecutive positions of a share are stepped as pairs.
#include <cstddef>
#include <cstdint>

#include "fastrun/samplers/rng.h"

namespace fastrun::samplers {

class FeistelPermutation {
 public:
  static constexpr int kRounds = 6;

  FeistelPermutation() = default;
  FeistelPermutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch);

  std::uint64_t size() const { return n_; }
  std::uint64_t side() const { return m_; }  // m

  // The image of position p (p < n).
  std::uint64_t operator()(std::uint64_t p) const { return walk(p / m_, p % m_); }

  // out[i] = (*this)((first + i * stride) mod n) for i < count (n > 0).
  void gather(std::uint64_t first, std::uint64_t stride, std::uint64_t* out, std::size_t count) const;

 private:
  void rounds(std::uint64_t& a, std::uint64_t& b) const {
    for (int i = 0; i < kRounds; ++i) {
      const std::uint64_t f = ((((b ^ keys_[i]) * kGolden) >> 32) * m_) >> 32;
      std::uint64_t t = a + f;
      t = t >= m_ ? t - m_ : t;
      a = b;
      b = t;
    }
  }
  std::uint64_t walk(std::uint64_t a, std::uint64_t b) const {
    for (;;) {
      rounds(a, b);
      const std::uint64_t v = a * m_ + b;
      if (v < n_) return v;
    }
  }

  std::uint64_t n_ = 0;
  std::uint64_t m_ = 1;
  std::uint64_t keys_[kRounds] = {};
};

}  // namespace fastrun::samplers
