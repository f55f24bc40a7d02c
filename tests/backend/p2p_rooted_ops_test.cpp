// Point-to-point, rooted and all-to-all ops on the shm and gloo backends, in real processes
// (test::run_ranks: forked ranks, a timeout, every child reaped): 2, 3 and 4 ranks, odd sizes,
// every dtype and reduce op checked element by element (bit for bit: shm_values.h), sub-groups,
// a ring exchange that deadlocks if sends block, argument errors worded the same on both
// backends, and a peer killed during a recv.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "shm_values.h"
#include "test_support/rank_runner.h"

using namespace fastrun;
using shm_test::get;
using shm_test::put;

namespace {

test::RankRunOptions within(std::chrono::seconds limit) {
  test::RankRunOptions o;
  o.timeout = limit;
  return o;
}

struct Bytes {
  DType t;
  std::vector<std::uint8_t> b;
  Bytes(DType type, std::size_t n) : t(type), b(n * dtype_size(type) + 1) {}  // +1: never null
  BufferView view(std::size_t n) { return BufferView{b.data(), n, t, DeviceKind::cpu}; }
  void* data() { return b.data(); }
};

// A value unique to (sender, receiver, element), exact in every dtype.
double mark(int from, int to, std::size_t i) { return static_cast<double>((from * 7 + to * 3 + static_cast<int>(i % 23)) % 61); }

void expect_value(double got, double want, const std::string& what) {
  if (got != want) throw std::runtime_error(fmt::format("{}: got {}, expected {}", what, got, want));
}

// Ring exchange through batch_send_recv: every rank sends to the next and receives from the
// previous at once. Posting a blocking send first would deadlock once the message outgrows
// any buffering (the 3 MiB case), and tags keep two messages between one pair apart.
void check_p2p(Group& g) {
  const int n = g.size(), me = g.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{3 << 20} / 4 + 3}) {
    std::vector<float> out(count), in(count, -1), out2(5), in2(5, -1);
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(mark(me, next, i));
    for (std::size_t i = 0; i < 5; ++i) out2[i] = static_cast<float>(100 + me);
    auto w = g.batch_send_recv({{P2POp::Kind::send, view_of(out.data(), count), next, 3},
                                {P2POp::Kind::send, view_of(out2.data(), 5), next, 4},
                                {P2POp::Kind::recv, view_of(in2.data(), 5), prev, 4},
                                {P2POp::Kind::recv, view_of(in.data(), count), prev, 3}});
    w->wait();
    RANK_REQUIRE(w->completed());
    for (std::size_t i = 0; i < count; ++i) expect_value(in[i], mark(prev, me, i), fmt::format("ring [{}]", i));
    RANK_REQUIRE(in2[4] == static_cast<float>(100 + prev));
  }
  // Thousands of small messages of odd sizes posted before the receiver is there: the pair's
  // ring fills and drains at every possible boundary (header, payload, wrap-around).
  if (me < 2) {
    const int peer = 1 - me;
    const std::size_t k = 3000;
    std::vector<std::vector<std::uint8_t>> msgs(k);
    std::vector<WorkHandle> works;
    for (std::size_t m = 0; m < k; ++m) msgs[m].assign(4 * (1 + (m * 37) % 111), 0);
    if (me == 0) {
      for (std::size_t m = 0; m < k; ++m) {
        for (std::size_t i = 0; i < msgs[m].size(); ++i) msgs[m][i] = static_cast<std::uint8_t>(m * 31 + i);
        works.push_back(g.send(BufferView{msgs[m].data(), msgs[m].size() / 4, DType::int32}, peer, {7}));
      }
    } else {
      ::usleep(20'000);
      for (std::size_t m = 0; m < k; ++m)
        works.push_back(g.recv(BufferView{msgs[m].data(), msgs[m].size() / 4, DType::int32}, peer, {7}));
    }
    for (auto& w : works) w->wait();
    if (me == 1)
      for (std::size_t m = 0; m < k; ++m)
        for (std::size_t i = 0; i < msgs[m].size(); ++i)
          if (msgs[m][i] != static_cast<std::uint8_t>(m * 31 + i))
            throw std::runtime_error(fmt::format("small message {} byte {}: got {}", m, i, msgs[m][i]));
  }
  // Plain send/recv on the lowest pair, tags received in the other order, every dtype.
  if (me < 2) {
    const int peer = 1 - me;
    for (DType t : shm_test::kAllDTypes) {
      const std::size_t count = 41;
      Bytes a(t, count), b(t, count);
      if (me == 0) {
        for (std::size_t i = 0; i < count; ++i) {
          put(t, a.data(), i, mark(0, 1, i));
          put(t, b.data(), i, mark(0, 1, i + 5));
        }
        auto w1 = g.send(a.view(count), peer, {1});
        auto w2 = g.send(b.view(count), peer, {2});
        w2->wait();
        w1->wait();
      } else {
        auto w2 = g.recv(b.view(count), peer, {2});
        auto w1 = g.recv(a.view(count), peer, {1});
        w2->wait();
        w1->wait();
        for (std::size_t i = 0; i < count; ++i) {
          expect_value(get(t, a.data(), i), mark(0, 1, i), fmt::format("send/recv {} tag 1 [{}]", dtype_name(t), i));
          expect_value(get(t, b.data(), i), mark(0, 1, i + 5), fmt::format("send/recv {} tag 2 [{}]", dtype_name(t), i));
        }
      }
    }
  }
}

void check_rooted(Group& g) {
  const int n = g.size(), me = g.rank();
  const std::size_t count = 37;  // odd, not a multiple of any group size here
  for (DType t : shm_test::kAllDTypes) {
    const std::string dt(dtype_name(t));
    for (ReduceOp op : shm_test::kAllOps) {  // reduce to the last rank, bit for bit
      const int root = n - 1;
      Bytes b(t, count), want(t, count), mine(t, count);
      for (std::size_t i = 0; i < count; ++i) {
        put(t, b.data(), i, shm_test::input_value(me, i, op));
        put(t, mine.data(), i, shm_test::input_value(me, i, op));
        shm_test::put_expected(t, want.data(), i, op, n);
      }
      g.reduce(b.view(count), {op, root})->wait();
      const long bad = shm_test::first_mismatch(t, b.data(), me == root ? want.data() : mine.data(), count);
      if (bad >= 0)
        throw std::runtime_error(fmt::format("reduce {} {} on rank {}: element {} is {}", dt, reduce_op_name(op), me,
                                             bad, get(t, b.data(), static_cast<std::size_t>(bad))));
    }
    const auto N = static_cast<std::size_t>(n);
    {  // gather to rank 1 % n
      const int root = 1 % n;
      Bytes in(t, count), out(t, count * N);
      for (std::size_t i = 0; i < count; ++i) put(t, in.data(), i, mark(me, root, i));
      g.gather(in.view(count), me == root ? out.view(count * N) : BufferView{}, {root})->wait();
      if (me == root)
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < count; ++i)
            expect_value(get(t, out.data(), static_cast<std::size_t>(r) * count + i), mark(r, root, i),
                         fmt::format("gather {} from rank {} [{}]", dt, r, i));
    }
    {  // scatter from rank 0
      Bytes in(t, count * N), out(t, count);
      if (me == 0)
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < count; ++i) put(t, in.data(), static_cast<std::size_t>(r) * count + i, mark(0, r, i));
      g.scatter(me == 0 ? in.view(count * N) : BufferView{}, out.view(count), {0})->wait();
      for (std::size_t i = 0; i < count; ++i)
        expect_value(get(t, out.data(), i), mark(0, me, i), fmt::format("scatter {} [{}]", dt, i));
    }
    {  // all_to_all, equal blocks
      Bytes in(t, count * N), out(t, count * N);
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i) put(t, in.data(), static_cast<std::size_t>(r) * count + i, mark(me, r, i));
      g.all_to_all(in.view(count * N), out.view(count * N))->wait();
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i)
          expect_value(get(t, out.data(), static_cast<std::size_t>(r) * count + i), mark(r, me, i),
                       fmt::format("all_to_all {} from rank {} [{}]", dt, r, i));
    }
    {  // all_to_allv: rank a sends (a + b) % 4 * 5 + 1 elements to rank b (an empty one too)
      auto len = [](int a, int b) -> std::size_t { return (a + b) % 4 == 3 ? 0 : static_cast<std::size_t>((a + b) % 4 * 5 + 1); };
      std::vector<std::size_t> sc(N), rc(N);
      for (int r = 0; r < n; ++r) {
        sc[static_cast<std::size_t>(r)] = len(me, r);
        rc[static_cast<std::size_t>(r)] = len(r, me);
      }
      const std::size_t sin = std::accumulate(sc.begin(), sc.end(), std::size_t{0});
      const std::size_t sout = std::accumulate(rc.begin(), rc.end(), std::size_t{0});
      Bytes in(t, sin), out(t, sout);
      std::size_t at = 0;
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < sc[static_cast<std::size_t>(r)]; ++i) put(t, in.data(), at++, mark(me, r, i));
      g.all_to_allv(in.view(sin), sc, out.view(sout), rc)->wait();
      at = 0;
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < rc[static_cast<std::size_t>(r)]; ++i)
          expect_value(get(t, out.data(), at++), mark(r, me, i), fmt::format("all_to_allv {} from rank {} [{}]", dt, r, i));
    }
  }
  {  // a large reduce (many channel chunks on shm), int64 sum and float32 max, every element
    const std::size_t count = (1 << 19) + 7;
    std::vector<std::int64_t> a(count);
    std::vector<float> b(count);
    for (std::size_t i = 0; i < count; ++i) {
      a[i] = static_cast<std::int64_t>(i) * (me + 1);
      b[i] = static_cast<float>((i + static_cast<std::size_t>(me) * 7) % 1000);
    }
    g.reduce(view_of(a.data(), count), {ReduceOp::sum, 0})->wait();
    g.reduce(view_of(b.data(), count), {ReduceOp::max, n - 1})->wait();
    const std::int64_t factor = static_cast<std::int64_t>(n) * (n + 1) / 2;
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t want_a = static_cast<std::int64_t>(i) * (me == 0 ? factor : me + 1);
      if (a[i] != want_a) throw std::runtime_error(fmt::format("large reduce sum [{}]: got {}, expected {}", i, a[i], want_a));
      float want_b = static_cast<float>((i + static_cast<std::size_t>(me) * 7) % 1000);
      if (me == n - 1) {
        want_b = 0;
        for (int r = 0; r < n; ++r) want_b = std::max(want_b, static_cast<float>((i + static_cast<std::size_t>(r) * 7) % 1000));
      }
      if (b[i] != want_b) throw std::runtime_error(fmt::format("large reduce max [{}]: got {}, expected {}", i, b[i], want_b));
    }
  }
  {  // a large all_to_all (rendezvous-sized blocks on shm)
    const std::size_t block = (1 << 20) + 7;
    std::vector<std::int32_t> in(block * static_cast<std::size_t>(n)), out(in.size(), -1);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::int32_t>(me * 1000003 + static_cast<int>(i));
    g.all_to_all(view_of(in.data(), in.size()), view_of(out.data(), out.size()))->wait();
    for (int r = 0; r < n; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * block;
      RANK_REQUIRE(out[at] == static_cast<std::int32_t>(r * 1000003 + me * static_cast<int>(block)));
      RANK_REQUIRE(out[at + block - 1] == static_cast<std::int32_t>(r * 1000003 + me * static_cast<int>(block) + static_cast<int>(block) - 1));
    }
  }
  g.barrier()->wait();
}

void check_all(Group& g) {
  check_p2p(g);
  check_rooted(g);
}

}  // namespace

TEST_CASE("p2p and rooted ops: every op, dtype and reduce op on 2, 3 and 4 ranks", "[shm][gloo][p2p][mp]") {
  for (const char* backend : {"shm", "gloo"})
    for (int n : {2, 3, 4}) {
      INFO(backend << " on " << n << " ranks");
      auto results = test::run_ranks(
          n,
          [backend](int) {
            auto ctx = join({backend});
            RANK_REQUIRE(ctx->world().backend_name() == backend);
            check_all(ctx->world());
          },
          within(std::chrono::seconds(120)));
      REQUIRE(test::all_ok(results));
    }
}

TEST_CASE("p2p and rooted ops on sub-groups", "[shm][gloo][p2p][mp]") {
  for (const char* backend : {"shm", "gloo"}) {
    INFO(backend);
    auto results = test::run_ranks(
        4,
        [backend](int rank) {
          auto ctx = join({backend});
          auto odd = ctx->new_group({3, 0, 1});  // group rank 0 is global rank 3
          RANK_REQUIRE((odd != nullptr) == (rank != 2));
          if (odd) check_all(*odd);
          std::int64_t w = 1;
          ctx->world().all_reduce(view_of(&w, 1))->wait();
          RANK_REQUIRE(w == 4);
        },
        within(std::chrono::seconds(120)));
    REQUIRE(test::all_ok(results));
  }
}

TEST_CASE("shm p2p without single-copy reads: every message through the rings", "[shm][p2p][mp]") {
  auto results = test::run_ranks(
      3,
      [](int) {
        shm::set_single_copy_allowed(false);  // as where ptrace rules or seccomp forbid it
        auto ctx = join({"shm"});
        check_all(ctx->world());
      },
      within(std::chrono::seconds(120)));
  REQUIRE(test::all_ok(results));
}

namespace {

// What each bad call throws, as "<ConfigError or other>: <message>".
std::vector<std::string> bad_argument_messages(Group& g) {
  std::vector<std::string> out;
  auto record = [&](auto&& call) {
    try {
      call();
      out.push_back("no error");
    } catch (const ConfigError& e) {
      out.push_back(std::string("ConfigError: ") + e.what());
    } catch (const std::exception& e) {
      out.push_back(std::string("other: ") + e.what());
    }
  };
  std::vector<float> a(6), b(6);
  record([&] { g.send(view_of(a.data(), 6), 5); });
  record([&] { g.recv(view_of(a.data(), 6), g.rank()); });
  record([&] { g.send(view_of(a.data(), 6), 1 - g.rank(), {-3}); });
  record([&] { g.batch_send_recv({{P2POp::Kind::send, view_of(a.data(), 6), 0, 0}, {P2POp::Kind::recv, view_of(b.data(), 6), 7, 0}}); });
  record([&] { g.reduce(view_of(a.data(), 6), {ReduceOp::sum, 2}); });
  record([&] { g.broadcast(view_of(a.data(), 6), {-1}); });
  record([&] { g.gather(view_of(a.data(), 3), view_of(b.data(), 5), {g.rank()}); });
  record([&] { g.scatter(view_of(a.data(), 4), view_of(b.data(), 3), {g.rank()}); });
  record([&] { g.all_to_all(view_of(a.data(), 5), view_of(b.data(), 5)); });
  std::vector<double> d(6);
  record([&] { g.all_to_all(view_of(a.data(), 6), view_of(d.data(), 6)); });
  record([&] { g.all_to_allv(view_of(a.data(), 6), {3, 2}, view_of(b.data(), 6), {3, 3}); });
  record([&] { g.all_to_allv(view_of(a.data(), 6), {3, 3, 0}, view_of(b.data(), 6), {3, 3}); });
  return out;
}

}  // namespace

TEST_CASE("p2p and rooted ops: bad arguments are ConfigErrors worded the same on shm and gloo", "[shm][gloo][p2p][mp]") {
  auto results = test::run_ranks(2, [](int rank) {
    std::vector<std::string> first;
    for (const char* backend : {"shm", "gloo"}) {
      auto ctx = join({backend});
      auto got = bad_argument_messages(ctx->world());
      for (const auto& m : got)
        if (m.rfind("ConfigError: ", 0) != 0) throw std::runtime_error(fmt::format("{}: not a ConfigError: {}", backend, m));
      if (first.empty()) {
        first = got;
        continue;
      }
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != first[i])
          throw std::runtime_error(fmt::format("case {}: shm said '{}', gloo said '{}'", i, first[i], got[i]));
      ctx->world().barrier()->wait();
    }
    if (rank == 0) {
      // A sample, to keep the wording honest.
      RANK_REQUIRE(first[0] == "ConfigError: send on group 'world': peer 5 is not a rank of the group (0..1)");
      RANK_REQUIRE(first[4] == "ConfigError: reduce on group 'world': root 2 is not a rank of the group (0..1)");
      RANK_REQUIRE(first[2].find("tag -3 is negative") != std::string::npos);
      RANK_REQUIRE(first[5] == "ConfigError: broadcast on group 'world': root -1 is not a rank of the group (0..1)");
    }
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("p2p: a peer killed during a recv fails the survivor with PeerFailure naming it", "[shm][gloo][p2p][mp]") {
  for (const char* backend : {"shm", "gloo"}) {
    INFO(backend);
    auto results = test::run_ranks(
        2,
        [backend](int rank) {
          auto ctx = join({backend});
          auto& g = ctx->world();
          g.barrier()->wait();
          if (rank == 1) {
            ::usleep(100'000);
            ::raise(SIGKILL);
          }
          std::vector<float> big(1 << 20), out(1 << 20);
          std::string error;
          try {
            g.recv(view_of(big.data(), big.size()), 1, {0})->wait(std::chrono::seconds(20));
          } catch (const PeerFailure& e) {
            error = e.what();
          }
          if (error.find("rank 1") == std::string::npos)
            throw std::runtime_error(fmt::format("{}: expected a PeerFailure naming rank 1, got '{}'", backend, error));
          // A send to the dead rank fails too (at once: the group is unusable, naming the cause).
          bool failed = false;
          try {
            g.send(view_of(out.data(), out.size()), 1, {0})->wait(std::chrono::seconds(20));
          } catch (const Error& e) {
            failed = std::string(e.what()).find("rank 1") != std::string::npos;
          }
          if (!failed) throw std::runtime_error(fmt::format("{}: a send to the dead rank 1 did not fail naming it", backend));
        },
        within(std::chrono::seconds(60)));
    REQUIRE(results.size() == 2);
    INFO(test::describe(results));
    CHECK(results[0].ok());
    CHECK(results[1].signal == SIGKILL);
  }
}
