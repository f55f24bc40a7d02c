// Shares of one epoch: the fastNLP vectors, and the share rule over a grid of n, R, pad, seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "fastrun/samplers/samplers.h"
#include "sampler_checks.h"

using namespace fastrun::samplers;
using V = std::vector<std::uint64_t>;

namespace {
std::vector<V> shares(std::uint64_t n, int R, bool pad) {
  std::vector<V> out;
  for (int r = 0; r < R; ++r) {
    SequentialSampler s(n);
    s.set_distributed(R, r, pad);
    out.push_back(s.take_all());
  }
  return out;
}
}  // namespace

TEST_CASE("fastNLP vectors: n=10 R=4 no shuffle", "[samplers][shares]") {
  CHECK(shares(10, 4, true) == std::vector<V>{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}});
  CHECK(shares(10, 4, false) == std::vector<V>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  RandomSampler r(10, false);
  r.set_distributed(4, 2, true);
  CHECK(r.take_all() == V{2, 6, 0});
}

TEST_CASE("fastNLP vectors: n=11 resumed at C=4 on R=3", "[samplers][shares][resume]") {
  const std::string saved = SequentialSampler(11).state();
  std::string st = saved;
  st.replace(st.find("\"consumed\":0"), 12, "\"consumed\":4");
  std::vector<V> pad, nopad;
  for (int r = 0; r < 3; ++r) {
    SequentialSampler a(11), b(11);
    a.load_state(st);
    b.load_state(st);
    a.set_distributed(3, r, true);
    b.set_distributed(3, r, false);
    CHECK(a.num_samples() == 3);
    CHECK(b.num_samples() == 2);
    CHECK(a.samples_per_epoch() == 4);  // an uninterrupted epoch, the length fastNLP reports
    pad.push_back(a.take_all());
    nopad.push_back(b.take_all());
  }
  CHECK(pad == std::vector<V>{{4, 7, 10}, {5, 8, 0}, {6, 9, 1}});
  CHECK(nopad == std::vector<V>{{4, 7}, {5, 8}, {6, 9}});
}

TEST_CASE("SortedSampler: descending length ties by index", "[samplers][shares]") {
  SortedSampler s({3, 7, 7, 1, 9, 3});
  CHECK(s.take_all() == V{4, 1, 2, 0, 5, 3});
  SortedSampler p({3, 7, 7, 1, 9, 3});
  p.set_distributed(4, 3, true);
  CHECK(p.take_all() == V{0, 1});  // pads with the longest sample, from the start of the order
}

// One factory per reproducible kind, so every property runs on each.
using Factory = std::function<std::unique_ptr<ReproducibleSampler>(std::uint64_t n, std::uint64_t seed)>;
const std::vector<std::pair<const char*, Factory>>& factories() {
  static const std::vector<std::pair<const char*, Factory>> f = {
      {"random", [](std::uint64_t n, std::uint64_t s) { return std::make_unique<RandomSampler>(n, true, s); }},
      {"random-noshuffle", [](std::uint64_t n, std::uint64_t s) { return std::make_unique<RandomSampler>(n, false, s); }},
      {"lazy", [](std::uint64_t n, std::uint64_t s) { return std::make_unique<LazyRandomSampler>(n, s); }},
      {"sequential", [](std::uint64_t n, std::uint64_t) { return std::make_unique<SequentialSampler>(n); }},
      {"sorted",
       [](std::uint64_t n, std::uint64_t s) {
         V len(n);
         for (std::uint64_t i = 0; i < n; ++i) len[i] = (i * 7919 + s) % 13;
         return std::make_unique<SortedSampler>(len);
       }},
  };
  return f;
}

TEST_CASE("shares are equal-sized disjoint up to padding and cover the order", "[samplers][shares][property]") {
  for (const auto& [name, make] : factories()) {
    for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 5ull, 7ull, 13ull, 1000ull, 10007ull}) {
      for (int R = 1; R <= 8; ++R) {
        for (bool pad : {false, true}) {
          for (std::uint64_t seed : {0ull, 12345ull}) {
            for (std::uint64_t epoch : {0ull, 3ull}) {
              INFO(name << " n=" << n << " R=" << R << " pad=" << pad << " seed=" << seed << " epoch=" << epoch);
              std::vector<V> got;
              V order;
              for (int r = 0; r < R; ++r) {
                auto s = make(n, seed);
                s->set_distributed(R, r, pad);
                s->set_epoch(epoch);
                if (r == 0) order = s->order().to_vector();
                REQUIRE(s->order().to_vector() == order);  // every rank agrees on the order
                const std::uint64_t size = sampler_checks::share_size(n, 0, R, pad);
                REQUIRE(s->num_samples() == size);
                REQUIRE(s->samples_per_epoch() == size);
                got.push_back(s->take_all());
                REQUIRE(s->num_left() == 0);
                REQUIRE(!s->next());
                REQUIRE(got.back() == sampler_checks::expected_share(order, 0, R, r, pad));
              }
              V sorted_order = order;
              std::sort(sorted_order.begin(), sorted_order.end());
              for (std::uint64_t i = 0; i < n; ++i) REQUIRE(sorted_order[i] == i);  // a permutation
              std::map<std::uint64_t, int> count;
              for (const V& g : got)
                for (auto i : g) ++count[i];
              const std::uint64_t total = sampler_checks::share_size(n, 0, R, pad) * R;
              if (!pad) {
                for (auto& [i, c] : count) REQUIRE(c == 1);  // disjoint
                REQUIRE(count.size() == total);              // the order cut to floor(n/R) per rank
                REQUIRE(n - total < static_cast<std::uint64_t>(R));
              } else {
                REQUIRE(count.size() == n);  // covers the order
                REQUIRE(total - n < static_cast<std::uint64_t>(R));
                for (const V& g : got) {  // a rank holds each index once unless n < R
                  std::set<std::uint64_t> u(g.begin(), g.end());
                  if (n >= static_cast<std::uint64_t>(R)) REQUIRE(u.size() == g.size());
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("bad distribution arguments are clear errors", "[samplers][errors]") {
  RandomSampler s(10);
  CHECK_THROWS_WITH(s.set_distributed(0, 0, true), Catch::Contains("num_replicas = 0") && Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(s.set_distributed(4, 4, true), Catch::Contains("rank = 4") && Catch::Contains("0 <= rank < num_replicas"));
  CHECK_THROWS_WITH(s.set_distributed(4, -1, true), Catch::Contains("rank = -1"));
  CHECK_THROWS_AS(RandomSampler((1ull << 63) + 1), SamplerError);
}

TEST_CASE("large n: the lazy order shares 10^12 samples without memory", "[samplers][lazy]") {
  const std::uint64_t n = 1000000000000ull;
  LazyRandomSampler a(n, 9), b(n, 9);
  a.set_distributed(3, 0, true);
  b.set_distributed(3, 1, true);
  CHECK(a.num_samples() == 333333333334ull);
  CHECK(a.order().bytes() == 0);
  V x(1000), y(1000);
  CHECK(a.next_into(x.data(), x.size()) == 1000);
  CHECK(b.next_into(y.data(), y.size()) == 1000);
  std::set<std::uint64_t> u(x.begin(), x.end());
  u.insert(y.begin(), y.end());
  CHECK(u.size() == 2000);
  CHECK(a.consumed() == 3000);
}
