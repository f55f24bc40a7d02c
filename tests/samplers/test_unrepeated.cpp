// Unrepeated samplers (evaluation) and the conversions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "fastrun/samplers/samplers.h"

using namespace fastrun::samplers;
using V = std::vector<std::uint64_t>;

TEST_CASE("unrepeated: n=10 R=3 gives 4 3 3", "[samplers][unrepeated]") {
  std::vector<V> got;
  for (int r = 0; r < 3; ++r) {
    UnrepeatedSequentialSampler s(10);
    s.set_distributed(3, r);
    CHECK(s.num_samples() == (r == 0 ? 4u : 3u));
    got.push_back(s.indices());
    CHECK(got.back().size() == s.num_samples());
  }
  CHECK(got == std::vector<V>{{0, 3, 6, 9}, {1, 4, 7}, {2, 5, 8}});
}

TEST_CASE("unrepeated: the union is the dataset each sample once", "[samplers][unrepeated][property]") {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 5ull, 7ull, 13ull, 99ull, 1000ull, 10007ull})
    for (int R = 1; R <= 8; ++R) {
      if (static_cast<std::uint64_t>(R) > n) continue;
      for (int kind = 0; kind < 3; ++kind) {
        V all;
        for (int r = 0; r < R; ++r) {
          std::unique_ptr<UnrepeatedSampler> s;
          if (kind == 0) s = std::make_unique<UnrepeatedRandomSampler>(n, true, 4);
          if (kind == 1) s = std::make_unique<UnrepeatedSequentialSampler>(n);
          if (kind == 2) s = std::make_unique<UnrepeatedSortedSampler>(V(n, 1));
          s->set_distributed(R, r);
          const V v = s->indices();
          REQUIRE(v.size() == n / R + (static_cast<std::uint64_t>(r) < n % R));
          all.insert(all.end(), v.begin(), v.end());
        }
        std::sort(all.begin(), all.end());
        V id(n);
        std::iota(id.begin(), id.end(), 0);
        REQUIRE(all == id);
      }
    }
  // 99 samples on 2 ranks: 50 and 49, 99 in all (fastNLP's evaluator case).
  UnrepeatedSequentialSampler a(99), b(99);
  a.set_distributed(2, 0);
  b.set_distributed(2, 1);
  CHECK(a.indices().size() + b.indices().size() == 99);
  CHECK(a.num_samples() == 50);
}

TEST_CASE("unrepeated: more ranks than samples is an error", "[samplers][unrepeated][errors]") {
  UnrepeatedRandomSampler s(3);
  CHECK_THROWS_WITH(s.set_distributed(4, 0), Catch::Contains("num_replicas = 4") && Catch::Contains("3 samples"));
  CHECK_THROWS_AS(UnrepeatedSequentialSampler(0).set_distributed(1, 0), SamplerError);
  CHECK_THROWS_AS(s.set_distributed(2, 2), SamplerError);
}

TEST_CASE("conversions keep the kind (fastNLP bug fixed: sorted stays sorted)", "[samplers][unrepeated]") {
  const V len{5, 9, 1, 9, 3};
  SortedSampler sorted(len);
  auto u = to_unrepeated(static_cast<const ReproducibleSampler&>(sorted));
  CHECK(u->kind() == "UnrepeatedSortedSampler");
  CHECK(u->indices() == V{1, 3, 0, 4, 2});
  CHECK(to_reproducible(to_unrepeated(sorted)).kind() == "SortedSampler");
  CHECK(to_reproducible(to_unrepeated(sorted)).take_all() == V{1, 3, 0, 4, 2});

  RandomSampler random(20, true, 3);
  random.set_epoch(2);
  auto ur = to_unrepeated(random);
  CHECK(ur.indices() == random.remaining());  // the same order: same seed and epoch
  CHECK(to_reproducible(ur).kind() == "RandomSampler");
  CHECK(to_reproducible(ur).epoch() == 2);

  SequentialSampler seq(6);
  CHECK(to_unrepeated(static_cast<const ReproducibleSampler&>(seq))->kind() == "UnrepeatedSequentialSampler");
  CHECK(to_reproducible(to_unrepeated(seq)).kind() == "SequentialSampler");
  CHECK_THROWS_WITH(to_unrepeated(static_cast<const ReproducibleSampler&>(LazyRandomSampler(5))),
                    Catch::Contains("LazyRandomSampler has no unrepeated twin"));
}

TEST_CASE("chunk_dist: contiguous chunks and the size is what is yielded", "[samplers][unrepeated]") {
  std::vector<V> got;
  for (int r = 0; r < 3; ++r) {
    UnrepeatedSequentialSampler s(10, true);
    s.set_distributed(3, r);
    got.push_back(s.indices());
    CHECK(s.num_samples() == got.back().size());  // fastNLP reported 4 for rank 0 and 3 for rank 2
  }
  CHECK(got == std::vector<V>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8, 9}});
}
