// runtime/os/periodic_thread.h: the one "every interval until stopped" thread. Real threads and
// clocks; bounds are loose (a busy 2-core machine under a sanitizer), the "prompt" ones are a
// second against an interval of an hour.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>

#include "fastrun/runtime/os/periodic_thread.h"
#include "fastrun/runtime/os/poll_until.h"

using namespace fastrun;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
constexpr os::Backoff kEvery5ms{5ms, 5ms};
bool reaches(const std::atomic<int>& n, int at_least) {
  return os::poll_until(Clock::now() + 10s, kEvery5ms, [&] { return n.load() >= at_least; });
}
}  // namespace

TEST_CASE("periodic thread: ticks at once and then every interval") {
  std::atomic<int> ticks{0};
  os::PeriodicThread t;
  t.start(5ms, [&] {
    ++ticks;
    return true;
  });
  CHECK(reaches(ticks, 3));
  t.stop();
  const int after = ticks.load();
  std::this_thread::sleep_for(50ms);
  CHECK(ticks.load() == after);  // stopped means no tick after stop() returned
}

TEST_CASE("periodic thread: stop is prompt with a long interval, either first tick") {
  std::atomic<int> ticks{0};
  const auto tick = [&] {
    ++ticks;
    return true;
  };
  SECTION("first tick now") {
    os::PeriodicThread t;
    t.start(std::chrono::hours(1), tick);
    REQUIRE(reaches(ticks, 1));
    const auto t0 = Clock::now();
    t.stop();
    CHECK(Clock::now() - t0 < 1s);
    CHECK(ticks.load() == 1);
  }
  SECTION("first tick after one interval") {
    os::PeriodicThread t;
    t.start(std::chrono::hours(1), tick, os::PeriodicThread::First::after_interval);
    std::this_thread::sleep_for(50ms);
    const auto t0 = Clock::now();
    t.stop();
    CHECK(Clock::now() - t0 < 1s);
    CHECK(ticks.load() == 0);
  }
}

TEST_CASE("periodic thread: a tick that returns false ends the loop") {
  std::atomic<int> ticks{0};
  os::PeriodicThread t;
  t.start(1ms, [&] { return ++ticks < 2; });
  REQUIRE(reaches(ticks, 2));
  std::this_thread::sleep_for(50ms);
  CHECK(ticks.load() == 2);
  t.stop();  // joins a thread that already ended
  t.stop();  // and again: idempotent
}

TEST_CASE("periodic thread: stop() from inside the tick ends it without a deadlock") {
  std::atomic<int> ticks{0};
  os::PeriodicThread t;
  t.start(1ms, [&] {
    ++ticks;
    t.stop();  // would join itself if it did not know better
    return true;
  });
  REQUIRE(reaches(ticks, 1));
  std::this_thread::sleep_for(50ms);
  CHECK(ticks.load() == 1);
}  // the destructor joins

TEST_CASE("periodic thread: the destructor waits for the tick in progress") {
  std::atomic<bool> in_tick{false};
  std::atomic<bool> finished{false};
  {
    os::PeriodicThread t;
    t.start(std::chrono::hours(1), [&] {
      in_tick = true;
      std::this_thread::sleep_for(100ms);
      finished = true;
      return true;
    });
    REQUIRE(os::poll_until(Clock::now() + 10s, kEvery5ms, [&] { return in_tick.load(); }));
  }
  CHECK(finished.load());  // joined: nothing the tick touches may go before it returns
}

TEST_CASE("periodic thread: a second start is refused") {
  os::PeriodicThread t;
  t.start(std::chrono::hours(1), [] { return true; });
  CHECK_THROWS_AS(t.start(std::chrono::hours(1), [] { return true; }), std::logic_error);
}
