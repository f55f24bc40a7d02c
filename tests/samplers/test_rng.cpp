// Golden values pin fastrun's RNG, shuffle and lazy bijection: a change to any of them changes
// every order a user has ever trained with, so these numbers must never be edited casually.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "fastrun/samplers/feistel.h"
#include "fastrun/samplers/order.h"
#include "fastrun/samplers/rng.h"

using namespace fastrun::samplers;
using V = std::vector<std::uint64_t>;

TEST_CASE("SplitMix64 matches the reference generator", "[samplers][rng][golden]") {
  SplitMix64 r(0);  // reference outputs of splitmix64.c seeded with 0
  CHECK(r.next() == 0xE220A8397B1DCDAFull);
  CHECK(r.next() == 0x6E789E6AA1B965F4ull);
  CHECK(r.next() == 0x06C45D188009454Full);
  CHECK(mix64(1) == 0x5692161D100B05E5ull);
  CHECK(stream_seed(7, 3) == 0x46F250DE03EC3614ull);
}

TEST_CASE("bounded draws are pinned and within range", "[samplers][rng][golden]") {
  SplitMix64 b(42);
  V got;
  for (int i = 0; i < 10; ++i) got.push_back(b.bounded(10));
  CHECK(got == V{7, 1, 2, 3, 0, 8, 2, 8, 3, 6});
  SplitMix64 c(1);
  for (std::uint64_t s : {1ull, 2ull, 3ull, 1000ull, (1ull << 63) + 5, ~0ull}) {
    for (int i = 0; i < 100; ++i) CHECK(c.bounded(s) < s);
  }
  // Roughly uniform: each of 6 values appears 6000 +- 600 times in 36000 draws.
  std::vector<int> hist(6);
  for (int i = 0; i < 36000; ++i) ++hist[c.bounded(6)];
  for (int h : hist) CHECK(std::abs(h - 6000) < 600);
}

TEST_CASE("fisher_yates equals the plain loop of its definition", "[samplers][rng]") {
  for (std::size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 1000u}) {
    std::vector<std::uint64_t> a(n), b(n);
    std::iota(a.begin(), a.end(), 0);
    b = a;
    SplitMix64 ra(99), rb(99);
    fisher_yates(a.data(), a.size(), ra);
    for (std::size_t i = n; i-- > 1;) std::swap(b[i], b[rb.bounded(i + 1)]);
    CHECK(a == b);
  }
}

TEST_CASE("shuffled orders are pinned", "[samplers][rng][golden]") {
  CHECK(Order::shuffled(10, 0, 0).to_vector() == V{4, 9, 2, 5, 1, 7, 6, 0, 3, 8});
  CHECK(Order::shuffled(10, 0, 1).to_vector() == V{9, 4, 0, 5, 2, 1, 6, 8, 3, 7});
  CHECK(Order::shuffled(20, 5, 0).to_vector() ==
        V{4, 15, 13, 11, 18, 3, 5, 7, 6, 10, 12, 2, 14, 9, 19, 17, 8, 1, 16, 0});
}

TEST_CASE("lazy Feistel orders are pinned", "[samplers][rng][golden][lazy]") {
  CHECK(Order::lazy(10, 0, 0).to_vector() == V{7, 3, 0, 1, 5, 2, 4, 9, 8, 6});
  CHECK(Order::lazy(20, 5, 1).to_vector() ==
        V{3, 9, 11, 12, 1, 8, 7, 0, 4, 19, 16, 17, 14, 2, 5, 13, 18, 6, 15, 10});
  FeistelPermutation f(1ull << 63, 7, 2);
  CHECK(f.side() == 3037000500ull);
  CHECK(f(0) == 1861261654397452423ull);
  CHECK(f(1) == 7648053451791934390ull);
  CHECK(f(123456789) == 1075206568738990570ull);
  CHECK(f((1ull << 63) - 1) == 171632463740010612ull);
  FeistelPermutation g(10000000000ull, 1, 0);
  CHECK(g.side() == 100000);
  CHECK(g(0) == 8155956131ull);
  CHECK(g(1) == 3938270641ull);
  CHECK(g(2) == 9580601041ull);
  CHECK(g(9999999999ull) == 2366963578ull);
}

TEST_CASE("lazy gather agrees with the scalar map wrap included", "[samplers][lazy]") {
  for (std::uint64_t n : {1ull, 2ull, 7ull, 10ull, 99ull, 1000ull, 10007ull, 1ull << 40}) {
    FeistelPermutation f(n, 4, 2);
    for (std::uint64_t stride : {1ull, 3ull, 8ull, 1000003ull}) {
      const std::uint64_t first = n > 5 ? n - 5 : 0;  // starts near the end, so it wraps
      V got(37);
      f.gather(first, stride, got.data(), got.size());
      for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == f((first + i * stride) % n));
    }
  }
}

TEST_CASE("the lazy order looks uniform", "[samplers][lazy]") {
  // Where position 0 goes, over 20000 seeds, n = 10: each value about 2000 times.
  std::vector<int> hist(10);
  for (std::uint64_t seed = 0; seed < 20000; ++seed) ++hist[FeistelPermutation(10, seed, 0)(0)];
  for (int h : hist) CHECK(std::abs(h - 2000) < 250);
  // Neighbouring positions land far apart: in a large order, |f(p+1) - f(p)| averages ~n/3.
  const std::uint64_t n = 1000000;
  FeistelPermutation f(n, 1, 0);
  double sum = 0;
  for (std::uint64_t p = 0; p < 10000; ++p) sum += std::abs(double(f(p + 1)) - double(f(p)));
  CHECK(sum / 10000 > n / 3.0 * 0.9);
  CHECK(sum / 10000 < n / 3.0 * 1.1);
}

TEST_CASE("the lazy order is a bijection on 0..n-1", "[samplers][lazy]") {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 5ull, 7ull, 8ull, 9ull, 1000ull, 1024ull, 1025ull, 10007ull, 65537ull}) {
    for (std::uint64_t seed : {0ull, 3ull}) {
      V v = Order::lazy(n, seed, 1).to_vector();
      std::sort(v.begin(), v.end());
      V id(n);
      std::iota(id.begin(), id.end(), 0);
      CHECK(v == id);
    }
  }
  // Large n: distinct values in range over a sample of positions.
  const std::uint64_t n = (1ull << 40) + 12345;
  FeistelPermutation f(n, 11, 0);
  std::set<std::uint64_t> seen;
  for (std::uint64_t p = 0; p < 20000; ++p) {
    const std::uint64_t v = f(p * 54975581 % n);
    CHECK(v < n);
    seen.insert(v);
  }
  CHECK(seen.size() == 20000);
  CHECK_THROWS_AS(FeistelPermutation((1ull << 63) + 1, 0, 0), std::invalid_argument);
}

TEST_CASE("orders differ between epochs and seeds", "[samplers][rng]") {
  CHECK(Order::shuffled(100, 1, 0).to_vector() != Order::shuffled(100, 1, 1).to_vector());
  CHECK(Order::shuffled(100, 1, 0).to_vector() != Order::shuffled(100, 2, 0).to_vector());
  // (seed, epoch) = (0, 1) and (1, 0) are different streams (not seed + epoch as in fastNLP).
  CHECK(Order::shuffled(100, 0, 1).to_vector() != Order::shuffled(100, 1, 0).to_vector());
  CHECK(Order::lazy(100, 1, 0).to_vector() != Order::lazy(100, 1, 1).to_vector());
}
