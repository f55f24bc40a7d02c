// The registry of a group's ops in flight (process_group/in_flight.h) on its own, in one process
// with threads: fail_all reaches every live op once, ops that ended or whose Work is gone are
// pruned, an op held strongly stays until it ended, and adding, failing and walking may run at
// once (the TSan stage runs these cases too).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/in_flight.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

// An op that counts how often it was failed from outside, and ends when told.
class CountingOp final : public InFlightOp {
 public:
  void fail_from_outside(std::exception_ptr error) override {
    failed.fetch_add(1);
    last = std::move(error);
    done.store(true);
  }
  bool ended() override { return done.load(); }
  std::atomic<int> failed{0};
  std::atomic<bool> done{false};
  std::exception_ptr last;
};

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

}  // namespace

TEST_CASE("in-flight ops: fail_all reaches every live op once, with the error", "[in_flight]") {
  InFlightOps ops;
  auto a = std::make_shared<CountingOp>();
  auto b = std::make_shared<CountingOp>();
  auto c = std::make_shared<CountingOp>();
  ops.add(a);
  ops.add(b, InFlightOps::Hold::strong);
  ops.add(c);
  ops.fail_all(std::make_exception_ptr(BackendError("the transport broke")));
  for (auto* op : {a.get(), b.get(), c.get()}) {
    CHECK(op->failed.load() == 1);
    CHECK(message_of(op->last) == "the transport broke");
  }
  // Failed ops ended: the next add prunes them, and a later failure reaches only the new op.
  auto d = std::make_shared<CountingOp>();
  ops.add(d);
  CHECK(ops.size() == 1);
  ops.fail_all(std::make_exception_ptr(BackendError("again")));
  CHECK(a->failed.load() == 1);
  CHECK(d->failed.load() == 1);
}

TEST_CASE("in-flight ops: an op whose Work is gone is dropped, one held strongly stays until it ended",
          "[in_flight]") {
  InFlightOps ops;
  auto kept = std::make_shared<CountingOp>();
  std::weak_ptr<CountingOp> strong_seen;
  {
    auto weak_only = std::make_shared<CountingOp>();
    auto strong_only = std::make_shared<CountingOp>();
    strong_seen = strong_only;
    ops.add(weak_only);
    ops.add(strong_only, InFlightOps::Hold::strong);
  }
  ops.add(kept);
  CHECK(ops.size() == 2);          // the weak entry expired and was pruned; the strong one lives
  REQUIRE(ops.snapshot().size() == 2);
  auto strong = strong_seen.lock();
  REQUIRE(strong);
  strong->done.store(true);        // it ended (nccl: its event was seen)
  strong.reset();
  ops.prune();
  CHECK(ops.size() == 1);
  CHECK(strong_seen.expired());    // the registry let go of it
  CHECK(ops.snapshot().front().get() == kept.get());
}

TEST_CASE("in-flight ops: an AsyncWork failed through the registry fails its wait, and one that completed is left alone",
          "[in_flight]") {
  InFlightOps ops;
  auto running = std::make_shared<AsyncWork>("rank 0 in group 'g' (gloo)", "all_reduce #1", 5s, nullptr,
                                             [](const std::string&) {});
  auto finished = std::make_shared<AsyncWork>("rank 0 in group 'g' (gloo)", "all_reduce #2", 5s, nullptr,
                                              [](const std::string&) {});
  ops.add(running);
  ops.add(finished);
  finished->complete();
  CHECK(finished->ended());
  CHECK_FALSE(running->ended());
  ops.fail_all(std::make_exception_ptr(BackendError("ranks issued different collectives")));
  CHECK(running->ended());
  CHECK_THROWS_WITH(running->wait(1s), "ranks issued different collectives");
  CHECK_NOTHROW(finished->wait(1s));  // its first outcome stands
}

TEST_CASE("in-flight ops: adding, walking and failing from several threads at once", "[in_flight]") {
  InFlightOps ops;
  constexpr int kThreads = 3, kPerThread = 300;
  std::vector<std::vector<std::shared_ptr<CountingOp>>> added(kThreads);
  std::atomic<bool> stop{false};
  std::thread failer([&] {
    while (!stop.load()) {
      ops.fail_all(std::make_exception_ptr(BackendError("failed")));
      for (const auto& op : ops.snapshot()) (void)op->ended();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> adders;
  for (int t = 0; t < kThreads; ++t)
    adders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto op = std::make_shared<CountingOp>();
        ops.add(op, i % 2 ? InFlightOps::Hold::strong : InFlightOps::Hold::weak);
        added[static_cast<std::size_t>(t)].push_back(std::move(op));
      }
    });
  for (auto& a : adders) a.join();
  stop.store(true);
  failer.join();
  // Whatever the interleaving, every op added was failed (by the loop or by a last fail_all), and
  // once all ended the registry is empty.
  ops.fail_all(std::make_exception_ptr(BackendError("last")));
  for (const auto& per_thread : added)
    for (const auto& op : per_thread) CHECK(op->failed.load() >= 1);
  ops.prune();
  CHECK(ops.size() == 0);
}
