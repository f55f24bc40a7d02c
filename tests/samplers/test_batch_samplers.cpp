// RandomBatchSampler, BucketedBatchSampler and ReproduceBatchSampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "fastrun/samplers/samplers.h"
#include "sampler_checks.h"

using namespace fastrun::samplers;
using V = std::vector<std::uint64_t>;
using Batches = std::vector<V>;

namespace {

Batches drain(BatchSampler& s) {
  Batches out;
  V b;
  while (s.next_batch(b)) out.push_back(b);
  return out;
}

V lengths_of(std::uint64_t n) {
  V len(n);
  for (std::uint64_t i = 0; i < n; ++i) len[i] = (i * 2654435761u) % 97;
  return len;
}

// kind 0: RandomBatchSampler, 1: BucketedBatchSampler (shuffled, lengths_of(n)).
std::unique_ptr<BatchSampler> make(int kind, std::uint64_t n, std::uint64_t B, bool drop_last, std::uint64_t seed) {
  if (kind == 0) return std::make_unique<RandomBatchSampler>(n, B, true, drop_last, seed);
  return std::make_unique<BucketedBatchSampler>(lengths_of(n), B, 3, true, drop_last, seed);
}

// R ranks run k batches of B, save; R2 ranks resume with B2 and run to the end.
void check_batch_resume(int kind, std::uint64_t n, int R, std::uint64_t B, int R2, std::uint64_t B2, bool pad,
                        std::uint64_t k) {
  INFO("kind=" << kind << " n=" << n << " R=" << R << " B=" << B << " R'=" << R2 << " B'=" << B2 << " pad=" << pad
               << " k=" << k);
  std::map<std::uint64_t, int> count;
  std::string state;
  std::uint64_t per_rank = 0;
  for (int r = 0; r < R; ++r) {
    auto s = make(kind, n, B, false, 3);
    s->set_distributed(R, r, pad);
    s->set_epoch(1);
    V b;
    per_rank = 0;
    for (std::uint64_t i = 0; i < k; ++i) {
      REQUIRE(s->next_batch(b));
      per_rank += b.size();
      for (auto x : b) ++count[x];
    }
    if (r == 0) state = s->state();
    REQUIRE(s->state() == state);
  }
  std::uint64_t batches = 0;
  for (int r = 0; r < R2; ++r) {
    auto s = make(kind, n, B2, false, 8);
    s->load_state(state);
    s->set_distributed(R2, r, pad);
    REQUIRE(s->consumed() == std::min(n, R * per_rank));
    Batches got = drain(*s);
    if (r == 0) batches = got.size();
    REQUIRE(got.size() == batches);  // every rank the same number of batches
    for (const V& b : got) {
      REQUIRE(b.size() <= B2);
      for (auto x : b) ++count[x];
    }
  }
  if (pad) {
    REQUIRE(count.size() == n);
    // Repeats are padding only: fewer than R before the save and fewer than R2 after.
    std::uint64_t dups = 0;
    for (auto& [x, c] : count) dups += c - 1;
    if (n >= static_cast<std::uint64_t>(std::max(R, R2))) REQUIRE(dups <= static_cast<std::uint64_t>(R - 1 + R2 - 1));
  } else {
    for (auto& [x, c] : count) REQUIRE(c == 1);
    REQUIRE(n - count.size() < static_cast<std::uint64_t>(R2));
  }
}

}  // namespace

TEST_CASE("RandomBatchSampler vectors (n=10 R=3 B=2 no shuffle)", "[samplers][batch]") {
  std::vector<Batches> pad, nopad;
  for (int r = 0; r < 3; ++r) {
    RandomBatchSampler a(10, 2, false), b(10, 2, false);
    a.set_distributed(3, r, true);
    b.set_distributed(3, r, false);
    pad.push_back(drain(a));
    nopad.push_back(drain(b));
  }
  // Padding wraps from the start of the order (fastNLP repeats the rank's own sample instead).
  CHECK(pad == std::vector<Batches>{{{0, 3}, {6, 9}}, {{1, 4}, {7, 0}}, {{2, 5}, {8, 1}}});
  CHECK(nopad == std::vector<Batches>{{{0, 3}, {6}}, {{1, 4}, {7}}, {{2, 5}, {8}}});
}

TEST_CASE("BucketedBatchSampler vectors (n=10 length=index R=3 B=2 no shuffle)", "[samplers][batch]") {
  V len(10);
  std::iota(len.begin(), len.end(), 0);
  std::vector<Batches> pad, nopad;
  for (int r = 0; r < 3; ++r) {
    BucketedBatchSampler a(len, 2, 10, false), b(len, 2, 10, false);
    a.set_distributed(3, r, true);
    b.set_distributed(3, r, false);
    pad.push_back(drain(a));
    nopad.push_back(drain(b));
  }
  CHECK(pad == std::vector<Batches>{{{9, 6}, {3, 0}}, {{8, 5}, {2, 9}}, {{7, 4}, {1, 8}}});
  CHECK(nopad == std::vector<Batches>{{{9, 6}, {3}}, {{8, 5}, {2}}, {{7, 4}, {1}}});
}

TEST_CASE("fastNLP bug fixed: uneven padded shards resume exactly (n=9 R=2 B=4)", "[samplers][batch][resume]") {
  for (int kind : {0, 1}) {
    INFO("kind=" << kind);
    std::set<std::uint64_t> seen;
    std::string state;
    for (int r = 0; r < 2; ++r) {
      auto s = make(kind, 9, 4, false, 0);
      s->set_distributed(2, r, true);
      REQUIRE(s->num_batches() == 2);
      V b;
      REQUIRE(s->next_batch(b));
      REQUIRE(b.size() == 4);
      seen.insert(b.begin(), b.end());
      state = s->state();
    }
    REQUIRE(seen.size() == 8);
    auto s = make(kind, 9, 4, false, 0);
    s->load_state(state);
    s->set_distributed(1, 0, true);
    Batches rest = drain(*s);
    REQUIRE(rest.size() == 1);
    REQUIRE(rest[0].size() == 1);
    CHECK(seen.count(rest[0][0]) == 0);  // exactly the one index not yet seen
  }
}

TEST_CASE("batch samplers: equal batch counts cover the order resume on other R and B", "[samplers][batch][property]") {
  for (int kind : {0, 1})
    for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 5ull, 7ull, 13ull, 1000ull})
      for (int R = 1; R <= 8; ++R)
        for (bool pad : {false, true})
          for (std::uint64_t B : {1ull, 3ull, 4ull})
            for (bool drop_last : {false, true}) {
              INFO("kind=" << kind << " n=" << n << " R=" << R << " pad=" << pad << " B=" << B << " drop_last=" << drop_last);
              std::map<std::uint64_t, int> count;
              const std::uint64_t share = sampler_checks::share_size(n, 0, R, pad);
              const std::uint64_t want = drop_last ? share / B : (share + B - 1) / B;
              for (int r = 0; r < R; ++r) {
                auto s = make(kind, n, B, drop_last, 11);
                s->set_distributed(R, r, pad);
                REQUIRE(s->num_batches() == want);
                REQUIRE(s->batches_per_epoch() == want);
                Batches got = drain(*s);
                REQUIRE(got.size() == want);
                for (std::size_t i = 0; i < got.size(); ++i) {
                  if (i + 1 < got.size() || drop_last) REQUIRE(got[i].size() == B);
                  for (auto x : got[i]) ++count[x];
                }
              }
              if (!pad)
                for (auto& [x, c] : count) REQUIRE(c == 1);
              if (pad && !drop_last) REQUIRE(count.size() == n);
            }
  for (int kind : {0, 1})
    for (std::uint64_t n : {1ull, 2ull, 5ull, 13ull, 100ull})
      for (int R : {1, 2, 3, 4})
        for (bool pad : {false, true})
          for (std::uint64_t B : {1ull, 4ull}) {
            const std::uint64_t share = sampler_checks::share_size(n, 0, R, pad);
            const std::uint64_t nb = (share + B - 1) / B;
            for (std::uint64_t k = 0; k <= nb; ++k)
              for (int R2 : {1, 2, 5})
                for (std::uint64_t B2 : {B, std::uint64_t{3}}) check_batch_resume(kind, n, R, B, R2, B2, pad, k);
          }
}

TEST_CASE("batch size change on resume is accepted (ReproduceBatchSampler)", "[samplers][batch][resume]") {
  auto source = [](std::uint64_t epoch) {
    V v(100);
    std::iota(v.begin(), v.end(), 0);
    if (epoch > 0) std::reverse(v.begin(), v.end());
    return v;
  };
  ReproduceBatchSampler a(source, 4);
  V b;
  for (int i = 0; i < 3; ++i) a.next_batch(b);
  const std::string st = a.state();
  ReproduceBatchSampler same(source, 4), seven(source, 7);
  same.load_state(st);
  seven.load_state(st);
  same.next_batch(b);
  CHECK(b == V{12, 13, 14, 15});
  same.next_batch(b);
  CHECK(b == V{16, 17, 18, 19});
  seven.next_batch(b);
  CHECK(b == V{12, 13, 14, 15, 16, 17, 18});
  seven.next_batch(b);
  CHECK(b == V{19, 20, 21, 22, 23, 24, 25});
  CHECK(seven.num_batches_left() == 11);  // 74 left after 26: ceil(74 / 7)
  seven.set_epoch(1);                     // the next epoch asks the source again
  seven.next_batch(b);
  CHECK(b == V{99, 98, 97, 96, 95, 94, 93});
  CHECK_THROWS_WITH(seven.set_distributed(2, 0, true), Catch::Contains("one process only"));
  // The state holds the list, so a source that changed since still resumes the saved order.
  ReproduceBatchSampler other([](std::uint64_t) { return V(100, 5); }, 4);
  other.load_state(st);
  other.next_batch(b);
  CHECK(b == V{12, 13, 14, 15});
  CHECK_THROWS_WITH(ReproduceBatchSampler([](std::uint64_t) { return V(99); }, 4).load_state(st),
                    Catch::Contains("field 'n' is 100 in the state but 99"));
}

TEST_CASE("bucketed: batches at one step come from one bucket", "[samplers][batch][bucketed]") {
  const std::uint64_t n = 1000, B = 4, K = 5;
  V len(n);
  std::iota(len.begin(), len.end(), 0);  // length = index, as in fastNLP's test
  for (int R : {1, 2, 3, 4}) {
    for (bool pad : {false, true}) {
      std::vector<Batches> all;
      for (int r = 0; r < R; ++r) {
        BucketedBatchSampler s(len, B, K, true, false, 5);
        s.set_distributed(R, r, pad);
        all.push_back(drain(s));
      }
      for (std::size_t t = 0; t + 1 < all[0].size(); ++t) {  // the last step may pad from the front
        std::uint64_t lo = n, hi = 0;
        for (int r = 0; r < R; ++r)
          for (auto x : all[r][t]) lo = std::min(lo, len[x]), hi = std::max(hi, len[x]);
        INFO("R=" << R << " step " << t);
        REQUIRE(hi - lo < B * K * R);
      }
      // Consecutive steps are shuffled: the first steps are not the longest samples.
      V firsts;
      for (std::size_t t = 0; t < 10; ++t) firsts.push_back(all[0][t][0]);
      CHECK(!std::is_sorted(firsts.rbegin(), firsts.rend()));
    }
  }
}

TEST_CASE("bucketed: resuming a resumed epoch on yet another layout stays exact", "[samplers][batch][bucketed]") {
  const std::uint64_t n = 203;
  const V len = lengths_of(n);
  std::map<std::uint64_t, int> count;
  auto run = [&](const std::string& from, int R, std::uint64_t B, std::uint64_t steps) {
    std::string out;
    for (int r = 0; r < R; ++r) {
      BucketedBatchSampler s(len, B, 2, true, false, 1);
      if (!from.empty()) s.load_state(from);
      s.set_distributed(R, r, false);
      V b;
      for (std::uint64_t i = 0; i < steps && s.next_batch(b); ++i)
        for (auto x : b) ++count[x];
      if (r == 0) out = s.state();
      REQUIRE(s.state() == out);
    }
    return out;
  };
  std::string st = run("", 2, 4, 5);        // 40 consumed on 2 ranks, B=4
  st = run(st, 3, 3, 4);                     // 36 more on 3 ranks, B=3
  CHECK(st.find("\"consumed\":76") != std::string::npos);
  CHECK(st.find("\"segments\":[0,2,4,2,40,3,3,2]") != std::string::npos);
  st = run(st, 3, 3, 2);                     // saved twice in the resumed epoch: same layout
  CHECK(st.find("\"consumed\":94") != std::string::npos);
  run(st, 1, 5, 1000);                       // to the end on one rank
  for (auto& [x, c] : count) REQUIRE(c == 1);
  CHECK(count.size() == n);
}

TEST_CASE("batch samplers: bad arguments", "[samplers][batch][errors]") {
  CHECK_THROWS_WITH(RandomBatchSampler(10, 0), Catch::Contains("batch_size = 0") && Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(BucketedBatchSampler({1, 2}, 0), Catch::Contains("batch_size = 0"));
  CHECK_THROWS_WITH(BucketedBatchSampler({1, 2}, 2, 0), Catch::Contains("batches_per_bucket = 0"));
  CHECK_THROWS_WITH(BucketedBatchSampler({1, 2, 3}, 2).load_state(BucketedBatchSampler({1, 2}, 2).state()),
                    Catch::Contains("field 'n' is 2 in the state but 3"));
  CHECK_THROWS_WITH(BucketedBatchSampler({1, 2}, 2).load_state(BucketedBatchSampler({2, 1}, 2).state()),
                    Catch::Contains("lengths_hash"));
  CHECK_THROWS_AS(RandomBatchSampler(10, 2).set_distributed(2, 2, true), SamplerError);
  CHECK_THROWS_WITH(ReproduceBatchSampler(nullptr, 2), Catch::Contains("source is empty"));
}
