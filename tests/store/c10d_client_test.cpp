// fastrun's c10d:// client (runtime/store/c10d/) against REAL torch.distributed.TCPStore
// servers (test_support/torch_python.h): torch 1.13's (Debian's python3-torch) and torch 2.x's
// libuv and legacy ones (tools/install-torch2.sh's venv). The contract cases run in the
// conformance suite (c10d_conformance_test.cpp). Here: what is c10d-specific, each case once
// per server (C10D_CASE), so that an absent server shows as its own skipped case.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/c10d/c10d_client.h"
#include "fastrun/runtime/store/c10d/c10d_protocol.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "test_support/silent_listener.h"
#include "test_support/skip.h"
#include "test_support/torch_python.h"

using namespace fastrun;
using namespace std::chrono_literals;
using test::TorchServer;

namespace {

// Runs `code` in the server's python with `store` bound to a TCPStore client of `port`; its
// exit status. The client is of the server's torch: each version speaks only its own protocol.
int run_python_client(TorchServer server, int port, const std::string& code) {
  const std::string script = "import datetime, sys\n" FASTRUN_TEST_QUIET_TORCH2 "import torch.distributed as d\n"
                             "store = d.TCPStore('127.0.0.1', " + std::to_string(port) +
                             ", is_master=False, timeout=datetime.timedelta(seconds=30))\n" + code;
  const std::string cmd = std::string(test::server_python(server)) + " -c \"$FASTRUN_TEST_SCRIPT\"";
  ::setenv("FASTRUN_TEST_SCRIPT", script.c_str(), 1);
  const int status = std::system(cmd.c_str());
  ::unsetenv("FASTRUN_TEST_SCRIPT");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

c10d_wire::Dialect dialect_of(TorchServer s) {
  return s == TorchServer::torch1 ? c10d_wire::Dialect::torch1 : c10d_wire::Dialect::torch2;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Defines the case `title` once per server, each running body(TorchServer) or skipping.
#define C10D_CASE_FOR(title, body, server, label)                                                        \
  TEST_CASE("c10d store (" label "): " title, "[store][c10d]") {                                         \
    if (!test::server_available(server)) return test::skip_case(test::no_server_reason(server));       \
    body(server);                                                                                        \
  }
#define C10D_CASE(title, body)                                                     \
  C10D_CASE_FOR(title, body, TorchServer::torch1, "torch 1.13")                    \
  C10D_CASE_FOR(title, body, TorchServer::torch2_libuv, "torch 2.x libuv")         \
  C10D_CASE_FOR(title, body, TorchServer::torch2_legacy, "torch 2.x legacy")

namespace {

// The dialect is found in one round trip or two (1.x: a hang-up, then a CHECK), not by a
// timeout: connecting and a first op take milliseconds. The figure is printed for
// docs/torchrun.md (build/tests/store/test_store "c10d store*connect finds*" | grep "connect + set").
void finds_the_dialect_at_once(TorchServer server) {
  test::TorchStoreServer hosted(server);
  const auto t0 = std::chrono::steady_clock::now();
  auto s = hosted.connect();
  s->set("k", to_bytes("v"));
  CHECK(to_string(s->get("k", 1s)) == "v");
  const double ms = ms_since(t0);
  CHECK(dynamic_cast<c10d_store::Client&>(*s).dialect() == dialect_of(server));
  CHECK(ms < 3000);  // the old probe waited 10 s for an answer a libuv server never gives
  WARN(test::server_name(server) << ": c10d connect + set + get: " << ms << " ms");
  // Later connections reuse the dialect (no probe): a clone works at once too.
  auto c = s->clone();
  CHECK(to_string(c->get("k", 1s)) == "v");
  CHECK(dynamic_cast<c10d_store::Client&>(*c).dialect() == dialect_of(server));
}
C10D_CASE("connect finds the server's protocol in milliseconds", finds_the_dialect_at_once)

void shared_with_python(TorchServer server) {
  test::TorchStoreServer hosted(server);
  auto s = hosted.connect();
  s->set("from-cpp", to_bytes("hello"));
  s->add("counter", 5);
  PrefixStore job("fastrun/job", s->clone());
  job.set("k", to_bytes("prefixed"));
  CHECK(run_python_client(server, hosted.port(),
                          "assert store.get('from-cpp') == b'hello'\n"
                          "assert store.add('counter', 2) == 7\n"
                          "assert store.get('fastrun/job/k') == b'prefixed'\n"
                          "store.set('from-python', b'\\x00\\xffbytes')\n"
                          "assert store.compare_set('cas', '', 'first') == b'first'\n") == 0);
  CHECK(s->get("from-python", 5s) == Bytes{0x00, 0xff, 'b', 'y', 't', 'e', 's'});
  CHECK(s->add("counter", 0) == 7);
  CHECK(to_string(s->compare_set("cas", to_bytes("first"), to_bytes("second"))) == "second");
}
C10D_CASE("keys and counters are shared with Python's TCPStore, both ways", shared_with_python)

void wait_timeout_then_go_on(TorchServer server) {
  test::TorchStoreServer hosted(server);
  auto s = hosted.connect();
  s->set("here", to_bytes("1"));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(s->wait({"here", "absent"}, 300ms), TimeoutError);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK_THROWS_WITH(s->get("absent", 50ms),
                    Catch::Contains("c10d://127.0.0.1:") && Catch::Contains("[absent]") &&
                        Catch::Contains("1 of 1 missing"));
  // The abandoned WAIT (cancelled in 2.x, its connection dropped in 1.x) leaves no stale
  // STOP_WAITING for a later request when the key comes after all.
  auto other = s->clone();
  other->set("absent", to_bytes("now"));
  CHECK(s->add("n", 1) == 1);
  CHECK(to_string(s->get("absent", 1s)) == "now");
  // A key set by compare_set (which wakes no WAIT) is found by the side connection's check.
  std::thread setter([&other] {
    std::this_thread::sleep_for(100ms);
    other->compare_set("cas", {}, to_bytes("x"));
  });
  CHECK(to_string(s->get("cas", 10s)) == "x");
  setter.join();
  CHECK(s->add("n", 1) == 2);
}
C10D_CASE("a wait that times out names the missing keys, and the client goes on", wait_timeout_then_go_on)

void batched(TorchServer server) {
  test::TorchStoreServer hosted(server);
  auto s = hosted.connect();
  auto& c = dynamic_cast<c10d_store::Client&>(*s);
  c.multi_set({"a", "b", "c"}, {to_bytes("1"), {}, to_bytes("three")});
  CHECK(c.multi_get({"c", "a", "b"}, 1s) == std::vector<Bytes>{to_bytes("three"), to_bytes("1"), {}});
  CHECK(c.multi_get({}, 1s).empty());
  CHECK_THROWS_WITH(c.multi_get({"a", "absent"}, 200ms), Catch::Contains("[absent]") && Catch::Contains("1 of 2"));
  CHECK(c.add("n", 1) == 1);  // the client goes on
  CHECK(run_python_client(server, hosted.port(), "assert store.get('c') == b'three'\n") == 0);
}
C10D_CASE("multi_set and multi_get keep the order, and wait for every key", batched)

// torch 2.x's libuv server refuses values over 8 MiB by closing the connection; the legacy one
// takes them (the conformance suite sets 16 MiB there).
TEST_CASE("c10d store (torch 2.x libuv): a value over 8 MiB fails in its set, with the reason", "[store][c10d]") {
  if (!test::torch2_python_available()) return test::skip_case(test::no_torch2_reason());
  test::TorchStoreServer hosted(TorchServer::torch2_libuv);
  auto s = hosted.connect();
  CHECK_THROWS_WITH(s->set("big", Bytes(c10d_wire::kLibuvMaxValue + 1)),
                    Catch::Contains("SET failed") && Catch::Contains("8 MiB") &&
                        Catch::Contains("use_libuv=False"));
  s->set("small", Bytes(c10d_wire::kLibuvMaxValue));  // the next call reconnects
  CHECK(s->get("small", 5s).size() == c10d_wire::kLibuvMaxValue);
}

}  // namespace

TEST_CASE("c10d store: the torch 2.x hello is an impossible request to a torch 1.x server", "[store][c10d]") {
  // A 1.x server reads byte 0 as SET, then the next 8 bytes as the key's length: that length
  // must be one no std::vector can hold, so the server fails without allocating or reading.
  const auto hello = c10d_wire::torch2_hello();
  REQUIRE(hello.size() == 12);  // whole 32-bit words: an early 2.x server waits for no rest of one
  CHECK(hello[0] == 0);
  std::uint64_t length = 0;
  std::memcpy(&length, hello.data() + 1, sizeof length);
  CHECK(length > static_cast<std::uint64_t>(PTRDIFF_MAX));
  CHECK(c10d_wire::command_byte(c10d_wire::Dialect::torch1, c10d_wire::Command::check) == 4);
  CHECK(c10d_wire::command_byte(c10d_wire::Dialect::torch2, c10d_wire::Command::check) == 5);
  CHECK(c10d_wire::command_byte(c10d_wire::Dialect::torch2, c10d_wire::Command::cancel_wait) == 12);
  CHECK_THROWS_AS(c10d_wire::command_byte(c10d_wire::Dialect::torch1, c10d_wire::Command::multi_get),
                  std::logic_error);
}

TEST_CASE("c10d store: a server that does not speak c10d is refused, within the timeout", "[store][c10d]") {
  test::SilentListener silent;  // connect() completes from the backlog, the probe gets nothing
  StoreOptions o;
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(connect_store("c10d://127.0.0.1:" + std::to_string(silent.port()), o),
                    Catch::Contains("does not answer as a c10d TCPStore") && Catch::Contains("VALIDATE + PING") &&
                        Catch::Contains("torch 1.x"));
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  // fastrun's own tcp:// server is not a c10d store either.
  auto hosted = host_store("tcp://127.0.0.1:0");
  const auto port = hosted->address().substr(hosted->address().rfind(':') + 1);
  CHECK_THROWS_AS(connect_store("c10d://127.0.0.1:" + port, o), StoreError);
}

TEST_CASE("c10d store: address forms, and fastrun connects to c10d stores but does not host them", "[store][c10d][address]") {
  const auto a = parse_store_address("c10d://node0:29500");
  CHECK(a.kind == StoreAddress::Kind::c10d);
  CHECK(a.name == "node0");
  CHECK(a.port == 29500);
  CHECK(a.to_string() == "c10d://node0:29500");
  CHECK(parse_store_address("c10d://[::1]:29500").to_string() == "c10d://[::1]:29500");
  CHECK_THROWS_WITH(parse_store_address("c10d://node0"), Catch::Contains("port is missing") &&
                                                             Catch::Contains("c10d://HOST:PORT"));
  CHECK_THROWS_AS(host_store("c10d://127.0.0.1:0"), ConfigError);
  CHECK_THROWS_WITH(host_store("c10d://127.0.0.1:0"), Catch::Contains("does not host") && Catch::Contains("tcp://"));
  CHECK_THROWS_WITH(connect_store("c10d://127.0.0.1:0"), Catch::Contains("needs its port"));
}
