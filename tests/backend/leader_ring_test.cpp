// The hier backend's leaders' ring (runtime/backend/hier/leader_ring.h): real TCP connections on
// 127.0.0.1 between leaders on threads, set up through an in-process store.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/backend/hier/leader_ring.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/tcp/socket.h"

using namespace std::chrono_literals;
using fastrun::hier::LeaderRing;
using fastrun::hier::RingPeers;

namespace {

using Ring = std::unique_ptr<LeaderRing>;

RingPeers peers_of(int index, int count) {
  RingPeers p{index, {}, "rank " + std::to_string(10 * index) + " in group 'g' (hier)"};
  for (int k = 0; k < count; ++k) p.global_rank.push_back(10 * k);  // global ranks 0, 10, 20, ...
  return p;
}

// `count` leaders set up together on threads.
std::vector<Ring> make_rings(fastrun::Store& store, int count, LeaderRing::Watch watch = {}) {
  std::vector<std::future<Ring>> made;
  for (int k = 0; k < count; ++k)
    made.push_back(std::async(std::launch::async, [&store, k, count, watch] {
      auto mine = store.clone();
      return std::make_unique<LeaderRing>(*mine, "127.0.0.1", peers_of(k, count), 10s, watch);
    }));
  std::vector<Ring> rings;
  for (auto& f : made) rings.push_back(f.get());
  return rings;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("leader ring: messages go round three leaders, passed on as they arrive", "[hier][ring]") {
  fastrun::MemoryStore store;
  auto rings = make_rings(store, 3);
  // Leader 0 sends three chunks (one larger than a socket buffer, one empty); leader 1 passes
  // each on as it arrives; leader 2 sends the first one back to leader 0.
  const auto a = pattern(100'000, 1), b = pattern(3'000'000, 2);
  std::vector<std::uint8_t> a1(a.size()), b1(b.size()), a2(a.size()), b2(b.size()), back(a.size());
  const fastrun::Deadline deadline(20s);
  std::thread t1([&] {
    rings[1]->begin(1, "all_reduce #1");
    rings[1]->expect(0, 0, a1.data(), a1.size());
    rings[1]->expect(0, 1, b1.data(), b1.size());
    rings[1]->expect(0, 2, nullptr, 0);
    for (std::uint32_t c = 0; c < 3; ++c) {
      rings[1]->wait_arrived(0, c, deadline);
      if (c == 0) rings[1]->send(0, 0, a1.data(), a1.size());
      if (c == 1) rings[1]->send(0, 1, b1.data(), b1.size());
    }
    rings[1]->flush(deadline);
  });
  std::thread t2([&] {
    rings[2]->begin(1, "all_reduce #1");
    rings[2]->expect(0, 0, a2.data(), a2.size());
    rings[2]->expect(0, 1, b2.data(), b2.size());
    rings[2]->wait_arrived(0, 0, deadline);
    rings[2]->send(1, 0, a2.data(), a2.size());
    rings[2]->wait_arrived(0, 1, deadline);
    rings[2]->flush(deadline);
  });
  rings[0]->begin(1, "all_reduce #1");
  rings[0]->expect(1, 0, back.data(), back.size());
  rings[0]->send(0, 0, a.data(), a.size());
  rings[0]->send(0, 1, b.data(), b.size());
  rings[0]->send(0, 2, nullptr, 0);
  rings[0]->wait_arrived(1, 0, deadline);
  rings[0]->flush(deadline);
  t1.join();
  t2.join();
  CHECK(a1 == a);
  CHECK(b1 == b);
  CHECK(a2 == a);
  CHECK(b2 == b);
  CHECK(back == a);
}

TEST_CASE("leader ring: a message of the next op waits in the socket until that op begins", "[hier][ring]") {
  fastrun::MemoryStore store;
  auto rings = make_rings(store, 2);
  const fastrun::Deadline deadline(20s);
  const std::uint64_t first = 11, second = 22;
  std::uint64_t got_first = 0, got_second = 0;
  // Leader 0 runs op 1 and op 2 back to back; leader 1 is still in op 1 (it drives its socket
  // after op 1's message came) when op 2's message arrives.
  rings[0]->begin(1, "all_reduce #1");
  rings[0]->send(0, 0, &first, sizeof first);
  rings[0]->flush(deadline);
  rings[0]->begin(2, "all_reduce #2");
  rings[0]->send(0, 0, &second, sizeof second);
  rings[0]->flush(deadline);

  rings[1]->begin(1, "all_reduce #1");
  rings[1]->expect(0, 0, &got_first, sizeof got_first);
  rings[1]->wait_arrived(0, 0, deadline);
  for (int i = 0; i < 100; ++i) rings[1]->progress();  // op 2's header is read and left waiting
  CHECK(got_first == first);
  rings[1]->begin(2, "all_reduce #2");
  rings[1]->expect(0, 0, &got_second, sizeof got_second);
  rings[1]->wait_arrived(0, 0, deadline);
  CHECK(got_second == second);
}

TEST_CASE("leader ring: a message that does not fit what is expected names the sender", "[hier][ring]") {
  fastrun::MemoryStore store;
  auto rings = make_rings(store, 2);
  // Leader 0 sends 8 bytes as chunk `chunk` of op `sent_in`; leader 1, in op 3, expects chunk 0
  // of `expected` bytes. The ConfigError leader 1's wait ends with, or "(no error)".
  const auto received = [&](std::uint64_t sent_in, std::uint32_t chunk, std::size_t expected) {
    std::uint64_t value = 7, into[2] = {};
    rings[0]->begin(sent_in, "all_reduce #" + std::to_string(sent_in));
    rings[0]->send(0, chunk, &value, sizeof value);
    rings[1]->begin(3, "all_reduce #3");
    rings[1]->expect(0, 0, into, expected);
    std::string what = "(no error)";
    try {
      rings[1]->wait_arrived(0, 0, fastrun::Deadline(20s));
    } catch (const fastrun::ConfigError& e) {
      what = e.what();
    }
    return what;
  };
  SECTION("another size") {
    CHECK(received(3, 0, 16) ==
          "rank 10 in group 'g' (hier): all_reduce #3: the leaders are out of step: rank 0 (node 0's leader) sent "
          "chunk 0 (tag 0) of 8 bytes where this leader expects 16 (a call of another size or type?)");
  }
  SECTION("a chunk nobody expects") {
    CHECK_THAT(received(3, 5, 8), Catch::Contains("chunk 5 (tag 0, 8 bytes), which this leader does not expect"));
  }
  SECTION("an earlier op") {
    CHECK_THAT(received(2, 0, 8),
               Catch::Contains("sent a message of op #2 (chunk 0, tag 0) while this leader runs op #3"));
  }
}

TEST_CASE("leader ring: a leader that leaves after its last message is no error, one that leaves before it is named",
          "[hier][ring]") {
  fastrun::MemoryStore store;
  auto rings = make_rings(store, 2);
  const fastrun::Deadline deadline(20s);
  const std::uint64_t value = 42;
  std::uint64_t got = 0, more = 0;
  rings[0]->begin(1, "all_reduce #1");
  rings[0]->send(0, 0, &value, sizeof value);
  rings[0]->flush(deadline);
  rings[0].reset();  // its program ends: both its connections close
  rings[1]->begin(1, "all_reduce #1");
  rings[1]->expect(0, 0, &got, sizeof got);
  rings[1]->expect(0, 1, &more, sizeof more);
  rings[1]->wait_arrived(0, 0, deadline);  // read before the end of the stream: no error
  CHECK(got == value);
  const std::string what = message_of([&] { rings[1]->wait_arrived(0, 1, deadline); });
  CHECK(what ==
        "rank 10 in group 'g' (hier): all_reduce #1 failed: rank 0 (node 0's leader) is gone from the leaders' "
        "ring (its connection closed)");
}

TEST_CASE("leader ring: a wait ends at its deadline, on a recorded failure, on a verdict and on cancel",
          "[hier][ring]") {
  fastrun::MemoryStore store;
  std::uint64_t into = 0;
  const auto waiting = [&](LeaderRing& ring) {
    ring.begin(4, "broadcast #4");
    ring.expect(2, 0, &into, sizeof into);
  };
  SECTION("the deadline names the leader that did not send") {
    auto rings = make_rings(store, 2);
    waiting(*rings[1]);
    const auto start = std::chrono::steady_clock::now();
    std::string what;
    try {
      rings[1]->wait_arrived(2, 0, fastrun::Deadline(300ms));
    } catch (const fastrun::TimeoutError& e) {
      what = e.what();
    }
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK_THAT(what, Catch::StartsWith("rank 10 in group 'g' (hier): broadcast #4 timed out after"));
    CHECK_THAT(what, Catch::Contains("chunk 0 (tag 2) from rank 0 (node 0's leader)"));
  }
  SECTION("the job's recorded failure") {
    auto rings = make_rings(store, 2, {[] { return std::optional<std::string>("rank 5: exited with code 3"); }, {}});
    waiting(*rings[1]);
    std::string what;
    try {
      rings[1]->wait_arrived(2, 0, fastrun::Deadline(20s));
    } catch (const fastrun::PeerFailure& e) {
      what = e.what();
    }
    CHECK_THAT(what, Catch::Contains("broadcast #4: the job recorded a failure while waiting for chunk 0 (tag 2) "
                                     "from rank 0 (node 0's leader) (\"rank 5: exited with code 3\")"));
  }
  SECTION("the mismatch check's verdict, from its first check on") {
    auto rings = make_rings(store, 2, {{}, [] { return std::optional<std::string>("op #4: rank 0 called x"); }});
    waiting(*rings[1]);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(rings[1]->wait_arrived(2, 0, fastrun::Deadline(20s)), "op #4: rank 0 called x");
    CHECK(std::chrono::steady_clock::now() - start >= fastrun::StalledOpCheck::kFirstCheck);
  }
  SECTION("cancel from another thread") {
    auto rings = make_rings(store, 2);
    waiting(*rings[1]);
    std::thread canceller([&] {
      std::this_thread::sleep_for(100ms);
      rings[1]->cancel();
    });
    CHECK_THROWS_AS(rings[1]->wait_arrived(2, 0, fastrun::Deadline(20s)), fastrun::PeerFailure);
    canceller.join();
  }
}

TEST_CASE("leader ring: set-up turns a stranger away and names a leader that never comes", "[hier][ring]") {
  fastrun::MemoryStore store;
  SECTION("a connection without the token is closed and the right one still taken") {
    auto leader1 = std::async(std::launch::async, [&] {
      auto mine = store.clone();
      return std::make_unique<LeaderRing>(*mine, "127.0.0.1", peers_of(1, 2), 10s, LeaderRing::Watch{});
    });
    // The stranger reads leader 1's address and connects first, with a wrong token.
    const std::string address = fastrun::to_string(store.get("ring/1", 10s));
    const auto first = address.find('\n'), second = address.find('\n', first + 1);
    auto stranger = fastrun::tcp_store::connect_with_retry(
        "127.0.0.1", static_cast<std::uint16_t>(std::stoul(address.substr(first + 1, second - first - 1))),
        fastrun::tcp_store::deadline_after(10s), "leader 1");
    const std::string wrong(68, 'x');
    REQUIRE(::send(stranger.fd(), wrong.data(), wrong.size(), MSG_NOSIGNAL) == 68);
    auto leader0 = std::make_unique<LeaderRing>(store, "127.0.0.1", peers_of(0, 2), 10s, LeaderRing::Watch{});
    auto ring1 = leader1.get();
    const std::uint64_t value = 9;
    std::uint64_t got = 0;
    leader0->begin(1, "all_reduce #1");
    leader0->send(0, 0, &value, sizeof value);
    ring1->begin(1, "all_reduce #1");
    ring1->expect(0, 0, &got, sizeof got);
    ring1->wait_arrived(0, 0, fastrun::Deadline(10s));
    CHECK(got == value);
  }
  SECTION("the previous leader never publishes") {
    std::string what;
    try {
      LeaderRing ring(store, "127.0.0.1", peers_of(1, 2), 300ms, LeaderRing::Watch{});
    } catch (const fastrun::TimeoutError& e) {
      what = e.what();
    }
    CHECK_THAT(what, Catch::StartsWith("rank 10 in group 'g' (hier): setting up the leaders' ring: rank 0 (node 0's "
                                       "leader) did not publish its address within 0.3 s"));
  }
}
