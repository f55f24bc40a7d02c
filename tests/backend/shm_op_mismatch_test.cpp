// shm backend, by default (no FASTRUN_DEBUG): ranks that issue different collectives fail the op
// on every rank with a message naming each rank's op (op_fingerprint.h where the ops meet on the
// channel's steps, stalled_op_check.h where one of them is made of messages), and ranks that
// issue the same ones, of every shape and algorithm path, back to back, never do.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fastrun/runtime/error.h"
#include "shm_test_support.h"

using namespace fastrun;
using namespace fastrun::shm_test;
using Clock = std::chrono::steady_clock;

namespace {

struct MismatchCase {
  const char* name;
  int ranks;
  std::function<void(Backend&, std::vector<float>&, std::vector<double>&)> issue;
  std::vector<std::string> expected;  // in every rank's message
};

const std::vector<MismatchCase>& mismatch_cases() {
  static const std::vector<MismatchCase> all = {
      {"count", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.all_reduce(view_of(f.data(), g.rank() == 0 ? 10 : 20))->wait();
       },
       {"op #1 on group 'world': rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float32 x 20, "
        "sum)"}},
      {"dtype", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>& d) {
         if (g.rank() == 0) g.all_reduce(view_of(f.data(), 10))->wait();
         else g.all_reduce(view_of(d.data(), 10))->wait();
       },
       {"rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float64 x 10, sum)"}},
      {"all_reduce against broadcast", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         if (g.rank() == 0) g.all_reduce(view_of(f.data(), 100))->wait();
         else g.broadcast(view_of(f.data(), 100), {0})->wait();
       },
       {"rank 0 called all_reduce(float32 x 100, sum), rank 1 called broadcast(float32 x 100, root 0)"}},
      // One step against the pipelined path (its first wait is two steps in), on the comm thread.
      {"small all_reduce against a large one", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.all_reduce(view_of(f.data(), g.rank() == 0 ? 10 : f.size()))->wait();
       },
       {"rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float32 x 1048576, sum)"}},
      {"broadcast roots", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.broadcast(view_of(f.data(), 300000), {g.rank()})->wait();
       },
       {"rank 0 called broadcast(float32 x 300000, root 0), rank 1 called broadcast(float32 x 300000, root 1)"}},
      // From kSingleCopyBroadcastBytes a broadcast moves by messages, after one step where the
      // ops are compared: both sizes there, and one on each side of the line.
      {"single-copy broadcasts of different counts", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.broadcast(view_of(f.data(), g.rank() == 0 ? 100000 : 120000), {0})->wait();
       },
       {"rank 0 called broadcast(float32 x 100000, root 0), rank 1 called broadcast(float32 x 120000, root 0)"}},
      {"broadcast counts across the single-copy line", 3,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.broadcast(view_of(f.data(), g.rank() == 2 ? 50000 : 100000), {0})->wait();
       },
       {"op #1 on group 'world': ranks 0,1 called broadcast(float32 x 100000, root 0), rank 2 called "
        "broadcast(float32 x 50000, root 0)"}},
      // Below the line too every rank compares every op: rank 1, whose op agrees with the root's,
      // fails with the others instead of completing and learning of it at its next op.
      {"small broadcasts, the third rank's count differs", 3,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.broadcast(view_of(f.data(), g.rank() == 2 ? 20 : 10), {0})->wait();
       },
       {"op #1 on group 'world': ranks 0,1 called broadcast(float32 x 10, root 0), rank 2 called "
        "broadcast(float32 x 20, root 0)"}},
      {"small broadcasts, a receiver's root differs", 3,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         g.broadcast(view_of(f.data(), 10), {g.rank() == 2 ? 2 : 0})->wait();
       },
       {"op #1 on group 'world': ranks 0,1 called broadcast(float32 x 10, root 0), rank 2 called "
        "broadcast(float32 x 10, root 2)"}},
      // The ops before agree: the check compares op numbers and runs after any history.
      {"third of three ranks after matching ops", 3,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         for (int i = 0; i < 5; ++i) g.all_reduce(view_of(f.data(), 64))->wait();
         g.barrier()->wait();
         if (g.rank() == 2) g.all_gather(view_of(f.data(), 8), view_of(f.data() + 8, 24))->wait();
         else g.all_reduce(view_of(f.data(), 8))->wait();
       },
       {"op #7 on group 'world': ranks 0,1 called all_reduce(float32 x 8, sum), rank 2 called all_gather(float32 x "
        "8)"}},
      // Ops made of messages never meet the others on the steps: both ranks wait until their
      // stalled waits compare the last ops through the store (stalled_op_check.h), 1 s in.
      {"gather against all_reduce (messages against steps)", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         if (g.rank() == 0) g.gather(view_of(f.data(), 10), view_of(f.data() + 10, 20), {0})->wait();
         else g.all_reduce(view_of(f.data(), 10))->wait();
       },
       {"op #1 on group 'world': rank 0 called gather(float32 x 10, root 0), rank 1 called all_reduce(float32 x 10, "
        "sum)",
        "found out of step when the op stalled"}},
      {"gather against scatter (messages against messages)", 2,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         if (g.rank() == 0) g.gather(view_of(f.data(), 10), view_of(f.data() + 10, 20), {0})->wait();
         else g.scatter(view_of(f.data(), 0), view_of(f.data() + 10, 10), {0})->wait();
       },
       {"rank 0 called gather(float32 x 10, root 0), rank 1 called scatter(float32 x 10, root 0)",
        "found out of step when the op stalled"}},
      // The first rank to find it leaves; the others, seeing that, compare at once. A message
      // names the ranks whose last ops it read, so which of 0 and 2 it names varies.
      {"all_to_all against all_reduce, 3 ranks", 3,
       [](Backend& g, std::vector<float>& f, std::vector<double>&) {
         if (g.rank() == 1) g.all_to_all(view_of(f.data(), 30), view_of(f.data() + 30, 30))->wait();
         else g.all_reduce(view_of(f.data(), 30))->wait();
       },
       {"op #1 on group 'world': ", "called all_reduce(float32 x 30, sum)", "rank 1 called all_to_all(float32 x 30)",
        "found out of step when the op stalled"}},
  };
  return all;
}

}  // namespace

TEST_CASE("shm: mismatched collectives fail on every rank, naming each rank's op", "[shm][mismatch]") {
  for (const MismatchCase& c : mismatch_cases()) {
    INFO(c.name);
    const auto out = run_ranks(c.ranks, [&c](const Rank& rk) {
      auto g = rk.world();  // op timeout 30 s (scaled): the mismatch must be found long before
      std::vector<float> f(1 << 20, 1.0f);
      std::vector<double> d(1 << 20, 1.0);
      const auto t0 = Clock::now();
      try {
        c.issue(*g, f, d);
        expect(false, "rank {}: the mismatched op completed", rk.rank);
      } catch (const ConfigError& e) {
        const std::string m = e.what();
        for (const std::string& want : c.expected) expect(m.find(want) != std::string::npos, "message: {}", m);
        expect(m.find("out of step") != std::string::npos, "message: {}", m);
        const double took = std::chrono::duration<double>(Clock::now() - t0).count();
        expect(took < 10.0, "rank {} took {:.1f} s to fail", rk.rank, took);
      }
      // The group is unusable after the failure, with an error that says so.
      try {
        g->barrier()->wait();
        expect(false, "rank {}: a barrier after the mismatch succeeded", rk.rank);
      } catch (const Error&) {
      }
    });
    INFO(describe(out));
    CHECK(all_ok(out));
  }
}

// Ranks in step, through every algorithm path (one-step and pipelined all_reduce, chunked
// broadcast, all_gather, reduce_scatter, reduce, barrier, empty ops, point-to-point
// collectives that take no step) and sizes that run inline and on the comm thread, enough ops
// for the step counter to go round the fingerprint ring (2R slots) many times; results checked.
TEST_CASE("shm: ops that agree never read as a mismatch, whatever their shapes", "[shm][mismatch]") {
  const auto out = run_ranks(3, [](const Rank& rk) {
    auto g = rk.world();
    const int n = g->size(), r = g->rank();
    const std::vector<std::size_t> sizes = {1, 7, 1000, 16384, 16385, 65536, 300000};
    for (int round = 0; round < 6; ++round) {
      for (std::size_t count : sizes) {
        std::vector<float> v(count, static_cast<float>(r + 1));
        g->all_reduce(view_of(v.data(), count))->wait();
        expect(v[count - 1] == static_cast<float>(n * (n + 1) / 2), "all_reduce of {}: {}", count, v[count - 1]);
        const int root = static_cast<int>(count % static_cast<std::size_t>(n));
        std::vector<double> b(count, static_cast<double>(r));
        g->broadcast(view_of(b.data(), count), {root})->wait();
        expect(b[0] == root, "broadcast of {} from {}: {}", count, root, b[0]);
        std::vector<float> gathered(count * static_cast<std::size_t>(n));
        std::vector<float> mine(count, static_cast<float>(r));
        g->all_gather(view_of(mine.data(), count), view_of(gathered.data(), gathered.size()))->wait();
        expect(gathered.back() == static_cast<float>(n - 1), "all_gather of {}", count);
        std::vector<float> block(count);
        std::vector<float> whole(count * static_cast<std::size_t>(n), 1.0f);
        g->reduce_scatter(view_of(whole.data(), whole.size()), view_of(block.data(), count))->wait();
        expect(block[0] == static_cast<float>(n), "reduce_scatter of {}", count);
        std::vector<float> red(count, 1.0f);
        g->reduce(view_of(red.data(), count), {ReduceOp::sum, root})->wait();
        if (r == root) expect(red[0] == static_cast<float>(n), "reduce of {}", count);
        g->all_reduce(view_of(v.data(), 0))->wait();  // empty: no step
        g->gather(view_of(mine.data(), 1), view_of(gathered.data(), r == root ? static_cast<std::size_t>(n) : 0),
                  {root})
            ->wait();
        g->barrier()->wait();
      }
      // Issued back to back and waited on at the end: queued on the comm thread in order.
      std::vector<std::vector<float>> bufs(4, std::vector<float>(300000, 1.0f));
      std::vector<WorkHandle> works;
      for (auto& b : bufs) works.push_back(g->all_reduce(view_of(b.data(), b.size())));
      std::vector<float> small(10, 1.0f);
      works.push_back(g->all_reduce(view_of(small.data(), small.size())));
      for (auto& w : works) w->wait();
      expect(small[0] == static_cast<float>(n) && bufs[3][299999] == static_cast<float>(n), "queued all_reduces");
    }
  });
  INFO(describe(out));
  CHECK(all_ok(out));
}
