// tcp:// store with real processes: 1,024 concurrent connections and children that die
// mid-request (the 256-process rendezvous runs for tcp in multiprocess_test.cpp, through
// tcp_conformance_test.cpp). The server runs in this process; children are forked,
// connect with connect_store(address, token) like ranks do, and are always reaped.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/tcp/hosted.h"
#include "fastrun/tools/store_host/store_in_child_process.h"
#include "test_support/asleep.h"
#include "test_support/children.h"
#include "test_support/skip.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<tcp_store::HostedTcpStore> host_tcp_here() {
  StoreOptions o;
  o.timeout = 30s;
  auto h = host_store("tcp://127.0.0.1:0", o);
  return std::unique_ptr<tcp_store::HostedTcpStore>(static_cast<tcp_store::HostedTcpStore*>(h.release()));
}

std::unique_ptr<Store> child_connect(const HostedStore& h) {
  StoreOptions o;
  o.token = h.token();
  o.timeout = 30s;
  return connect_store(h.address(), o);
}

}  // namespace

TEST_CASE("tcp store: 1,024 concurrent client connections", "[store][tcp][process]") {
  constexpr int kChildren = 16;
  constexpr int kPerChild = 64;
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max < kChildren * kPerChild + 256) {
    test::skip_case(fmt::format("hard RLIMIT_NOFILE {} is too low for 1,024 connections", lim.rlim_max));
    return;
  }
  auto h = host_tcp_here();
  const auto t0 = std::chrono::steady_clock::now();
  test::Children children;
  for (int c = 0; c < kChildren; ++c) {
    children.spawn([&, c] {
      std::vector<std::unique_ptr<Store>> conns;
      for (int i = 0; i < kPerChild; ++i) {
        conns.push_back(child_connect(*h));
        conns.back()->set(fmt::format("c{}/{}", c, i), to_bytes(std::to_string(c * kPerChild + i)));
      }
      // Every child holds all its connections open until all 1,024 exist.
      store_barrier(*conns[0], "all-open", kChildren, 30s);
      for (int i = 0; i < kPerChild; ++i) {
        const int peer = (c + 1) % kChildren;  // read a neighbour's key over each connection
        const auto v = to_string(conns[static_cast<std::size_t>(i)]->get(fmt::format("c{}/{}", peer, i), 10s));
        if (v != std::to_string(peer * kPerChild + i)) return 1;
      }
      store_barrier(*conns[0], "all-read", kChildren, 30s);
      return 0;
    });
  }
  CHECK(children.reap(60s) == 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto stats = h->stats();
  CHECK(stats.peak_connections >= kChildren * kPerChild);
  CHECK(stats.dropped == 0);
  auto s = h->connect();
  CHECK(s->num_keys() >= kChildren * kPerChild);
  WARN("1,024 connections: " << secs << " s, peak " << stats.peak_connections);
}

TEST_CASE("tcp store: clients killed mid-request do not disturb the others", "[store][tcp][process]") {
  auto h = host_tcp_here();
  auto survivor = h->connect();
  test::Children children;
  // Children that die with SIGKILL while blocked in a wait, or while sending 16 MiB values: each
  // says when it is connected, and a waiter is seen asleep in its wait before the kill.
  for (int round = 0; round < 8; ++round) {
    CAPTURE(round);
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t pid = children.spawn([&, round] {
      auto s = child_connect(*h);
      const char connected = 1;
      if (::write(ready[1], &connected, 1) != 1) return 2;
      if (round % 2 == 0) s->wait({"never"}, 60s);
      Bytes big(16u << 20, 0x5a);
      for (int i = 0; i < 1000; ++i) s->set("big", big);
      return 0;
    });
    ::close(ready[1]);  // a child that dies before connecting closes the pipe: the read ends
    char connected = 0;
    CHECK(::read(ready[0], &connected, 1) == 1);
    ::close(ready[0]);
    if (round % 2 == 0) CHECK(test::wait_until_asleep(pid, pid, 5s));
    else std::this_thread::sleep_for(std::chrono::milliseconds(10 + 10 * round));  // mid-way through the sets
    ::kill(pid, SIGKILL);
  }
  for (const auto& st : children.wait_all(10s)) CHECK(st.signal == SIGKILL);  // none ended by itself
  // The server closed the dead clients' connections, and their "never" waits with them.
  for (int i = 0; i < 500 && h->stats().connections != 1; ++i) std::this_thread::sleep_for(10ms);
  CHECK(h->stats().connections == 1);  // the survivor's
  survivor->set("alive", to_bytes("yes"));
  CHECK(to_string(survivor->get("alive", 5s)) == "yes");
  std::vector<std::string> keys = {"alive"};
  CHECK(survivor->check(keys));
  // The "never" waits of the dead children were dropped with them: a wait on a fresh key by a
  // live client still works and the server stays responsive.
  survivor->set("never", {});
  CHECK(survivor->get("never", 1s).empty());
}

// The tree's helper that hosts a store in a forked process (fastrun-bench store, the conformance
// suite's real-process cases): a client reaches it with the token it relays, the process is gone
// once the helper is, and a host that throws is reported with its reason.
TEST_CASE("a store hosted in a child process serves clients, ends with its owner and reports a failure",
          "[store][tcp][process]") {
  pid_t pid = -1;
  {
    tools::StoreInChildProcess hosted(
        [] {
          StoreOptions o;
          o.timeout = 30s;
          return host_store("tcp://127.0.0.1:0", o);
        },
        30s);
    pid = hosted.pid();
    REQUIRE(pid > 0);
    CHECK(pid != ::getpid());
    auto s = hosted.connect();
    s->set("k", to_bytes("v"));
    CHECK(to_string(child_connect(hosted)->get("k", 5s)) == "v");
  }
  CHECK(::kill(pid, 0) == -1);  // reaped: no such process
  CHECK_THROWS_WITH(tools::StoreInChildProcess(
                        []() -> std::unique_ptr<HostedStore> { throw StoreError("no room for the store"); }, 1s),
                    "no room for the store");
}
