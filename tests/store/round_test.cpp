// Rounds on every store kind (runtime/store/gather.h; conformance.h's registry): an all-gather
// and a ranked barrier as threads, a timeout that names the participants that never arrived,
// and a prefix used twice refused instead of read stale.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "conformance.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/gather.h"

using namespace fastrun;
using namespace std::chrono_literals;
using fastrun::test::store_kinds_under_test;

namespace {

// Each participant's value: its rank in text, a 0-byte value for rank 1, 3 KiB for the last.
Bytes value_of(int rank, int size) {
  if (rank == 1) return {};
  if (rank == size - 1) return Bytes(3072, static_cast<std::uint8_t>('a' + rank % 26));
  return to_bytes("rank-" + std::to_string(rank));
}

// Runs `body(rank, store)` on a thread per rank in `ranks`, each with its own handle; returns
// what each threw ("" when nothing).
template <typename Body>
std::vector<std::string> as_threads(Store& s, const std::vector<int>& ranks, Body body) {
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i, h = s.clone()]() mutable {
      try {
        body(ranks[i], *h);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("store round: all-gather and ranked barrier as threads", "[store][conformance][round]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      auto hosted = kind.host();
      auto store = hosted->connect();
      for (int size : {1, 3, 10}) {
        std::vector<int> ranks;
        for (int r = 0; r < size; ++r) ranks.push_back(r);
        std::atomic<int> good{0};
        const auto errors = as_threads(*store, ranks, [&](int rank, Store& h) {
          RoundOptions round;
          round.prefix = "gather-" + std::to_string(size);
          round.rank = rank;
          round.size = size;
          round.timeout = 20s;
          const auto values = store_all_gather(h, round, value_of(rank, size));
          bool ok = static_cast<int>(values.size()) == size;
          for (int r = 0; ok && r < size; ++r) ok = values[static_cast<std::size_t>(r)] == value_of(r, size);
          store_barrier(h, "barrier-" + std::to_string(size), rank, size, 20s);
          if (ok) good.fetch_add(1);
        });
        for (const auto& e : errors) CHECK(e.empty());
        CHECK(good == size);
      }
    }
  }
}

TEST_CASE("store round: a timeout names the participants that never arrived", "[store][conformance][round]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      auto hosted = kind.host();
      auto store = hosted->connect();
      // 9 participants in groups of 3: rank 4 leaves group 1 incomplete; groups 0 and 2 complete.
      const std::vector<int> ranks = {0, 1, 2, 3, 5, 6, 7, 8};
      // Each barrier call alone is timed (connecting the handles is not): bounded by the 300 ms
      // asked for, not the handle's 20 s, with a margin for a loaded sanitizer run.
      std::atomic<bool> overran{false};
      const auto errors = as_threads(*store, ranks, [&](int rank, Store& h) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
          store_barrier(h, "short", rank, 9, 300ms);
        } catch (...) {
          if (std::chrono::steady_clock::now() - t0 >= 10s) overran = true;
          throw;
        }
      });
      CHECK_FALSE(overran);
      for (const auto& e : errors) {
        CHECK_THAT(e, Catch::Contains("barrier 'short' timed out"));
        CHECK_THAT(e, Catch::Contains("1 of 9 participants never arrived: ranks [4]"));
      }
      const auto gather_errors = as_threads(*store, {0, 2}, [&](int rank, Store& h) {
        RoundOptions round;
        round.prefix = "short-gather";
        round.rank = rank;
        round.size = 4;
        round.timeout = 300ms;
        store_all_gather(h, round, to_bytes("x"));
      });
      for (const auto& e : gather_errors) CHECK_THAT(e, Catch::Contains("2 of 4 participants never arrived: [1, 3]"));
      CHECK(round_missing(*store, "short-gather", 4) == std::vector<int>{1, 3});
    }
  }
}

TEST_CASE("store round: a prefix used twice is refused, not read stale", "[store][conformance][round]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      auto hosted = kind.host();
      auto store = hosted->connect();
      const auto errors = as_threads(*store, {0, 1, 2, 3}, [&](int rank, Store& h) {
        store_barrier(h, "once", rank, 4, 20s);
      });
      for (const auto& e : errors) CHECK(e.empty());
      try {
        store_barrier(*store, "once", 2, 4, 2s);
        FAIL("a second round under one prefix passed on the first one's keys");
      } catch (const StoreError& e) {
        CHECK_THAT(e.what(), Catch::Contains("used by an earlier round"));
      }
    }
  }
}
