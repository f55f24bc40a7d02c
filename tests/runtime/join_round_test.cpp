// join()'s exchange of PeerInfo as one all-gather round (runtime/join/rendezvous.h over
// runtime/store/gather.h), with ranks as threads over an in-process store: every rank's info in
// rank order, a timeout or a recorded failure that names the missing ranks, and rounds of later
// generations that the keys of earlier ones (complete, partial or reused) do not confuse.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/rendezvous.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/memory_store.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

PeerInfo info(int rank, long pid) { return PeerInfo{rank, "host-a", pid, "cpu", 0}; }

struct Outcome {
  std::vector<PeerInfo> peers;
  std::string error;  // what() of what it threw, "" when it joined
  std::string kind;   // "timeout", "peer", "store", "other"
};

// Runs the exchange of `generation` on a thread per rank in `ranks` (the others never come),
// each with its own handle on `store`; rank r publishes pid base_pid + r.
std::vector<Outcome> exchange(MemoryStore& store, const std::vector<int>& ranks, int world, int generation,
                              long base_pid, Duration timeout = 5s) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i, handle = std::shared_ptr<Store>(store.clone())] {
      try {
        out[i].peers = join_detail::exchange_peer_infos(handle, info(ranks[i], base_pid + ranks[i]), world, generation,
                                                        timeout);
      } catch (const TimeoutError& e) {
        out[i] = {{}, e.what(), "timeout"};
      } catch (const PeerFailure& e) {
        out[i] = {{}, e.what(), "peer"};
      } catch (const StoreError& e) {
        out[i] = {{}, e.what(), "store"};
      } catch (const std::exception& e) {
        out[i] = {{}, e.what(), "other"};
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<int> upto(int n) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r) v.push_back(r);
  return v;
}

void check_complete(const std::vector<Outcome>& out, int world, long base_pid) {
  for (const auto& o : out) {
    INFO(o.error);
    REQUIRE(o.error.empty());
    REQUIRE(static_cast<int>(o.peers.size()) == world);
    for (int r = 0; r < world; ++r) {
      CHECK(o.peers[static_cast<std::size_t>(r)].rank == r);
      CHECK(o.peers[static_cast<std::size_t>(r)].pid == base_pid + r);
      CHECK(o.peers[static_cast<std::size_t>(r)].host == "host-a");
    }
  }
}

}  // namespace

TEST_CASE("join round: every rank gets every rank's info in rank order", "[join][round]") {
  for (int world : {1, 2, 7, 10, 17}) {  // groups of ceil(sqrt(N)): 1, 2, 3+3+1, 4+4+2, 5+5+5+2
    DYNAMIC_SECTION(world << " ranks") {
      MemoryStore store;
      check_complete(exchange(store, upto(world), world, 0, 1000), world, 1000);
      // The arrival keys stay where the launcher and timeouts look for them.
      CHECK(store.check({join_arrival_key(0, world - 1), peer_key(world - 1)}));
    }
  }
}

TEST_CASE("join round: a timeout names the ranks that never arrived", "[join][round]") {
  MemoryStore store;
  // 10 ranks in groups of 4: rank 3 leaves group 0 incomplete, rank 9 group 2.
  std::vector<int> ranks = upto(10);
  std::erase(ranks, 3);
  std::erase(ranks, 9);
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = exchange(store, ranks, 10, 0, 1000, 300ms);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  for (const auto& o : out) {
    INFO(o.error);
    CHECK(o.kind == "timeout");
    CHECK_THAT(o.error, Catch::Contains("2 of 10 ranks never arrived: [3, 9]"));
    CHECK_THAT(o.error, Catch::Contains("FASTRUN_TIMEOUT"));
  }
}

TEST_CASE("join round: a failure the job records ends the wait, naming the missing ranks", "[join][round]") {
  MemoryStore store;
  std::thread recorder([&] {
    std::this_thread::sleep_for(100ms);
    record_failure(store, "rank 2: exited with code 0 before it joined");
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = exchange(store, {0, 1, 3}, 4, 0, 1000, 30s);
  recorder.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  for (const auto& o : out) {
    INFO(o.error);
    CHECK(o.kind == "peer");
    CHECK_THAT(o.error, Catch::Contains("exited with code 0 before it joined"));
    CHECK_THAT(o.error, Catch::Contains("1 of 4 ranks had not arrived: [2]"));
  }
}

TEST_CASE("join round: later generations are not confused by an earlier round's keys", "[join][round]") {
  MemoryStore store;
  // Generation 0 completes: every arrival key, group key, counter and the release are there.
  check_complete(exchange(store, upto(5), 5, 0, 100), 5, 100);
  // Generation 1 without rank 2: it must not pass on generation 0's keys, and names rank 2.
  for (const auto& o : exchange(store, {0, 1, 3, 4}, 5, 1, 200, 300ms)) {
    INFO(o.error);
    CHECK(o.kind == "timeout");
    CHECK_THAT(o.error, Catch::Contains("never arrived: [2]"));
  }
  // Generation 2 after that partial round: everyone, with the new pids (not 100+ or 200+).
  check_complete(exchange(store, upto(5), 5, 2, 300), 5, 300);
  // A generation used a second time fails at once, saying so, instead of returning the old infos.
  const auto again = exchange(store, {0}, 5, 0, 400, 2s);
  INFO(again[0].error);
  CHECK(again[0].kind == "store");
  CHECK_THAT(again[0].error, Catch::Contains("used by an earlier round"));
}
