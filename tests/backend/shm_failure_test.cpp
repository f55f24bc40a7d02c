// shm backend: groups side by side, failures (a rank SIGKILLed mid-collective, an op timeout),
// argument errors, a group of one, and that nothing is left in /dev/shm.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/shm/segment_names.h"
#include "shm_test_support.h"
#include "shm_values.h"

using namespace fastrun;
using namespace fastrun::shm_test;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sum all-reduce of `count` floats where rank r contributes r+1 (+i); checks the result.
void sum_check(Backend& g, std::size_t count, float salt) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(g.rank() + 1) + salt + static_cast<float>(i % 7);
  g.all_reduce(view_of(v.data(), count))->wait();
  const int n = g.size();
  for (std::size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * (salt + static_cast<float>(i % 7));
    expect(v[i] == want, "group of {}: element {} is {}, expected {}", n, i, v[i], want);
  }
}

// The distinct /dev/shm segments this process maps for the groups of job `run_id` (the job's
// store excluded), told apart by inode: two groups sharing one segment would count once.
std::size_t mapped_group_segments(const std::string& run_id) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> inodes;
  // The job's store is "<run_id>-store" (shm_test_support.h); its groups' segments "<run_id>@…".
  const std::string group_prefix = "/dev/shm/" + shm_store::job_segment_prefix(run_id);
  for (std::string line; std::getline(maps, line);) {
    const auto path = line.find("/dev/shm/");
    if (path == std::string::npos || line.compare(path, group_prefix.size(), group_prefix) != 0) continue;
    if (line.find("-p2p") != std::string::npos) continue;  // a group's mailboxes (p2p_engine.h), not its channel
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode;
    fields >> range >> perms >> offset >> dev >> inode;
    inodes.insert(dev + ":" + inode);
  }
  return inodes.size();
}

}  // namespace

TEST_CASE("shm: sub-groups and concurrent groups each get their own segment", "[shm]") {
  std::string run_id;
  const auto out = run_ranks(
      4,
      [](const Rank& rk) {
        auto world = rk.world();
        auto pair = rk.group(rk.rank < 2 ? "low" : "high", rk.rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3});
        auto odd = rk.group("evenodd" + std::to_string(rk.rank % 2), rk.rank % 2 ? std::vector<int>{1, 3} : std::vector<int>{0, 2});
        std::vector<int> all = {0, 1, 2, 3};
        auto again = rk.group("world-again", all);  // an independent group over the same ranks
        for (int round = 0; round < 20; ++round) {
          sum_check(*world, 5 + static_cast<std::size_t>(round) * 4099, static_cast<float>(round));
          sum_check(*pair, 300001, static_cast<float>(round));
          sum_check(*odd, 17, static_cast<float>(round));
          sum_check(*again, 70000, static_cast<float>(round));
          pair->barrier()->wait();
        }
        const std::size_t segments = mapped_group_segments(rk.run_id);
        expect(segments == 4, "rank {} maps {} group segments for its 4 groups", rk.rank, segments);
      },
      {}, &run_id);
  INFO(describe(out));
  CHECK(all_ok(out));
  CHECK(shm_entries(run_id).empty());
}

TEST_CASE("shm: a rank SIGKILLed mid-collective makes the others fail fast, naming it", "[shm]") {
  std::string run_id;
  RunOptions opt;
  opt.kill_rank = 2;
  opt.kill_after = std::chrono::milliseconds(400);
  const auto out = run_ranks(
      3,
      [](const Rank& rk) {
        auto g = rk.world(std::chrono::seconds(60));
        std::vector<float> v(3'000'001, 1.0f);  // several pipeline chunks per op
        const auto start = Clock::now();
        for (;;) {
          try {
            g->all_reduce(view_of(v.data(), v.size()))->wait();
            std::fill(v.begin(), v.end(), 1.0f);
          } catch (const PeerFailure& e) {
            const std::string what = e.what();
            expect(what.find("rank 2") != std::string::npos, "the error does not name rank 2: {}", what);
            // The group is unusable afterwards, and says why.
            try {
              g->barrier()->wait();
              expect(false, "barrier after a failure succeeded");
            } catch (const BackendError& again) {
              expect(std::string(again.what()).find("earlier failure") != std::string::npos, "{}", again.what());
            }
            return;
          }
          expect(seconds_since(start) < 10, "still no failure 10 s after rank 2 was killed");
        }
      },
      opt, &run_id);
  INFO(describe(out));
  CHECK(out[2].signal == SIGKILL);
  CHECK((out[0].exited && out[0].code == 0));
  CHECK((out[1].exited && out[1].code == 0));
  CHECK(shm_entries(run_id).empty());
}

TEST_CASE("shm: an op timeout names the rank that did not arrive and the late rank fails too", "[shm]") {
  std::string run_id;
  const auto out = run_ranks(
      2,
      [](const Rank& rk) {
        auto g = rk.world(std::chrono::milliseconds(300));
        sum_check(*g, 100, 0);
        if (rk.rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(800));
          // Rank 0 had published its data before giving up, so this op may still complete;
          // the next one cannot.
          try {
            sum_check(*g, 100, 0);
            sum_check(*g, 100, 0);
            expect(false, "the late rank's all_reduce succeeded");
          } catch (const PeerFailure& e) {
            expect(std::string(e.what()).find("rank 0") != std::string::npos, "{}", e.what());
          }
          return;
        }
        const auto t0 = Clock::now();
        try {
          sum_check(*g, 100, 0);
          expect(false, "all_reduce with an absent peer succeeded");
        } catch (const TimeoutError& e) {
          expect(std::string(e.what()).find("[rank 1]") != std::string::npos, "{}", e.what());
          expect(seconds_since(t0) < 2.0, "timeout took {} s", seconds_since(t0));
        }
      },
      {}, &run_id);
  INFO(describe(out));
  CHECK(all_ok(out));
  CHECK(shm_entries(run_id).empty());
}

TEST_CASE("shm: barrier waits for the last rank", "[shm]") {
  // Barrier i has rank i arrive 150 ms late. No rank may leave a barrier before the last rank
  // arrived at it: each rank's arrival and departure times (steady_clock is CLOCK_MONOTONIC,
  // one clock for every process) are compared after the loop, so a rank that was merely
  // descheduled between two barriers cannot make the check fail or pass by accident.
  const auto out = run_ranks(3, [](const Rank& rk) {
    auto g = rk.world();
    const auto ns = [] { return static_cast<std::int64_t>(Clock::now().time_since_epoch().count()); };
    std::vector<std::int64_t> arrived(3), left(3);
    for (int i = 0; i < 3; ++i) {
      if (rk.rank == i) std::this_thread::sleep_for(std::chrono::milliseconds(150));
      arrived[static_cast<std::size_t>(i)] = ns();
      g->barrier()->wait();
      left[static_cast<std::size_t>(i)] = ns();
    }
    std::vector<std::int64_t> all(9);
    g->all_gather(view_of(arrived.data(), 3), view_of(all.data(), 9))->wait();
    for (std::size_t i = 0; i < 3; ++i) {
      const std::int64_t last = std::max({all[i], all[3 + i], all[6 + i]});
      expect(left[i] >= last, "barrier {} returned on rank {} {} ns before the last rank arrived", i, rk.rank,
             last - left[i]);
    }
  });
  INFO(describe(out));
  CHECK(all_ok(out));
}

TEST_CASE("shm: a waiting rank sleeps instead of spinning", "[shm]") {
  const auto out = run_ranks(2, [](const Rank& rk) {
    auto g = rk.world();
    g->barrier()->wait();
    if (rk.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      g->barrier()->wait();
      return;
    }
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    g->barrier()->wait();  // ~300 ms of waiting for rank 1
    ::getrusage(RUSAGE_SELF, &after);
    auto cpu_ms = [](const rusage& u) {
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
    };
    const double used = cpu_ms(after) - cpu_ms(before);
    expect(used < 60, "waiting ~300 ms in a barrier used {} ms of CPU", used);
  });
  INFO(describe(out));
  CHECK(all_ok(out));
}

TEST_CASE("shm: bad arguments are ConfigErrors and a group of one works without a store", "[shm]") {
  GroupSpec spec;
  spec.name = "solo";
  spec.run_id = unique_run_id();
  auto g = make_group(spec);
  CHECK(g->backend_name() == "shm");
  std::vector<float> v = {1, 2, 3}, out(3);
  g->all_reduce(view_of(v.data(), 3), AllReduceOptions{ReduceOp::avg})->wait();
  CHECK(v == std::vector<float>{1, 2, 3});
  g->all_gather(view_of(v.data(), 3), view_of(out.data(), 3))->wait();
  CHECK(out == v);
  g->reduce_scatter(view_of(v.data(), 3), view_of(out.data(), 3))->wait();
  g->broadcast(view_of(v.data(), 3))->wait();
  g->barrier()->wait();
  CHECK_THROWS_AS(g->all_gather(view_of(v.data(), 3), view_of(out.data(), 2)), ConfigError);
  CHECK_THROWS_AS(g->broadcast(view_of(v.data(), 3), BroadcastOptions{1}), ConfigError);
  BufferView device{v.data(), 3, DType::float32, DeviceKind::cuda};
  CHECK_THROWS_AS(g->all_reduce(device), ConfigError);
  GroupSpec two = spec;
  two.size = 2;
  CHECK_THROWS_AS(make_group(two), ConfigError);  // no store
  two.rank = 2;
  CHECK_THROWS_AS(make_group(two), ConfigError);
  CHECK(shm_entries(spec.run_id).empty());
}
