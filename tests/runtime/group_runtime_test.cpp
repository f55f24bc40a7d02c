// The group runtime (process_group/group_runtime.h) on its own, in one process with threads: where
// an op runs and in which order, the op numbers and label in messages, the one "unusable after a
// failure" rule, the job's failure record, and the caller's-memory contract of staged ops (a
// wait that gave up is never followed by an access to the caller's buffer; the TSan stage runs
// these cases too).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/op.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/memory_store.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

GroupSpec spec_of(std::shared_ptr<Store> failure_store = nullptr) {
  GroupSpec spec;
  spec.rank = 1;
  spec.size = 2;
  spec.global_ranks = {4, 5};
  spec.name = "g";
  spec.op_timeout = 5s;
  spec.failure_store = std::move(failure_store);
  return spec;
}

RuntimeConfig config_of(std::size_t async_from_bytes, bool stage = false, Duration release_grace = {}) {
  RuntimeConfig c;
  c.backend = "test";
  c.async_from_bytes = async_from_bytes;
  c.stage_up_to_bytes = stage ? 1024 : 0;
  c.release_grace = release_grace;
  return c;
}

// A latch one thread waits on (bounded, so a failing test cannot hang): the comm thread on the
// test, or the test on an op body that has started.
struct Gate {
  std::atomic<bool> open{false};
  void wait() const {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!open.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  }
};

}  // namespace

TEST_CASE("group runtime: small ops inline, large ones on the comm thread, never reordered", "[runtime][group_runtime]") {
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  Gate gate;
  GroupRuntime rt(spec_of(), config_of(100));
  auto record = [&](const OpContext& op) {
    std::lock_guard lock(mutex);
    order.push_back(op.seq);
  };
  auto small = rt.run("barrier", 10, record);
  CHECK(small->completed());  // ran inline
  auto large = rt.run("all_reduce", 100, [&](const OpContext& op) {
    gate.wait();
    record(op);
  });
  auto queued = rt.run("barrier", 10, record);  // small, but behind a queued op: queued too
  CHECK_FALSE(queued->completed());
  gate.open = true;
  queued->wait();
  CHECK(large->completed());
  large->wait();
  CHECK(order == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(rt.label() == "rank 5 in group 'g' (test)");
}

TEST_CASE("group runtime: a wait on an op not yet started runs it on the waiting thread, never out of order",
          "[runtime][group_runtime]") {
  RuntimeConfig config = config_of(100);
  config.waiter_runs_queued_op = true;
  GroupRuntime rt(spec_of(), config);
  std::mutex mutex;
  std::vector<std::uint64_t> order;
  std::vector<std::thread::id> ran_on;
  auto record = [&](const OpContext& op) {
    std::lock_guard lock(mutex);
    order.push_back(op.seq);
    ran_on.push_back(std::this_thread::get_id());
  };
  // Issued and waited at once (the OSU pattern): the comm thread is still waking when the wait
  // starts, so the waiter runs most of them; 200 tries make "none" impossible short of a bug.
  for (int i = 0; i < 200; ++i) rt.run("all_reduce", 100, record)->wait();
  // Issued back to back and waited in reverse (DDP's buckets): whoever runs them, in order.
  std::vector<WorkHandle> works;
  for (int i = 0; i < 50; ++i) works.push_back(rt.run("all_reduce", 100, record));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  std::lock_guard lock(mutex);
  REQUIRE(order.size() == 250);
  for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i + 1);
  CHECK(std::count(ran_on.begin(), ran_on.begin() + 200, std::this_thread::get_id()) > 0);
}

TEST_CASE("group runtime: after a failure every op is refused with one BackendError naming it", "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(0));
  auto w = rt.run("all_reduce", 8, [](const OpContext& op) { throw PeerFailure(op.what() + ": rank 4 died"); });
  CHECK_THROWS_AS(w->wait(), PeerFailure);
  try {
    rt.run("barrier", 0, [](const OpContext&) {});
    FAIL("an op on a failed group was accepted");
  } catch (const BackendError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("rank 5 in group 'g' (test): barrier refused: the group is unusable after an "
                                     "earlier failure: all_reduce #1: rank 4 died"));
  }
}

TEST_CASE("group runtime: a non-fastrun exception becomes a BackendError naming the op", "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(RuntimeConfig::kNever));
  auto w = rt.run("broadcast", 8, [](const OpContext&) { throw std::runtime_error("boom"); });
  CHECK(w->completed());
  CHECK_THROWS_WITH(w->wait(), Catch::Contains("rank 5 in group 'g' (test): broadcast #1 failed: boom"));
}

TEST_CASE("group runtime: the job's failure record fails a blocked wait, and the first writer wins", "[runtime][group_runtime]") {
  auto store = std::make_shared<MemoryStore>();
  Gate gate;  // outlives the runtime, whose destructor joins the thread that reads it
  GroupRuntime rt(spec_of(store), config_of(0));
  auto w = rt.run("all_reduce", 8, [&](const OpContext&) { gate.wait(); });
  store->set(kFailureKey, to_bytes("rank 4: injected"));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(w->wait(), Catch::Contains("all_reduce #1: aborted because a peer failed: rank 4: injected"));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK_THROWS_AS(rt.run("barrier", 0, [](const OpContext&) {}), BackendError);
  rt.health().publish("later reason");  // the first record stays
  CHECK(to_string(store->get(kFailureKey, 1s)) == "rank 4: injected");
  gate.open = true;
}

TEST_CASE("group runtime: staged ops copy in and write back, and never after a wait gave up", "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(0, /*stage=*/true));
  SECTION("a completed op writes its result back") {
    std::vector<float> v{1, 2, 3};
    auto w = rt.run("all_reduce", 12, {{view_of(v.data(), v.size()), OpBuffer::read_write}}, [&](const OpContext& op) {
      auto* staged = static_cast<float*>(op.buffer(0).data);
      CHECK(staged != v.data());
      for (int i = 0; i < 3; ++i) staged[i] *= 10;
    });
    w->wait();
    CHECK(v == std::vector<float>{10, 20, 30});
  }
  SECTION("a wait that gave up leaves the caller's buffer alone, and the caller may free it") {
    Gate gate;
    std::atomic<bool> ran{false};
    Gate started;  // opened by the op body
    auto v = std::make_unique<std::vector<float>>(std::vector<float>{1, 2, 3});
    auto w = rt.run("all_reduce", 12, {{view_of(v->data(), v->size()), OpBuffer::read_write}},
                    [&](const OpContext& op) {
                      started.open = true;
                      gate.wait();
                      auto* staged = static_cast<float*>(op.buffer(0).data);
                      for (int i = 0; i < 3; ++i) staged[i] = -1;  // op-owned memory only
                      ran = true;
                    });
    // Once the op runs (a wait that gives up while it is still queued fails it without its body,
    // and a loaded machine may start the comm thread later than the 50 ms below).
    started.wait();
    CHECK_THROWS_AS(w->wait(50ms), TimeoutError);
    v.reset();  // the caller frees its buffer at once (ASan/TSan would see a later access)
    gate.open = true;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!w->completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    CHECK(ran.load());
    CHECK(w->completed());
  }
}

TEST_CASE("group runtime: an op on the caller's buffer holds a wait that gave up until it let go", "[runtime][group_runtime]") {
  Gate gate;
  std::atomic<bool> ran{false};
  Gate started;  // opened by the op body
  GroupRuntime rt(spec_of(), config_of(0, /*stage=*/true, 10s));  // stages up to 1 KiB: this op is larger
  std::vector<float> v(1024, 1.0f);
  auto w = rt.run("all_reduce", v.size() * sizeof(float), {{view_of(v.data(), v.size()), OpBuffer::read_write}},
                  [&](const OpContext& op) {
                    CHECK(op.buffer(0).data == v.data());  // not staged
                    started.open = true;
                    gate.wait();
                    static_cast<float*>(op.buffer(0).data)[0] = 2.0f;
                    ran = true;
                  });
  // Once the op runs: a wait that gives up while it is still queued fails it without its body (the
  // group failed), and a loaded machine may start the comm thread later than the 50 ms below.
  started.wait();
  // Timed from before the opener starts its 300 ms: the wait must outlast them however late this
  // thread runs again.
  const auto start = std::chrono::steady_clock::now();
  std::thread opener([&] {
    std::this_thread::sleep_for(300ms);
    gate.open = true;
  });
  CHECK_THROWS_AS(w->wait(50ms), TimeoutError);
  CHECK(ran.load());  // the wait returned only after the op let go of `v`
  CHECK(std::chrono::steady_clock::now() - start >= 250ms);
  opener.join();
}

TEST_CASE("group runtime: in_flight_failer fails running and queued ops at once, and the caller's buffer stays alone",
          "[runtime][group_runtime]") {
  std::function<void(std::exception_ptr)> failer;
  std::vector<float> kept{1, 2, 3};
  {
    Gate gate;  // outlives the runtime, whose destructor joins the thread that reads it
    GroupRuntime rt(spec_of(), config_of(0, /*stage=*/true));
    failer = rt.in_flight_failer();
    auto body = [&](const OpContext& op) {
      gate.wait();
      auto* staged = static_cast<float*>(op.buffer(0).data);
      for (int i = 0; i < 3; ++i) staged[i] = -1;  // op-owned memory: must never reach the caller
    };
    auto freed = std::make_unique<std::vector<float>>(std::vector<float>{1, 2, 3});
    auto running = rt.run("all_reduce", 12, {{view_of(kept.data(), kept.size()), OpBuffer::read_write}}, body);
    auto queued = rt.run("all_reduce", 12, {{view_of(freed->data(), freed->size()), OpBuffer::read_write}}, body);
    failer(std::make_exception_ptr(BackendError("transport broke")));
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(running->wait(), Catch::Contains("transport broke"));
    CHECK_THROWS_WITH(queued->wait(), Catch::Contains("transport broke"));
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    freed.reset();  // the caller may free its buffer once the wait returned: the queued op never copies it in
    gate.open = true;
    // The first outcome stands: the op that now finishes does not turn the Work into a success.
    CHECK_THROWS_WITH(running->wait(), Catch::Contains("transport broke"));
  }  // joins the comm thread: the running op has finished and written nothing back
  CHECK(kept == std::vector<float>{1, 2, 3});
  failer(std::make_exception_ptr(BackendError("late")));  // the runtime is gone: does nothing
}

TEST_CASE("group runtime: in_flight_failer on an op on the caller's buffer returns its error once the op let go",
          "[runtime][group_runtime]") {
  Gate gate;
  std::atomic<bool> ran{false};
  Gate started;  // opened by the op body
  GroupRuntime rt(spec_of(), config_of(0, /*stage=*/true, 10s));  // stages up to 1 KiB: this op is larger
  std::vector<float> v(1024, 1.0f);
  auto w = rt.run("all_reduce", v.size() * sizeof(float), {{view_of(v.data(), v.size()), OpBuffer::read_write}},
                  [&](const OpContext& op) {
                    started.open = true;
                    gate.wait();
                    static_cast<float*>(op.buffer(0).data)[0] = 2.0f;  // the caller's buffer
                    ran = true;
                  });
  // Once the op runs (one still queued fails without touching the buffer, as the group failed).
  started.wait();
  rt.in_flight_failer()(std::make_exception_ptr(BackendError("transport broke")));
  const auto start = std::chrono::steady_clock::now();  // before the opener's 300 ms start
  std::thread opener([&] {
    std::this_thread::sleep_for(300ms);
    gate.open = true;
  });
  CHECK_THROWS_WITH(w->wait(), Catch::Contains("transport broke"));
  CHECK(ran.load());  // the wait returned only after the op let go of `v`
  CHECK(std::chrono::steady_clock::now() - start >= 250ms);
  CHECK(rt.health().failed());  // as after a wait that gave up
  CHECK_THROWS_WITH(w->wait(), Catch::Contains("transport broke"));  // the first outcome stands
  opener.join();
}

TEST_CASE("group runtime: an op on the caller's buffer still in its prelude or queued holds no wait, and never "
          "touches the buffer after", "[runtime][group_runtime]") {
  Gate gate;  // holds the first op's prelude (gloo: a fingerprint exchange whose peer never comes)
  Gate in_prelude;
  std::atomic<int> bodies{0};
  auto freed = std::make_unique<std::vector<float>>(1024, 1.0f);
  auto queued_buffer = std::make_unique<std::vector<float>>(1024, 1.0f);
  {
    GroupRuntime rt(spec_of(), config_of(0, /*stage=*/true, 10s));  // a release grace of 10 s
    const auto body = [&](const OpContext& op) {
      static_cast<float*>(op.buffer(0).data)[0] = 2.0f;  // the caller's buffer
      ++bodies;
    };
    const auto prelude = [&](const OpContext& op) {
      CHECK(op.buffers.empty());  // a prelude sees none of the caller's buffers
      in_prelude.open = true;
      gate.wait();
    };
    const std::size_t bytes = 1024 * sizeof(float);  // above the 1 KiB staging limit
    auto w = rt.run(Op::bare("all_reduce"), bytes, {{view_of(freed->data(), 1024), OpBuffer::read_write}}, body,
                    prelude);
    auto queued = rt.run(Op::bare("all_reduce"), bytes,
                         {{view_of(queued_buffer->data(), 1024), OpBuffer::read_write}}, body);
    in_prelude.wait();
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(w->wait(50ms), TimeoutError);  // gives up: the op holds no buffer yet
    CHECK_THROWS_AS(queued->wait(50ms), TimeoutError);  // nor one queued behind it
    CHECK(std::chrono::steady_clock::now() - start < 5s);  // not the 10 s release grace
    freed.reset();  // the caller frees its buffers once the waits returned
    queued_buffer.reset();
    gate.open = true;  // the prelude ends; neither body may run now
  }  // joins the comm thread
  CHECK(bodies.load() == 0);
}

TEST_CASE("group runtime: a group keeps its first failure, not a later one", "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(RuntimeConfig::kNever));
  auto w = rt.run("all_reduce", 8, [](const OpContext& op) { throw PeerFailure(op.what() + ": rank 4 died"); });
  CHECK_THROWS_AS(w->wait(), PeerFailure);
  // Later failures of the same group (a waiter giving up, the transport breaking) do not replace
  // the root cause that every later refusal quotes.
  CHECK_FALSE(rt.health().fail("a later timeout"));  // false: not the first, nothing to follow up
  CHECK_FALSE(rt.health().fail(std::make_exception_ptr(BackendError("a later transport error"))));
  CHECK(rt.health().failure() == "all_reduce #1: rank 4 died");
  CHECK_THROWS_AS(std::rethrow_exception(rt.health().first_error()), PeerFailure);  // the error itself (nccl's waits)
  CHECK_THROWS_WITH(rt.run("barrier", 0, [](const OpContext&) {}),
                    Catch::Contains("unusable after an earlier failure: all_reduce #1: rank 4 died") &&
                        !Catch::Contains("later"));
}

TEST_CASE("group runtime: an op queued behind a failed op does not run", "[runtime][group_runtime]") {
  Gate gate;  // outlives the runtime, whose destructor joins the thread that reads it
  std::atomic<bool> second_ran{false};
  GroupRuntime rt(spec_of(), config_of(0));
  auto first = rt.run("all_reduce", 8, [&](const OpContext& op) {
    gate.wait();
    throw PeerFailure(op.what() + ": rank 4 died");
  });
  // Issued while the group is still healthy: queued behind the op that is about to fail.
  auto second = rt.run("broadcast", 8, [&](const OpContext&) { second_ran = true; });
  gate.open = true;
  CHECK_THROWS_AS(first->wait(), PeerFailure);
  CHECK_THROWS_WITH(second->wait(), Catch::Contains("broadcast #2 refused: the group is unusable after an earlier "
                                                    "failure") &&
                                        Catch::Contains("all_reduce #1: rank 4 died"));
  CHECK_FALSE(second_ran.load());
}

TEST_CASE("group runtime: an op timeout is the one message naming group, op number, wait and variable", "[runtime][group_runtime]") {
  Gate gate;  // outlives the runtime, whose destructor joins the thread that reads it
  GroupRuntime rt(spec_of(), config_of(0));
  rt.run("barrier", 0, [](const OpContext&) {})->wait();
  auto w = rt.run("all_reduce", 8, [&](const OpContext&) { gate.wait(); });
  CHECK_THROWS_WITH(w->wait(50ms), op_timeout_message({"rank 5 in group 'g' (test)", "all_reduce #2", 50ms, {}, {}}));
  gate.open = true;
  // Every backend's waiter builds it the same way (op_timeout.h): what is known, then the advice.
  CHECK(op_timeout_message({"rank 5 in group 'g' (shm)", "broadcast #3", 1500ms, {"rank 0", "rank 1 (global rank 4)"},
                            "step 2"}) ==
        "rank 5 in group 'g' (shm): broadcast #3 timed out after 1.5 s: still waiting for [rank 0, rank 1 (global "
        "rank 4)] (step 2); a peer may be stuck or issuing a different collective or send/recv (raise "
        "FASTRUN_OP_TIMEOUT, or pass a longer timeout to wait(), if it is legitimately slow)");
}

TEST_CASE("group runtime: ranks are named one way, with the global rank where it differs", "[runtime][group_runtime]") {
  CHECK(rank_name(1, {4, 5}) == "rank 1 (global rank 5)");
  CHECK(rank_name(1, {0, 1}) == "rank 1");
  CHECK(rank_name(2, {}) == "rank 2");  // no global ranks known: the rank is global
  CHECK(group_label(5, "", "gloo") == "rank 5 in group 'world' (gloo)");
}

TEST_CASE("group runtime: an op takes the number its Group gave it", "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(RuntimeConfig::kNever));
  std::vector<std::string> seen;
  std::vector<Duration> timeouts;
  const auto body = [&](const OpContext& op) {
    seen.push_back(op.what());
    timeouts.push_back(op.timeout);
  };
  rt.run("all_reduce", 8, body);  // bare (no Group): the runtime counts
  const Op fifth = Op::numbered_as("broadcast", 5);  // what Group::forward hands down for its op #5
  rt.run(fifth, 8, body);
  CHECK(timeouts.back() == rt.health().op_timeout());  // none given: the group's
  Op sixth = Op::numbered_as("broadcast", 6);
  sixth.timeout = std::chrono::seconds(3);
  rt.run(sixth, 8, body);
  CHECK(timeouts.back() == std::chrono::seconds(3));  // given: its own
  rt.run(Op::numbered_as("all_gather", 9), 8, body);
  rt.run(Op::numbered_as("barrier", 5), 0, body);  // a number given is taken as it is
  rt.run("all_reduce", 8, body);  // bare again: one more than the last
  CHECK(seen == std::vector<std::string>{"all_reduce #1", "broadcast #5", "broadcast #6", "all_gather #9", "barrier #5",
                                         "all_reduce #6"});
}

TEST_CASE("group runtime: a posted send/recv is numbered apart from collectives and refused after a failure",
          "[runtime][group_runtime]") {
  GroupRuntime rt(spec_of(), config_of(RuntimeConfig::kNever));
  std::vector<std::uint64_t> posted;
  const auto post = [&](std::uint64_t seq) {
    posted.push_back(seq);
    return completed_work();
  };
  std::vector<std::string> ran;
  const auto body = [&](const OpContext& op) { ran.push_back(op.what()); };
  rt.run("all_reduce", 8, body);                    // collective #1
  rt.post(Op::bare("send", true), post);            // bare: the runtime numbers it, p2p #1
  rt.post(Op::numbered_as("recv", 4, true), post);  // as its Group numbered it
  rt.post(Op::bare("recv", true), post);            // on from the last: #5
  rt.run("barrier", 0, body);                       // the collectives count on apart: #2
  CHECK(posted == std::vector<std::uint64_t>{1, 4, 5});
  CHECK(ran == std::vector<std::string>{"all_reduce #1", "barrier #2"});
  // One failure check for both ways to run an op: run()'s refusal, before anything is posted.
  rt.health().fail("rank 1 died");
  CHECK_THROWS_WITH(rt.post(Op::bare("send", true), post),
                    Catch::Contains("send refused: the group is unusable after an earlier failure: rank 1 died"));
  CHECK(posted.size() == 3);
}
