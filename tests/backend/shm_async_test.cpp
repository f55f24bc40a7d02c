// shm backend: which thread runs an op. Large ops go to the group's comm thread and return at
// once (the caller computes meanwhile); small ops issued behind them keep the issue order; a
// wait that gives up cancels the op, so the group is unusable and goes away at once.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/error.h"
#include "shm_test_support.h"

using namespace fastrun;
using namespace fastrun::shm_test;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rank r contributes r+1+salt to every element; the sum over n ranks.
std::vector<float> filled(const Rank& rk, std::size_t count, float salt) {
  return std::vector<float>(count, static_cast<float>(rk.rank + 1) + salt);
}
float sum_of(const Rank& rk, float salt) { return static_cast<float>(rk.size * (rk.size + 1) / 2) + salt * rk.size; }

constexpr std::size_t kLarge = (3u << 20) / sizeof(float);  // several pipeline chunks
static_assert(kLarge * sizeof(float) >= shm::kAsyncOpBytes, "kLarge must run on the comm thread");
constexpr std::size_t kSmall = 1000;
constexpr auto kLate = std::chrono::milliseconds(700);

}  // namespace

TEST_CASE("shm: a large op returns before a late peer arrives and small ops behind it keep the order", "[shm]") {
  const auto out = run_ranks(2, [](const Rank& rk) {
    auto g = rk.world();
    auto a = filled(rk, kLarge, 0), b = filled(rk, kSmall, 10), c = filled(rk, kLarge, 20), d = filled(rk, kSmall, 30);
    if (rk.rank == 1) std::this_thread::sleep_for(kLate);
    const auto t0 = Clock::now();
    auto wa = g->all_reduce(view_of(a.data(), a.size()));
    const double issue_s = seconds_since(t0);
    const bool done_at_once = wa->completed();
    // Issued while `a` is still running: these must go behind it, not overtake it inline.
    auto wb = g->all_reduce(view_of(b.data(), b.size()));
    auto wc = g->all_reduce(view_of(c.data(), c.size()));
    auto wbar = g->barrier();
    auto wd = g->all_reduce(view_of(d.data(), d.size()));
    for (auto* w : {&wa, &wb, &wc, &wbar, &wd}) (*w)->wait();
    if (rk.rank == 0) {
      // Inline, the call would have taken the peer's lateness (0.7 s).
      expect(issue_s < 0.25, "the all_reduce of {} bytes took {:.3f} s to return", kLarge * sizeof(float), issue_s);
      expect(!done_at_once, "the all_reduce finished before the late peer issued it");
    }
    for (auto [v, salt] : {std::pair{&a, 0.f}, {&b, 10.f}, {&c, 20.f}, {&d, 30.f}})
      for (float x : *v) expect(x == sum_of(rk, salt), "salt {}: got {}, expected {}", salt, x, sum_of(rk, salt));
    // Once the queue is drained, a small op runs inline again (completed on return).
    auto e = filled(rk, kSmall, 40);
    auto we = g->all_reduce(view_of(e.data(), e.size()));
    expect(we->completed(), "a small all_reduce on an idle group did not run inline");
    we->wait();
  });
  INFO(describe(out));
  CHECK(all_ok(out));
}

TEST_CASE("shm: a wait that gives up cancels the op, and the group is unusable and goes away at once", "[shm]") {
  std::string run_id;
  const auto out = run_ranks(
      2,
      [](const Rank& rk) {
        auto g = rk.world(std::chrono::seconds(30));
        auto v = filled(rk, kLarge, 0);
        if (rk.rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          try {
            g->all_reduce(view_of(v.data(), v.size()))->wait();
            expect(false, "the all_reduce succeeded although rank 0 gave up on it");
          } catch (const PeerFailure& e) {
            expect(std::string(e.what()).find("rank 0") != std::string::npos, "{}", e.what());
          }
          return;
        }
        auto work = g->all_reduce(view_of(v.data(), v.size()));
        try {
          work->wait(std::chrono::milliseconds(200));
          expect(false, "wait(200 ms) returned although rank 1 is 3 s late");
        } catch (const TimeoutError& e) {
          expect(std::string(e.what()).find("all_reduce") != std::string::npos, "{}", e.what());
        }
        try {
          g->barrier()->wait();
          expect(false, "barrier after a failure succeeded");
        } catch (const BackendError& e) {
          expect(std::string(e.what()).find("earlier failure") != std::string::npos, "{}", e.what());
        }
        // The comm thread is cancelled, not left waiting for rank 1 until the op timeout.
        const auto t0 = Clock::now();
        g.reset();
        expect(seconds_since(t0) < 1.0, "destroying the group took {:.2f} s", seconds_since(t0));
      },
      {}, &run_id);
  INFO(describe(out));
  CHECK(all_ok(out));
  CHECK(shm_entries(run_id).empty());
}
