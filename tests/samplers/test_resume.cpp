// Mid-epoch resume of the reproducible samplers: on the same and on other numbers of ranks,
// from every position (small n) or a spread of positions (large n).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <memory>
#include <set>

#include "fastrun/samplers/samplers.h"
#include "sampler_checks.h"

using namespace fastrun::samplers;
using V = std::vector<std::uint64_t>;

namespace {

std::unique_ptr<ReproducibleSampler> make(int kind, std::uint64_t n, std::uint64_t seed) {
  switch (kind) {
    case 0: return std::make_unique<RandomSampler>(n, true, seed);
    case 1: return std::make_unique<LazyRandomSampler>(n, seed);
    case 2: return std::make_unique<SequentialSampler>(n);
    default: {
      V len(n);
      for (std::uint64_t i = 0; i < n; ++i) len[i] = (i * 31) % 7;
      return std::make_unique<SortedSampler>(len);
    }
  }
}

// Runs R ranks for k steps each, saves, resumes on R2 ranks, and checks the exact shares and
// the coverage rules. `seed2` is the resumed samplers' constructor seed: the state's wins.
void check_resume(int kind, std::uint64_t n, int R, int R2, bool pad, std::uint64_t k, std::uint64_t epoch) {
  INFO("kind=" << kind << " n=" << n << " R=" << R << " R'=" << R2 << " pad=" << pad << " k=" << k
               << " epoch=" << epoch);
  V before;
  std::string state;
  V order;
  for (int r = 0; r < R; ++r) {
    auto s = make(kind, n, 77);
    s->set_distributed(R, r, pad);
    s->set_epoch(epoch);
    if (r == 0) order = s->order().to_vector();
    for (std::uint64_t i = 0; i < k; ++i) {
      auto v = s->next();
      REQUIRE(v);
      before.push_back(*v);
    }
    if (r == 0) state = s->state();
    REQUIRE(s->state() == state);  // every rank saves the same state
  }
  const std::uint64_t consumed = std::min(n, R * k);
  std::vector<V> after;
  for (int r = 0; r < R2; ++r) {
    auto s = make(kind, n, 5);
    s->load_state(state);  // no set_epoch: the saved epoch is the one in use
    s->set_distributed(R2, r, pad);
    REQUIRE(s->epoch() == epoch);
    REQUIRE(s->order().to_vector() == order);
    REQUIRE(s->consumed() == consumed);
    after.push_back(s->take_all());
    REQUIRE(after.back() == sampler_checks::expected_share(order, consumed, R2, r, pad));
  }
  // Coverage: the prefix consumed before is positions [0, consumed) of the order.
  std::map<std::uint64_t, int> count;
  for (std::uint64_t p = 0; p < consumed; ++p) ++count[order[p]];
  for (const V& a : after)
    for (auto i : a) ++count[i];
  if (pad) {
    REQUIRE(count.size() == n);  // the whole order
    // Repeats are the padding only: R2 * left - (n - consumed) < R2 of them, at most one per
    // rank (the share rule puts at most one wrapped position in each rank's share).
    std::uint64_t dups = 0;
    for (auto& [i, c] : count) dups += c - 1;
    const std::uint64_t left = sampler_checks::share_size(n, consumed, R2, true);
    REQUIRE(dups == (consumed < n ? R2 * left - (n - consumed) : 0));
    if (n >= static_cast<std::uint64_t>(R2)) REQUIRE(dups < static_cast<std::uint64_t>(R2));
  } else {
    for (auto& [i, c] : count) REQUIRE(c == 1);  // nothing repeated
    REQUIRE(n - count.size() < static_cast<std::uint64_t>(R2));  // only the cut remainder is missing
  }
}

}  // namespace

TEST_CASE("resume from every position on R and on R' (small n)", "[samplers][resume][property]") {
  for (int kind = 0; kind < 4; ++kind)
    for (std::uint64_t n : {1ull, 2ull, 3ull, 5ull, 7ull, 13ull})
      for (int R = 1; R <= 8; ++R)
        for (bool pad : {false, true})
          for (std::uint64_t k = 0; k <= sampler_checks::share_size(n, 0, R, pad); ++k)
            for (int R2 : {1, 2, 3, 5, 8}) check_resume(kind, n, R, R2, pad, k, 2);
}

TEST_CASE("resume from a spread of positions (n = 1000 10007)", "[samplers][resume][property]") {
  for (int kind = 0; kind < 4; ++kind)
    for (std::uint64_t n : {1000ull, 10007ull})
      for (int R : {1, 2, 3, 8})
        for (bool pad : {false, true}) {
          const std::uint64_t last = sampler_checks::share_size(n, 0, R, pad);
          for (std::uint64_t k : V{0, 1, last / 3, last - 1, last})
            for (int R2 : {1, 4, 7}) check_resume(kind, n, R, R2, pad, k, 1);
        }
}

TEST_CASE("fastNLP bug fixed: resume without set_epoch uses the order in use", "[samplers][resume]") {
  // fastNLP: N=20, seed=5, never set_epoch, 8 consumed -> 4 repeated and 4 skipped.
  RandomSampler a(20, true, 5);
  V seen;
  for (int i = 0; i < 8; ++i) seen.push_back(*a.next());
  const std::string st = a.state();
  RandomSampler b(20, true, 5);
  b.load_state(st);
  V rest = b.take_all();
  seen.insert(seen.end(), rest.begin(), rest.end());
  std::sort(seen.begin(), seen.end());
  V all(20);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

TEST_CASE("set_epoch after a restore keeps the restored epoch's position", "[samplers][resume]") {
  RandomSampler a(50, true, 1);
  a.set_epoch(3);
  for (int i = 0; i < 10; ++i) a.next();
  RandomSampler b(50, true, 1);
  b.load_state(a.state());
  b.set_epoch(3);  // the trainer's usual call: same epoch, position kept
  CHECK(b.consumed() == 10);
  CHECK(b.take_all() == a.take_all());
  b.set_epoch(4);  // a new epoch starts at its beginning
  CHECK(b.consumed() == 0);
  CHECK(b.num_left() == 50);
}

TEST_CASE("saving twice within a resumed epoch records the absolute position", "[samplers][resume]") {
  // fastNLP loses the first checkpoint's count: N=100, B=4, a save at batch 5 then 3 more.
  RandomSampler a(100, true, 0);
  V buf(4);
  for (int b = 0; b < 5; ++b) a.next_into(buf.data(), 4);
  const std::string first = a.state();
  CHECK(first.find("\"consumed\":20") != std::string::npos);
  RandomSampler b(100, true, 0);
  b.load_state(first);
  for (int i = 0; i < 3; ++i) b.next_into(buf.data(), 4);
  CHECK(b.consumed() == 32);
  CHECK(b.state().find("\"consumed\":32") != std::string::npos);
  CHECK(b.state_after(2 * 4).find("\"consumed\":28") != std::string::npos);  // prefetch-corrected
}

TEST_CASE("fastNLP test_state_dict: 2 ranks resumed on 1 and on 3", "[samplers][resume]") {
  for (int R2 : {1, 3})
    for (bool pad : {false, true}) check_resume(0, 100, 2, R2, pad, 17, 0);
}

TEST_CASE("the end of an epoch is saved as finished", "[samplers][resume]") {
  RandomSampler a(10, true, 0);
  a.set_distributed(3, 0, true);
  a.take_all();
  CHECK(a.consumed() == 10);  // 3 * 4 = 12, capped at n
  RandomSampler b(10);
  b.load_state(a.state());
  CHECK(b.num_left() == 0);
  b.set_epoch(1);
  CHECK(b.num_left() == 10);
}
