#include "fastrun/samplers/feistel.h"

#include <cmath>
#include <string>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

namespace {
// ceil(sqrt(n)) exactly, for n <= 2^63.
std::uint64_t ceil_sqrt(std::uint64_t n) {
  if (n <= 1) return 1;
  auto m = static_cast<std::uint64_t>(std::sqrt(static_cast<long double>(n)));
  while (m * m > n) --m;           // m = floor(sqrt(n)) after corrections
  while ((m + 1) * (m + 1) <= n) ++m;
  return m * m == n ? m : m + 1;
}
}  // namespace

FeistelPermutation::FeistelPermutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch)
    : n_(n), m_(ceil_sqrt(n)) {
  if (n > (std::uint64_t{1} << 63))
    throw SamplerError("lazy order: n = " + std::to_string(n) + " is too large (accepted: n <= 2^63)");
  const std::uint64_t s = stream_seed(seed, epoch);
  for (int i = 0; i < kRounds; ++i) keys_[i] = mix64(s + static_cast<std::uint64_t>(i + 1) * kGolden);
}

void FeistelPermutation::gather(std::uint64_t first, std::uint64_t stride, std::uint64_t* out,
                                std::size_t count) const {
  if (count == 0) return;
  std::uint64_t p = first % n_;
  const std::uint64_t step = stride % n_;
  const std::uint64_t sa = step / m_, sb = step % m_;
  std::uint64_t a = p / m_, b = p % m_;
  // Position p as the pair (a, b); stepping adds (sa, sb) with a carry, and re-splits (one
  // division) only when the position wraps past n, which only padding does.
  auto advance = [&] {
    p += step;  // p, step < n <= 2^63: no overflow
    if (p >= n_) {
      p -= n_;
      a = p / m_;
      b = p % m_;
    } else {
      a += sa;
      b += sb;
      if (b >= m_) b -= m_, ++a;
    }
  };
  std::size_t i = 0;
  // Eight positions at a time: their rounds are independent, so the multiplies overlap.
  for (; i + 8 <= count; i += 8) {
    std::uint64_t xa[8], xb[8];
    for (int j = 0; j < 8; ++j) {
      xa[j] = a;
      xb[j] = b;
      advance();
    }
    for (int r = 0; r < kRounds; ++r) {
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t f = ((((xb[j] ^ keys_[r]) * kGolden) >> 32) * m_) >> 32;
        std::uint64_t t = xa[j] + f;
        t = t >= m_ ? t - m_ : t;
        xa[j] = xb[j];
        xb[j] = t;
      }
    }
    for (int j = 0; j < 8; ++j) {
      const std::uint64_t v = xa[j] * m_ + xb[j];
      out[i + static_cast<std::size_t>(j)] = v < n_ ? v : walk(xa[j], xb[j]);
    }
  }
  for (; i < count; ++i) {
    out[i] = walk(a, b);
    advance();
  }
}

}  // namespace fastrun::samplers
