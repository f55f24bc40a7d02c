// The single-process half of the conformance suite: every registered kind (conformance.h)
// against the Store contract (store.h, c10d rules). Each case runs once per kind.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>

#include "conformance.h"
#include "test_support/asleep.h"
#include "fastrun/runtime/error.h"

using namespace fastrun;
using namespace std::chrono_literals;
using fastrun::test::store_kinds_under_test;

namespace {

// Hosts a fresh store of `kind`, runs `body` with a handle, then checks nothing is left behind.
template <typename Body>
void with_store(const test::StoreKindCase& kind, Body&& body) {
  {
    auto hosted = kind.host();
    auto store = hosted->connect();
    store->set_timeout(20s);
    body(*store, *hosted);
  }
  CHECK(test::leftovers().empty());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How long after `timeout` the store's `call` returned, less how late a plain sleep of the same
// `timeout` on another thread woke meanwhile: the delay the store adds to the scheduler's, so
// that a store polling in slices (or ignoring the per-call timeout) is caught on a loaded or
// sanitized machine without a bound that depends on the machine's speed. `call` must time out.
template <typename Call>
double store_overshoot(std::chrono::milliseconds timeout, Call&& call) {
  double sleep_late = 0;
  std::thread reference([&] {
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(timeout);
    sleep_late = seconds_since(t0) - std::chrono::duration<double>(timeout).count();
  });
  const auto t0 = std::chrono::steady_clock::now();
  double took = 0;
  try {
    call();
    FAIL("the call returned instead of timing out");
  } catch (const TimeoutError&) {
    took = seconds_since(t0);
  }
  reference.join();
  CHECK(took >= std::chrono::duration<double>(timeout).count() - 0.01);  // never early
  return took - std::chrono::duration<double>(timeout).count() - sleep_late;
}

}  // namespace

TEST_CASE("store: set, get, overwrite", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        s.set("a", to_bytes("1"));
        CHECK(to_string(s.get("a", 1s)) == "1");
        s.set("a", to_bytes("two"));
        CHECK(to_string(s.get("a", 1s)) == "two");
        s.set("key with spaces/and:odd%chars", to_bytes("x"));
        CHECK(to_string(s.get("key with spaces/and:odd%chars", 1s)) == "x");
        const std::string long_key(1000, 'k');
        s.set(long_key, to_bytes("long"));
        CHECK(to_string(s.get(long_key, 1s)) == "long");
      });
    }
  }
}

TEST_CASE("store: get of a missing key times out naming it, sub-second", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        CHECK(store_overshoot(150ms, [&] { s.get("never-set", 150ms); }) < 0.5);
        CHECK_THROWS_WITH(s.get("never-set", 10ms), Catch::Contains("never-set"));
      });
    }
  }
}

TEST_CASE("store: 0-byte and 16 MiB values", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [&kind](Store& s, HostedStore&) {
        s.set("empty", {});
        CHECK(s.get("empty", 1s).empty());
        CHECK(s.check({"empty"}));
        Bytes big(std::min<std::size_t>(16u << 20, kind.max_value_bytes));
        for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
        s.set("big", big);
        CHECK(s.get("big", 5s) == big);
      });
    }
  }
}

TEST_CASE("store: add is an ASCII counter", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        CHECK(s.add("c", 1) == 1);
        CHECK(s.add("c", 5) == 6);
        CHECK(s.add("c", -10) == -4);
        CHECK(s.add("c", 0) == -4);
        CHECK(to_string(s.get("c", 1s)) == "-4");
        s.set("n", to_bytes("41"));
        CHECK(s.add("n", 1) == 42);
        s.set("text", to_bytes("abc"));
        CHECK_THROWS_AS(s.add("text", 1), StoreError);
        CHECK(to_string(s.get("text", 1s)) == "abc");
      });
    }
  }
}

TEST_CASE("store: compare_set follows the c10d rules", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        // absent, expected not empty: returns expected, sets nothing
        CHECK(to_string(s.compare_set("k", to_bytes("x"), to_bytes("y"))) == "x");
        CHECK_FALSE(s.check({"k"}));
        // absent, expected empty: sets desired
        CHECK(to_string(s.compare_set("k", {}, to_bytes("v1"))) == "v1");
        CHECK(to_string(s.get("k", 1s)) == "v1");
        // present and equal: sets desired
        CHECK(to_string(s.compare_set("k", to_bytes("v1"), to_bytes("v2"))) == "v2");
        CHECK(to_string(s.get("k", 1s)) == "v2");
        // present and different: returns current, sets nothing
        CHECK(to_string(s.compare_set("k", to_bytes("v1"), to_bytes("v3"))) == "v2");
        CHECK(to_string(s.get("k", 1s)) == "v2");
        // present and empty value equals empty expected
        s.set("e", {});
        CHECK(to_string(s.compare_set("e", {}, to_bytes("z"))) == "z");
      });
    }
  }
}

TEST_CASE("store: check, wait, delete_key, num_keys", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        const auto base = s.num_keys();  // a prefix store counts the whole underlying store
        CHECK_FALSE(s.check({"a"}));
        CHECK(s.check({}));
        s.set("a", to_bytes("1"));
        s.set("b", to_bytes("2"));
        CHECK(s.check({"a", "b"}));
        CHECK_FALSE(s.check({"a", "c"}));
        CHECK(s.num_keys() == base + 2);
        s.wait({"a", "b"}, 100ms);
        CHECK(store_overshoot(200ms, [&] { s.wait({"a", "x", "b", "y"}, 200ms); }) < 0.5);
        // A prefix store names the prefixed keys ("job-7/x"): what is really in the store.
        CHECK_THROWS_WITH(s.wait({"a", "x", "b", "y"}, 10ms),
                          Catch::Contains("x, ") && Catch::Contains("y]") && Catch::Contains("2 of 4 missing"));
        CHECK(s.delete_key("a"));
        CHECK_FALSE(s.delete_key("a"));
        CHECK_FALSE(s.check({"a"}));
        CHECK(s.num_keys() == base + 1);
        s.set("a", to_bytes("again"));
        CHECK(to_string(s.get("a", 1s)) == "again");
        CHECK(s.num_keys() == base + 2);
      });
    }
  }
}

// The waiter is seen asleep inside get()/wait() before the key is written, and must return
// within test::kWakeBound of the write: a store that lost its wake-up sleeps its 10 s out.
TEST_CASE("store: waiters are woken by set, add and compare_set from another thread", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        auto other = s.clone();
        for (int how = 0; how < 6; ++how) {  // get (0-2) or wait (3-5), woken by set, add, compare_set
          CAPTURE(how);
          const std::string key = "w" + std::to_string(how);
          const auto r = test::measure_wake(
              [&] {
                if (how >= 3) s.wait({key, key}, test::kWaiterTimeout);
                else if (s.get(key, test::kWaiterTimeout).empty()) throw std::runtime_error("empty value");
              },
              [&] {
                if (how % 3 == 0) other->set(key, to_bytes("v"));
                if (how % 3 == 1) other->add(key, 7);
                if (how % 3 == 2) other->compare_set(key, {}, to_bytes("c"));
              });
          CHECK(r.asleep);
          CHECK(r.error.empty());
          CHECK(r.latency < test::kWakeBound);
        }
      });
    }
  }
}

TEST_CASE("store: barrier of 4 threads", "[store][conformance]") {
  for (const auto& kind : store_kinds_under_test()) {
    DYNAMIC_SECTION(kind.name) {
      with_store(kind, [](Store& s, HostedStore&) {
        std::atomic<int> passed{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < 4; ++i)
          threads.emplace_back([&, h = s.clone()]() mutable {
            store_barrier(*h, "round-1", 4, 10s);
            passed.fetch_add(1);
          });
        for (auto& t : threads) t.join();
        CHECK(passed == 4);
        try {
          store_barrier(s, "round-2", 2, 100ms);
          FAIL("barrier passed alone");
        } catch (const TimeoutError& e) {
          CHECK_THAT(e.what(), Catch::Contains("1 of 2 participants"));
        }
      });
    }
  }
}
