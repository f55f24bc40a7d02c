// fastrun::Duration, the type of every public timeout: any chrono unit, never a bare number,
// rounded up and saturated so that a deadline now() + timeout cannot overflow; and Deadline,
// one op's timeout shared by its inner waits.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <type_traits>

#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/store/memory_store.h"

using namespace fastrun;
using namespace std::chrono_literals;

// `Duration{5}` once meant 5 ms to a reader expecting seconds: a bare number must not compile.
static_assert(!std::is_constructible_v<Duration, int>);
static_assert(!std::is_constructible_v<Duration, long>);
static_assert(!std::is_constructible_v<Duration, double>);
static_assert(!std::is_convertible_v<int, Duration>);
// Every unit and representation converts implicitly (so `store.get(key, 5s)` reads naturally).
static_assert(std::is_convertible_v<std::chrono::seconds, Duration>);
static_assert(std::is_convertible_v<std::chrono::microseconds, Duration>);
static_assert(std::is_convertible_v<std::chrono::duration<double>, Duration>);
static_assert(std::is_convertible_v<std::chrono::hours, Duration>);
// And it is a std::chrono::milliseconds wherever one is taken.
static_assert(std::is_convertible_v<Duration, std::chrono::milliseconds>);

TEST_CASE("Duration: any unit, rounded up to whole milliseconds", "[duration]") {
  CHECK(Duration(5s).count() == 5000);
  CHECK(Duration(500ms).count() == 500);
  CHECK(Duration(250us).count() == 1);  // a timeout is never shorter than asked
  CHECK(Duration(1001us).count() == 2);
  CHECK(Duration(std::chrono::duration<double>(0.5)).count() == 500);
  CHECK(Duration(std::chrono::duration<double>(1e-300)).count() == 1);
  CHECK(Duration(-1500us).count() == -1);  // toward +inf, like std::chrono::ceil
  CHECK(Duration(std::chrono::duration<double>(0.2)).count() == 200);  // 0.2 is not exact in binary
  CHECK(Duration(1ns).count() == 1);  // positive: never the "default" zero
  CHECK(Duration().count() == 0);
  CHECK(Duration::zero().count() == 0);
}

TEST_CASE("Duration: huge values saturate, and a deadline from one does not overflow", "[duration]") {
  const Duration forever = Duration::max();
  CHECK(Duration(std::chrono::duration<double>(1e300)) == forever);
  CHECK(Duration(std::chrono::hours::max()) == forever);
  CHECK(Duration(std::chrono::nanoseconds::max()) == forever);  // 292 years: more than the 100-year cap
  CHECK(Duration(std::chrono::duration<double>(std::numeric_limits<double>::infinity())) == forever);
  CHECK(Duration(std::chrono::duration<double>(-1e300)) == -forever);
  CHECK(Duration(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN())) == Duration::zero());
  const auto now = std::chrono::steady_clock::now();
  CHECK(now + forever > now);  // no wrap-around into the past
}

TEST_CASE("Duration: public timeouts take it in any unit", "[duration]") {
  MemoryStore store;
  store.set("k", to_bytes("v"));
  CHECK(to_string(store.get("k", 5s)) == "v");
  CHECK(to_string(store.get("k", 500ms)) == "v");
  CHECK(to_string(store.get("k", std::chrono::duration<double>(0.25))) == "v");
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(store.get("missing", 50ms), TimeoutError);
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  JoinOptions o;
  o.timeout = std::chrono::minutes(2);
  CHECK(o.timeout.count() == 120000);
}

TEST_CASE("Deadline: each inner wait gets what is left, never the zero that means the default", "[duration]") {
  const Deadline d(std::chrono::seconds(30));
  CHECK(d.left() <= std::chrono::seconds(30));
  CHECK(d.left() > std::chrono::seconds(20));  // far more than this check can take
  CHECK_FALSE(d.passed());
  const Deadline gone(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  CHECK(gone.passed());
  CHECK(gone.left() == std::chrono::milliseconds(1));  // a wait that times out at once
  CHECK(Deadline(Duration::zero()).left() == std::chrono::milliseconds(1));
  // An op's timeout of "forever" stays a deadline that does not overflow.
  CHECK(Deadline(Duration::max()).left() > std::chrono::hours(24 * 365));
}
