// tcp:// store: semantics, limits, authentication and addresses, with the server in this
// process and real sockets on 127.0.0.1. Real-process cases: tcp_process_test.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/tcp/client.h"
#include "fastrun/runtime/store/tcp/hosted.h"
#include "tcp_test_support.h"
#include "test_support/asleep.h"
#include "test_support/free_port.h"
#include "test_support/scoped_env.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

StoreOptions opts(std::string token = "", Duration timeout = 10s) {
  StoreOptions o;
  o.token = std::move(token);
  o.timeout = timeout;
  return o;
}

std::unique_ptr<tcp_store::HostedTcpStore> host(const std::string& token = "") {
  auto h = host_store("tcp://127.0.0.1:0", opts(token));
  return std::unique_ptr<tcp_store::HostedTcpStore>(static_cast<tcp_store::HostedTcpStore*>(h.release()));
}

}  // namespace

TEST_CASE("tcp store: port 0 binds a free port and publishes it", "[store][tcp]") {
  auto h = host();
  CHECK(h->port() != 0);
  CHECK(h->address() == fmt::format("tcp://127.0.0.1:{}", h->port()));
  CHECK(h->token().size() == 64);  // random: 32 bytes as hex
  auto other = host();
  CHECK(other->port() != h->port());
  CHECK(other->token() != h->token());
}

TEST_CASE("tcp store: basic semantics", "[store][tcp]") {
  auto h = host();
  auto s = h->connect();
  s->set("a", to_bytes("1"));
  CHECK(to_string(s->get("a", 1s)) == "1");
  CHECK(s->add("n", 5) == 5);
  CHECK(s->add("n", -2) == 3);
  CHECK(to_string(s->get("n", 1s)) == "3");  // ASCII decimal
  s->set("text", to_bytes("x"));
  CHECK_THROWS_WITH(s->add("text", 1), Catch::Contains("not a decimal"));
  // compare_set: the c10d rules.
  CHECK(to_string(s->compare_set("c", {}, to_bytes("v1"))) == "v1");            // absent, expected empty
  CHECK(to_string(s->compare_set("d", to_bytes("e"), to_bytes("x"))) == "e");   // absent, expected given
  CHECK_FALSE(s->check({"d"}));
  CHECK(to_string(s->compare_set("c", to_bytes("v1"), to_bytes("v2"))) == "v2");  // equal: swapped
  CHECK(to_string(s->compare_set("c", to_bytes("zz"), to_bytes("v3"))) == "v2");  // differs: current
  CHECK(s->check({"a", "c"}));
  CHECK_FALSE(s->check({"a", "missing"}));
  const auto keys = s->num_keys();
  CHECK(s->delete_key("a"));
  CHECK_FALSE(s->delete_key("a"));
  CHECK(s->num_keys() == keys - 1);
  // 0 bytes and 16 MiB values.
  s->set("empty", {});
  CHECK(s->get("empty", 1s).empty());
  Bytes big(16u << 20);
  for (std::size_t i = 0; i < 4099; ++i) big[i] = static_cast<std::uint8_t>(i * 131 + 7);
  for (std::size_t filled = 4099; filled < big.size(); filled *= 2)  // cheap under sanitizers
    std::memcpy(big.data() + filled, big.data(), std::min(filled, big.size() - filled));
  s->set("big", big);
  CHECK(s->get("big", 5s) == big);
  // A clone is its own connection on the same store.
  auto c = s->clone();
  CHECK(c->get("big", 5s) == big);
  CHECK(c->describe() == h->address());
}

TEST_CASE("tcp store: wait timeouts list the missing keys", "[store][tcp]") {
  auto h = host();
  auto s = h->connect();
  s->set("here", to_bytes("x"));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s->wait({"here", "rank/1", "rank/2"}, 200ms);
    FAIL("wait did not time out");
  } catch (const TimeoutError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("rank/1") && Catch::Contains("rank/2") && Catch::Contains("2 of 3 missing"));
    CHECK_THAT(m, !Catch::Contains("here,"));
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 200ms);
  CHECK(took < 5s);
  CHECK_THROWS_AS(s->get("never", 100ms), TimeoutError);
  // The connection is still in step after cancelled waits.
  s->set("after", to_bytes("ok"));
  CHECK(to_string(s->get("after", 1s)) == "ok");
}

// Over separate connections: the server must push the reply when another client writes.
TEST_CASE("tcp store: waiters are woken by set, add and compare_set", "[store][tcp]") {
  auto h = host();
  auto waiter = h->connect();
  auto writer = h->connect();
  for (int how = 0; how < 3; ++how) {
    CAPTURE(how);
    const std::string key = "k" + std::to_string(how);
    const auto r = test::measure_wake([&] { waiter->get(key, test::kWaiterTimeout); },
                                      [&] {
                                        if (how == 0) writer->set(key, to_bytes("v"));
                                        if (how == 1) writer->add(key, 1);
                                        if (how == 2) writer->compare_set(key, {}, to_bytes("v"));
                                      });
    CHECK(r.asleep);
    CHECK(r.error.empty());
    CHECK(r.latency < test::kWakeBound);
  }
  store_barrier(*waiter, "solo", 1, 1s);
}

TEST_CASE("tcp store: a wrong or missing token is rejected", "[store][tcp]") {
  auto h = host("the-right-token");
  CHECK(h->token() == "the-right-token");
  const auto addr = h->address();
  try {
    connect_store(addr, opts("a-wrong-token", 2s));
    FAIL("connected with a wrong token");
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains("authentication failed") && Catch::Contains(addr));
  }
  {
    test::ScopedEnv unset("FASTRUN_STORE_TOKEN", nullptr);
    CHECK_THROWS_WITH(connect_store(addr, opts("", 2s)), Catch::Contains("authentication failed"));
  }
  auto ok = connect_store(addr, opts("the-right-token", 2s));
  ok->set("k", to_bytes("v"));
  CHECK(h->stats().auth_failures == 2);
}

// The whole token must match, not a prefix of either: a compare that stops at the end of the
// secret would let in any token that starts with it, and one that stops at the end of the
// presented token would let in the secret's first letters (or an empty token).
TEST_CASE("tcp store: a token that extends or truncates the secret is rejected", "[store][tcp]") {
  auto h = host("the-right-token");
  const auto addr = h->address();
  for (const std::string token : {"the-right-token-and-more", "the-right-token\n",
                                  "the-right-toke", "t"}) {
    INFO("token: " << token);
    try {
      connect_store(addr, opts(token, 2s));
      FAIL("connected with a token that is not the secret");
    } catch (const StoreError& e) {
      CHECK_THAT(e.what(), Catch::Contains("authentication failed") && Catch::Contains(addr));
    }
  }
  CHECK(h->stats().auth_failures == 4);
  connect_store(addr, opts("the-right-token", 2s))->set("k", to_bytes("v"));
  CHECK(h->stats().auth_failures == 4);
}

TEST_CASE("tcp store: bad addresses and unreachable hosts give clear errors", "[store][tcp]") {
  CHECK_THROWS_AS(connect_store("tcp://host"), ConfigError);
  CHECK_THROWS_AS(connect_store("tcp://host:99999"), ConfigError);
  CHECK_THROWS_AS(host_store("tcp://host:99999"), ConfigError);
  CHECK_THROWS_WITH(connect_store("tcp://127.0.0.1:0", opts("t", 1s)), Catch::Contains("PORT in 1..65535"));
  // Nobody listens: refused until the timeout, then an error naming the address.
  const auto port = test::free_port();
  const auto addr = fmt::format("tcp://127.0.0.1:{}", port);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    connect_store(addr, opts("t", 300ms));
    FAIL("connected to nothing");
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains(addr) && Catch::Contains("refused"));
  }
  CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
  CHECK_THROWS_AS(connect_store("tcp://no-such-host.invalid:1234", opts("t", 300ms)), ConfigError);
  // Listening on a port that is taken, or on a host that does not resolve, is the caller's input:
  // a ConfigError at host time, naming the port or the host.
  auto h = host();
  const auto taken = h->address().substr(h->address().rfind(':') + 1);
  CHECK_THROWS_AS(host_store(h->address()), ConfigError);
  CHECK_THROWS_WITH(host_store(h->address()), Catch::Contains("port " + taken + " is in use on this host"));
  CHECK_THROWS_AS(host_store("tcp://no-such-host.invalid:0"), ConfigError);
  CHECK_THROWS_WITH(host_store("tcp://no-such-host.invalid:0"), Catch::Contains("'no-such-host.invalid'") &&
                                                                   Catch::Contains("does not resolve"));
}

TEST_CASE("tcp store: a client may start before the server", "[store][tcp]") {
  const auto port = test::free_port();
  const auto addr = fmt::format("tcp://127.0.0.1:{}", port);
  std::unique_ptr<HostedStore> h;
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    h = host_store(addr, opts("tok"));
  });
  auto s = connect_store(addr, opts("tok", 10s));  // retries with backoff until the host listens
  late.join();
  s->set("k", to_bytes("v"));
  CHECK(to_string(s->get("k", 1s)) == "v");
}

TEST_CASE("tcp store: oversized keys and values are refused with the limit", "[store][tcp]") {
  auto h = host();
  auto s = h->connect();
  CHECK_THROWS_WITH(s->set(std::string(9000, 'k'), {}), Catch::Contains("limit of 8192"));
  CHECK_THROWS_WITH(s->set("k", Bytes((64u << 20) + 1)), Catch::Contains("exceeds the limit"));
  s->set("still", to_bytes("fine"));
}

TEST_CASE("tcp store: garbage and abrupt disconnects leave other clients served", "[store][tcp]") {
  auto h = host();
  auto good = h->connect();
  auto writer = h->connect();
  std::thread t([&] {
    // While `good` waits: a garbage sender, a half frame then a reset, a 4 GiB header, and a
    // client that never says hello.
    {
      test::RawConnection raw(h->port());
      REQUIRE(raw.ok());
      const char noise[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      raw.send(noise, sizeof noise);
      CHECK(raw.wait_closed(5s));
    }
    {
      test::RawConnection raw(h->port());
      REQUIRE(raw.ok());
      const std::uint8_t half[] = {100, 0, 0, 0, 1, 0x52};
      raw.send(half, sizeof half);
      std::this_thread::sleep_for(20ms);
      raw.reset();
    }
    {
      test::RawConnection raw(h->port());
      const std::uint8_t huge[] = {0xff, 0xff, 0xff, 0xff};
      raw.send(huge, sizeof huge);
      CHECK(raw.wait_closed(5s));
    }
    std::this_thread::sleep_for(50ms);
    writer->set("go", to_bytes("1"));
  });
  CHECK(to_string(good->get("go", 10s)) == "1");
  t.join();
  good->set("after", to_bytes("x"));
  CHECK(writer->check({"after"}));
  CHECK(h->stats().dropped >= 3);
}

TEST_CASE("tcp store: a waiter learns at once that the server went away", "[store][tcp]") {
  auto h = host();
  auto s = h->connect();
  std::thread stop([&] {
    std::this_thread::sleep_for(100ms);
    h.reset();  // HostedStore destructor: stops and joins the server, closes every connection
  });
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(s->wait({"never"}, 20s), Catch::Contains("connection lost") && Catch::Contains("wait"));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  stop.join();
  // The next call tries to reconnect (nobody listens any more) and says so.
  s->set_timeout(200ms);
  CHECK_THROWS_WITH(s->num_keys(), Catch::Contains("could not connect"));
}
