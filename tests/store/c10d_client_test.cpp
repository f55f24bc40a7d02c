// fastrun's c10d:// client (runtime/store/c10d/) against a REAL torch.distributed.TCPStore
// server (Debian's python3-torch 1.13, test_support/torch_python.h); the contract cases run in
// the conformance suite (c10d_conformance_test.cpp). Here: what is c10d-specific.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "test_support/silent_listener.h"
#include "test_support/skip.h"
#include "test_support/torch_python.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

// Runs `code` in /usr/bin/python3 with `store` bound to a TCPStore client of `port`; its exit status.
int run_python_client(int port, const std::string& code) {
  const std::string script = "import datetime, sys\nimport torch.distributed as d\n"
                             "store = d.TCPStore('127.0.0.1', " + std::to_string(port) +
                             ", is_master=False, timeout=datetime.timedelta(seconds=30))\n" + code;
  const std::string cmd = std::string(test::torch_python()) + " -c \"$FASTRUN_TEST_SCRIPT\"";
  ::setenv("FASTRUN_TEST_SCRIPT", script.c_str(), 1);
  const int status = std::system(cmd.c_str());
  ::unsetenv("FASTRUN_TEST_SCRIPT");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("c10d store: keys and counters are shared with Python's TCPStore, both ways", "[store][c10d]") {
  if (!test::torch_python_available()) return test::skip_case(test::no_torch_reason());
  test::TorchStoreServer server;
  auto s = server.connect();
  s->set("from-cpp", to_bytes("hello"));
  s->add("counter", 5);
  PrefixStore job("fastrun/job", s->clone());
  job.set("k", to_bytes("prefixed"));
  CHECK(run_python_client(server.port(),
                          "assert store.get('from-cpp') == b'hello'\n"
                          "assert store.add('counter', 2) == 7\n"
                          "assert store.get('fastrun/job/k') == b'prefixed'\n"
                          "store.set('from-python', b'\\x00\\xffbytes')\n"
                          "assert store.compare_set('cas', '', 'first') == b'first'\n") == 0);
  CHECK(s->get("from-python", 5s) == Bytes{0x00, 0xff, 'b', 'y', 't', 'e', 's'});
  CHECK(s->add("counter", 0) == 7);
  CHECK(to_string(s->compare_set("cas", to_bytes("first"), to_bytes("second"))) == "second");
}

TEST_CASE("c10d store: a wait that times out names the missing keys, and the client goes on", "[store][c10d]") {
  if (!test::torch_python_available()) return test::skip_case(test::no_torch_reason());
  test::TorchStoreServer server;
  auto s = server.connect();
  s->set("here", to_bytes("1"));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(s->wait({"here", "absent"}, 300ms), TimeoutError);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK_THROWS_WITH(s->get("absent", 50ms),
                    Catch::Contains("c10d://127.0.0.1:") && Catch::Contains("[absent]") &&
                        Catch::Contains("1 of 1 missing"));
  // The 1.x protocol cannot cancel a wait: the client reconnected, and a late set does not
  // confuse a later request with a stale STOP_WAITING.
  auto other = s->clone();
  other->set("absent", to_bytes("now"));
  CHECK(s->add("n", 1) == 1);
  CHECK(to_string(s->get("absent", 1s)) == "now");
}

TEST_CASE("c10d store: a server that does not speak c10d is refused, within the timeout", "[store][c10d]") {
  test::SilentListener silent;  // connect() completes from the backlog, the probe gets nothing
  StoreOptions o;
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(connect_store("c10d://127.0.0.1:" + std::to_string(silent.port()), o),
                    Catch::Contains("does not answer as a c10d TCPStore of torch 1.x") &&
                        Catch::Contains("torch 2.x"));
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
