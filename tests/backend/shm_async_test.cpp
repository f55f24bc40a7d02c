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

TEST_CASE("shm: a large op returns before a late peer arrives and small ops behind it keep the order, collectives of messages too", "[shm]") {
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
    // Collectives of messages behind it too: they take their messages with them to the comm
    // thread (ShmBackend::run_p2p), built here on a stack about to go.
    std::vector<float> mine(2), theirs(2, -1.f), one(1, 5.f + static_cast<float>(rk.rank)), both(2, -1.f);
    for (int p = 0; p < 2; ++p) mine[static_cast<std::size_t>(p)] = static_cast<float>(10 * rk.rank + p);
    auto wx = g->all_to_all(view_of(mine.data(), 2), view_of(theirs.data(), 2));
    auto wg = g->gather(view_of(one.data(), 1), view_of(both.data(), 2), {0});
    expect(!wx->completed() && !wg->completed(), "an all_to_all or gather behind the large op ran before it");
    for (auto* w : {&wa, &wb, &wc, &wbar, &wd, &wx, &wg}) (*w)->wait();
    for (int p = 0; p < 2; ++p)
      expect(theirs[static_cast<std::size_t>(p)] == static_cast<float>(10 * p + rk.rank), "all_to_all: block {} is {}",
             p, theirs[static_cast<std::size_t>(p)]);
    if (rk.rank == 0) expect(both[0] == 5.f && both[1] == 6.f, "gather: {} {}", both[0], both[1]);
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
