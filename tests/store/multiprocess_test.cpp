// The real-process half of the conformance suite, run for every cross-process kind
// (conformance.h): waiters in other processes, counters contended across processes, clients
// SIGKILLed at random points inside store operations (the store must stay usable and never
// show a half-written value), and a 256-process rendezvous. Children are forked, connect with
// connect_store() like ranks do, and are always reaped (test_support/children.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "conformance.h"
#include "fastrun/runtime/error.h"
#include "test_support/asleep.h"
#include "test_support/children.h"

using namespace fastrun;
using namespace std::chrono_literals;
using fastrun::test::Children;
using fastrun::test::store_kinds_under_test;

namespace {

// fork() of a sanitized process copies its huge shadow mappings (~60 ms each on 2 cores), so
// the sanitizer builds rendezvous 64 processes; the normal build does the 256 the issue asks for.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kRendezvousProcs = 64;
#else
constexpr int kRendezvousProcs = 256;
#endif

// A value that proves its own integrity: 8 bytes of length, 8 of seed, then bytes derived from
// the seed. A torn write (half old, half new, or truncated) fails valid().
Bytes make_value(std::uint64_t seed, std::size_t size) {
  size = std::max<std::size_t>(size, 16);
  Bytes v(size);
  const std::uint64_t n = size;
  std::memcpy(v.data(), &n, 8);
  std::memcpy(v.data() + 8, &seed, 8);
  std::uint64_t x = seed;
  for (std::size_t i = 16; i < size; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<std::uint8_t>(x >> 56);
  }
  return v;
}

bool valid(const Bytes& v) {
  if (v.size() < 16) return false;
  std::uint64_t n = 0, seed = 0;
  std::memcpy(&n, v.data(), 8);
  std::memcpy(&seed, v.data() + 8, 8);
  return n == v.size() && make_value(seed, v.size()) == v;
}

}  // namespace

// The child says when it is connected, is then seen asleep in wait(), and reports the moment it
// woke (steady_clock is CLOCK_MONOTONIC, one clock for every process of the machine).
TEST_CASE("store processes: a waiter in another process is woken by set and add", "[store][conformance][process]") {
  for (const auto& kind : store_kinds_under_test()) {
    if (!kind.cross_process) continue;
    DYNAMIC_SECTION(kind.name) {
      {
        auto hosted = test::host_for_forks(kind);
        auto store = hosted->connect();
        for (const std::string key : {"from-set", "from-add"}) {
          CAPTURE(key);
          int pipe_fds[2];
          REQUIRE(::pipe(pipe_fds) == 0);
          Children kids;
          const pid_t pid = kids.spawn([&] {
            auto s = test::connect_to(*hosted);
            const char connected = 1;
            if (::write(pipe_fds[1], &connected, 1) != 1) return 2;
            s->wait({key}, test::kWaiterTimeout);
            const std::int64_t woke = std::chrono::steady_clock::now().time_since_epoch().count();
            if (::write(pipe_fds[1], &woke, sizeof woke) != sizeof woke) return 2;
            return to_string(s->get(key, 1s)).empty() ? 1 : 0;
          });
          ::close(pipe_fds[1]);  // a child that dies closes the pipe: the reads below end
          char connected = 0;
          CHECK(::read(pipe_fds[0], &connected, 1) == 1);
          CHECK(test::wait_until_asleep(pid, pid, 5s));
          const auto t0 = std::chrono::steady_clock::now();
          if (key == "from-set") store->set(key, to_bytes("x"));
          else store->add(key, 3);
          std::int64_t woke = 0;
          CHECK(::read(pipe_fds[0], &woke, sizeof woke) == sizeof woke);
          ::close(pipe_fds[0]);
          CHECK(std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(woke)) - t0 <
                test::kWakeBound);
          for (const auto& st : kids.wait_all(15s)) CHECK(st.shell_code() == 0);
        }
      }
      CHECK(test::leftovers().empty());
    }
  }
}

TEST_CASE("store processes: add is atomic across 4 processes", "[store][conformance][process]") {
  for (const auto& kind : store_kinds_under_test()) {
    if (!kind.cross_process) continue;
    DYNAMIC_SECTION(kind.name) {
      {
        auto hosted = test::host_for_forks(kind);
        auto store = hosted->connect();
        constexpr int kProcs = 4, kAdds = 300;
        Children kids;
        for (int p = 0; p < kProcs; ++p)
          kids.spawn([&] {
            auto s = test::connect_to(*hosted);
            for (int i = 0; i < kAdds; ++i) s->add("counter", 1);
            // compare_set as a lock-free increment, contended too
            for (int i = 0; i < 50; ++i) {
              for (;;) {
                const Bytes cur = s->compare_set("cas", {}, to_bytes("0"));
                // "<n>:<pid>": unique per writer, so getting `next` back means *we* swapped it
                // (a bare number could have been written by another process already).
                const Bytes next = to_bytes(fmt::format("{}:{}", std::stoi(to_string(cur)) + 1, ::getpid()));
                if (s->compare_set("cas", cur, next) == next) break;
              }
            }
            return 0;
          });
        for (const auto& st : kids.wait_all(60s)) CHECK(st.shell_code() == 0);
        CHECK(store->add("counter", 0) == kProcs * kAdds);
        CHECK(std::stoi(to_string(store->get("cas", 1s))) == kProcs * 50);
      }
      CHECK(test::leftovers().empty());
    }
  }
}

TEST_CASE("store processes: clients SIGKILLed mid-operation never wedge or corrupt the store",
          "[store][conformance][process][kill]") {
  for (const auto& kind : store_kinds_under_test()) {
    if (!kind.cross_process) continue;
    DYNAMIC_SECTION(kind.name) {
      {
        auto hosted = test::host_for_forks(kind);
        auto store = hosted->connect();
        store->set_timeout(10s);
        std::mt19937 rng(12345);
        constexpr int kRounds = 12, kProcs = 4, kKeys = 8;
        int child_failures = 0;
        for (int round = 0; round < kRounds; ++round) {
          Children kids;
          for (int p = 0; p < kProcs; ++p)
            kids.spawn([&, p] {
              auto s = test::connect_to(*hosted, 10s);
              std::mt19937_64 r(static_cast<std::uint64_t>(round * 100 + p));
              for (std::uint64_t i = 0;; ++i) {
                const std::string key = fmt::format("k{}", r() % kKeys);
                switch (r() % 4) {
                  case 0:
                  case 1: s->set(key, make_value(r(), r() % 65536)); break;
                  case 2: s->add("counter", 1); break;
                  case 3:
                    if (s->check({key}) && !valid(s->get(key, 5s))) return 3;  // torn value seen
                    break;
                }
              }
              return 0;
            });
          std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 40));
          kids.kill_all(SIGKILL);
          for (const auto& st : kids.wait_all(10s))
            if (st.shell_code() != 128 + SIGKILL) ++child_failures;
          // The store answers at once, and every value is whole.
          for (int k = 0; k < kKeys; ++k) {
            const std::string key = fmt::format("k{}", k);
            if (store->check({key})) CHECK(valid(store->get(key, 1s)));
          }
          const auto before = store->add("counter", 0);
          CHECK(store->add("counter", 1) == before + 1);
          store->set("alive", to_bytes(std::to_string(round)));
          CHECK(to_string(store->get("alive", 1s)) == std::to_string(round));
        }
        CHECK(child_failures == 0);
        CHECK(store->add("counter", 0) > 0);
      }
      CHECK(test::leftovers().empty());
    }
  }
}

TEST_CASE("store processes: 256 processes rendezvous (64 under sanitizers)", "[store][conformance][process][rendezvous]") {
  for (const auto& kind : store_kinds_under_test()) {
    if (!kind.cross_process) continue;
    DYNAMIC_SECTION(kind.name) {
      {
        auto hosted = test::host_for_forks(kind);
        std::vector<std::string> keys;
        for (int r = 0; r < kRendezvousProcs; ++r) keys.push_back(fmt::format("rank/{}", r));
        const auto t0 = std::chrono::steady_clock::now();
        Children kids;
        for (int r = 0; r < kRendezvousProcs; ++r)
          kids.spawn([&, r] {
            auto s = test::connect_to(*hosted, 30s);
            s->set(keys[static_cast<std::size_t>(r)], to_bytes(std::to_string(r)));
            s->wait(keys, 30s);
            store_barrier(*s, "after", kRendezvousProcs, 30s);
            return to_string(s->get(keys[static_cast<std::size_t>((r + 1) % kRendezvousProcs)], 1s)) ==
                           std::to_string((r + 1) % kRendezvousProcs)
                       ? 0
                       : 1;
          });
        int failed = 0;
        for (const auto& st : kids.wait_all(60s)) failed += st.shell_code() != 0;
        CHECK(failed == 0);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        WARN(kind.name << ": " << kRendezvousProcs << "-process rendezvous + barrier (fork included): " << secs << " s");
      }
      CHECK(test::leftovers().empty());
    }
  }
}
