// Object collectives and the NO_SYNC levels in real processes.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/objects/object_collectives.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace metrics {
struct Report {
  int rank = 0;
  std::string name;
  std::map<std::string, std::vector<double>> values;
  bool operator==(const Report&) const = default;
};
FASTRUN_SERIALIZABLE(Report, rank, name, values)
}  // namespace metrics

namespace {
metrics::Report report_of(int rank) {
  metrics::Report r{rank, std::string(static_cast<std::size_t>(rank) * 1000 + 1, static_cast<char>('a' + rank)), {}};
  for (int k = 0; k <= rank; ++k) r.values["m" + std::to_string(k)] = std::vector<double>(static_cast<std::size_t>(k) * 10, k);
  return r;
}

// `call` must throw ConfigError with exactly `want` (the object calls' argument checks), on
// this rank, before anything is sent.
void expect_refused(const std::function<void()>& call, const std::string& want) {
  try {
    call();
  } catch (const ConfigError& e) {
    if (e.what() != want) throw std::runtime_error(fmt::format("expected '{}', got '{}'", want, e.what()));
    return;
  }
  throw std::runtime_error("accepted, where it should fail with: " + want);
}
}  // namespace

TEST_CASE("object collectives: mixed sizes, 1 MiB payloads, user structs", "[objects][mp]") {
  auto results = test::run_ranks(3, [](int rank) {
    auto ctx = join({"gloo"});
    Group& g = ctx->world();

    auto all = all_gather_object(report_of(rank), &g);
    RANK_REQUIRE(all.size() == 3);
    for (int r = 0; r < 3; ++r) RANK_REQUIRE(all[static_cast<std::size_t>(r)] == report_of(r));

    // 1 MiB from src=1 in a world of 3 (fastNLP behaviour 43).
    std::string mib(1 << 20, '\0');
    for (std::size_t i = 0; i < mib.size(); ++i) mib[i] = static_cast<char>(i * 7 + 1);
    const std::string got = broadcast_object(rank == 1 ? mib : std::string("ignored"), 1, &g);
    RANK_REQUIRE(got == mib);

    // Different-sized 1 MiB-ish payloads gathered everywhere, then to one root.
    std::vector<std::int64_t> payload(static_cast<std::size_t>((1 << 17) + rank * 1000), rank);
    auto gathered = all_gather_object(payload, &g);
    for (int r = 0; r < 3; ++r)
      RANK_REQUIRE(gathered[static_cast<std::size_t>(r)].size() == static_cast<std::size_t>((1 << 17) + r * 1000));
    auto at_two = gather_object(std::make_pair(rank, std::to_string(rank)), 2, &g);
    RANK_REQUIRE(at_two.has_value() == (rank == 2));
    if (at_two) RANK_REQUIRE((*at_two)[1] == std::make_pair(1, std::string("1")));

    // A rank that sends another type: the receivers' error names it.
    try {
      if (rank == 1) all_gather_object(std::string("abc"), &g);
      else all_gather_object(std::vector<int>{1, 2, 3}, &g);
      throw std::runtime_error("no decode error");
    } catch (const SerializationError& e) {
      const std::string m = e.what();
      if (rank != 1 && m.find("sent by rank 1") == std::string::npos) throw std::runtime_error("unexpected: " + m);
    }
    // The group is still in step afterwards.
    RANK_REQUIRE(broadcast_object(rank == 0 ? 42 : 0, 0, &g) == 42);
    // A root outside the group: refused on every rank before anything is sent, naming it. Before,
    // gather_object gathered and returned nullopt everywhere, and scatter_object's error named
    // a broadcast.
    expect_refused([&] { broadcast_object(1, 3, &g); }, "broadcast_object: root 3 is not a rank of the group (0..2)");
    expect_refused([&] { gather_object(1, 3, &g); }, "gather_object: root 3 is not a rank of the group (0..2)");
    expect_refused([&] { scatter_object(std::vector<int>{1, 2, 3}, -1, &g); },
                   "scatter_object: root -1 is not a rank of the group (0..2)");
    RANK_REQUIRE(broadcast_object(rank == 2 ? 7 : 0, 2, &g) == 7);

    // Sub-group: roots are group ranks.
    auto sub = ctx->new_group({2, 1});
    if (sub) RANK_REQUIRE(broadcast_object(rank == 1 ? std::string("from 1") : std::string(), 1, sub.get()) == "from 1");
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("NO_SYNC levels, guards and rank_zero_call across ranks", "[driver][mp]") {
  auto results = test::run_ranks(2, [](int rank) {
    auto ctx = join({"gloo"});
    RANK_REQUIRE(is_global_zero() == (rank == 0));
    {
      NoSyncGuard g(1);  // barriers are no-ops: rank 0 barriers alone without hanging
      if (rank == 0) {
        barrier();
        ctx->world().barrier()->wait();
      }
      std::int64_t v = 1;  // other collectives still communicate at level 1
      ctx->world().all_reduce(view_of(&v, 1))->wait();
      RANK_REQUIRE(v == 2);
    }
    {
      NoSyncGuard g(2);  // every collective is local
      std::int64_t v = rank + 10;
      ctx->world().all_reduce(view_of(&v, 1))->wait();
      RANK_REQUIRE(v == rank + 10);
      std::vector<std::int64_t> out(2, -1);
      ctx->world().all_gather(view_of(&v, 1), view_of(out.data(), 2))->wait();
      RANK_REQUIRE(out[static_cast<std::size_t>(rank)] == rank + 10 && out[static_cast<std::size_t>(1 - rank)] == -1);
      RANK_REQUIRE(fastrun::all_gather(rank) == std::vector<int>{rank});
      // One broadcast_object: at level 2 every rank keeps its own value, with or without a group.
      RANK_REQUIRE(fastrun::broadcast_object(rank, 0) == rank);
      RANK_REQUIRE(broadcast_object(rank, 0, &ctx->world()) == rank);
    }
    // A collective inside rank_zero_call runs locally on rank 0 only: no deadlock.
    auto r0 = rank_zero_call([&] {
      std::int64_t v = 5;
      ctx->world().all_reduce(view_of(&v, 1))->wait();
      barrier();
      return fastrun::all_gather(v);
    });
    RANK_REQUIRE(r0.has_value() == (rank == 0));
    if (r0) RANK_REQUIRE(*r0 == std::vector<std::int64_t>{5});
    {
      AllRanksGuard all;
      RANK_REQUIRE(is_global_zero());
    }
    // Back at level 0, everything communicates and the ranks are still in step.
    RANK_REQUIRE(no_sync_level() == 0);
    RANK_REQUIRE(fastrun::all_gather(rank * 3) == (std::vector<int>{0, 3}));
    RANK_REQUIRE(fastrun::broadcast_object(rank == 1 ? std::string("one") : std::string(), 1) == "one");
    // Every object collective takes its group last and, without one, acts on the current world.
    RANK_REQUIRE(fastrun::all_gather_object(rank * 5) == (std::vector<int>{0, 5}));
    RANK_REQUIRE(fastrun::gather_object(rank, 1).has_value() == (rank == 1));
    RANK_REQUIRE(fastrun::scatter_object(std::vector<int>{10, 11}, 0) == 10 + rank);
    barrier();
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("FASTRUN_NO_SYNC from the environment", "[driver][mp]") {
  test::RankRunOptions o;
  o.extra_env = {{"FASTRUN_NO_SYNC", "2"}};
  auto results = test::run_ranks(
      2,
      [](int rank) {
        auto ctx = join({"gloo"});
        RANK_REQUIRE(no_sync_level() == 2);
        std::int64_t v = rank;
        ctx->world().all_reduce(view_of(&v, 1))->wait();
        RANK_REQUIRE(v == rank);
        RANK_REQUIRE(all_gather_object(rank, &ctx->world()) == std::vector<int>{rank});
        RANK_REQUIRE(gather_object(rank, 1, &ctx->world()).has_value() == (rank == 1));
        if (rank == 0) barrier();
      },
      o);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("object collectives: scatter_object, send_object and recv_object on shm and gloo", "[objects][p2p][mp]") {
  for (const char* backend : {"shm", "gloo"}) {
    INFO(backend);
    auto results = test::run_ranks(3, [backend](int rank) {
      auto ctx = join({backend});
      Group& g = ctx->world();
      // Root 1 scatters reports of very different sizes (one empty map, one 2 KiB name).
      std::vector<metrics::Report> values;
      if (rank == 1)
        for (int r = 0; r < 3; ++r) values.push_back(report_of(2 - r));
      const metrics::Report mine = scatter_object(values, 1, &g);
      RANK_REQUIRE(mine == report_of(2 - rank));
      // A ring of objects passed on from rank 0, two tags, 1 MiB on one of them. Blocking sends
      // (gloo's complete only once the peer receives): each rank receives before it sends on.
      const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
      if (rank == 0) {
        send_object(report_of(rank), next, 5, &g);
        send_object(std::string(1 << 20, 'x'), next, 6, &g);
        RANK_REQUIRE(recv_object<metrics::Report>(prev, 5, &g) == report_of(prev));
        RANK_REQUIRE(recv_object<std::string>(prev, 6, &g) == std::string(1 << 20, 'x'));
      } else {
        const auto report = recv_object<metrics::Report>(prev, 5, &g);
        const auto big = recv_object<std::string>(prev, 6, &g);
        RANK_REQUIRE(report == report_of(prev));
        send_object(report_of(rank), next, 5, &g);
        send_object(big, next, 6, &g);
      }
      // A peer or tag the group's send/recv would refuse: named as the call, before anything
      // is sent (before, the message named the inner send or recv).
      expect_refused([&] { send_object(1, 7, 0, &g); }, "send_object: peer 7 is not a rank of the group (0..2)");
      expect_refused([&] { recv_object<int>(rank, 0, &g); },
                     fmt::format("recv_object: peer {} is this rank; send/recv to self is not supported (copy locally)",
                                 rank));
      expect_refused([&] { send_object(1, next, -1, &g); }, "send_object: tag -1 is negative; tags are 0 or more");
      bool refused = false;
      try {
        scatter_object(std::vector<int>{1, 2}, rank, &g);  // every rank is "root" of a 2-entry list
      } catch (const ConfigError& e) {
        refused = std::string(e.what()).find("needs one per rank") != std::string::npos;
      }
      RANK_REQUIRE(refused);
    });
    REQUIRE(test::all_ok(results));
  }
}
