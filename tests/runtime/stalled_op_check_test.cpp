// The stalled-op check (process_group/stalled_op_check.h), ranks as threads over an in-process
// store: a verdict only from ops with the same number that differ, from whichever rank looks,
// while the issuing threads go on recording (TSan runs this file with test_runtime); and a
// check bounded by kStoreTimeout when a real tcp:// store host stops answering.
#include <signal.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "fastrun/tools/store_host/store_in_child_process.h"

using namespace fastrun;

namespace {
std::vector<float> g_buf(100);
OpDesc op(OpName name, std::size_t count, std::int64_t seq) {
  OpDesc d = op_desc(name, BufferView{g_buf.data(), count, DType::float32});
  d.seq = seq;
  return d;
}
// Whether every thread of `pid` is stopped (state T in /proc/PID/task/*/stat). kill(SIGSTOP)
// returns before the target stops: until it does, it may still answer a request.
bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');  // the name may hold spaces and parentheses
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'T') return false;
  }
  return !ec;
}
}  // namespace

TEST_CASE("stalled-op check: same ops give no verdict, different ones name both ranks' ops", "[group][debug]") {
  MemoryStore store;
  StalledOpCheck a(store, 0, 2, {0, 1}, "world"), b(store, 1, 2, {0, 1}, "world");
  for (std::int64_t s = 1; s <= 40; ++s) {  // more than the ring holds
    a.record(op("all_reduce", 10, s));
    b.record(op("all_reduce", 10, s));
  }
  CHECK(!a.check());  // b has published nothing yet: no verdict
  CHECK(!b.check());
  CHECK(!a.check());
  a.record(op("all_reduce", 100, 41));
  b.record(op("broadcast", 100, 41).with_root(0));
  b.record(op("barrier", 0, 42));  // a rank that went on: its op #41 is still in its ring
  CHECK(!a.check());  // b's published ring predates op #41
  const auto from_b = b.check();
  REQUIRE(from_b);
  CHECK_THAT(*from_b,
             Catch::StartsWith("op #41 on group 'world': rank 0 called all_reduce(float32 x 100), rank 1 "
                               "called broadcast(float32 x 100, root 0) (found out of step when the op stalled"));
  const auto from_a = a.check();
  REQUIRE(from_a);
  CHECK(*from_a == *from_b);
}

TEST_CASE("stalled-op check: checks on waiting threads race with recording safely", "[group][debug]") {
  MemoryStore store;
  StalledOpCheck a(store, 0, 2, {4, 7}, "sub"), b(store, 1, 2, {4, 7}, "sub");
  std::atomic<bool> stop{false};
  std::atomic<int> verdicts{0};
  std::thread checker([&] {
    while (!stop.load()) verdicts += a.check().has_value() + b.check().has_value();
  });
  for (std::int64_t s = 1; s <= 2000; ++s) {
    a.record(op("all_reduce", 10, s));
    b.record(op("all_reduce", 10, s));
  }
  stop = true;
  checker.join();
  CHECK(verdicts == 0);
  b.record(op("all_reduce", 11, 2001));
  a.record(op("all_reduce", 10, 2001));
  CHECK(!a.check());  // b published before its op #2001
  const auto m = b.check();
  REQUIRE(m);
  CHECK_THAT(*m, Catch::StartsWith("op #2001 on group 'sub': rank 4 called all_reduce(float32 x 10), rank 7 called "
                                   "all_reduce(float32 x 11)"));
}

// The store's host stops answering (SIGSTOP: its connections stay open, nothing replies): a
// check gives no verdict after kStoreTimeout, not after the group store's own timeout (here 60 s),
// which would hold nccl's watchdog thread that long. The store is what a group holds: a prefix
// over a client handle, cloned by the check.
TEST_CASE("stalled-op check: a store host that stops answering holds a check for kStoreTimeout, not the store's timeout",
          "[group][debug]") {
  using namespace std::chrono_literals;
  StoreOptions o;
  o.token = "stall-check";
  o.timeout = 60s;
  tools::StoreInChildProcess host([&] { return host_store("tcp://127.0.0.1:0", o); }, o.timeout);
  PrefixStore group("pg/world", host.connect());
  StalledOpCheck check(group, 0, 2, {0, 1}, "world");
  check.record(op("all_reduce", 10, 1));
  CHECK(!check.check());  // answered: rank 1 has published nothing, so no verdict
  REQUIRE(::kill(host.pid(), SIGSTOP) == 0);
  for (int i = 0; i < 500 && !all_threads_stopped(host.pid()); ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(all_threads_stopped(host.pid()));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(!check.check());
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= StalledOpCheck::kStoreTimeout - 50ms);  // it did wait for a reply that never came
  CHECK(took < StalledOpCheck::kStoreTimeout + 5s);
}  // the host is woken and ended
