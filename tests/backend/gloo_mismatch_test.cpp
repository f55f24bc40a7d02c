// Ranks that issue different collectives on gloo (op, dtype, count, root) must never crash a
// process: every rank ends with a clear error from its Work (or completes), none dies of
// SIGABRT from an uncaught gloo::EnforceNotMet.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

struct Case {
  const char* name;  // what differs between the ranks
  std::function<WorkHandle(Group&, int rank, std::vector<float>&, std::vector<double>&)> issue;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"count", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         return g.all_reduce(view_of(f.data(), rank == 0 ? 10 : 12));
       }},
      {"dtype", [](Group& g, int rank, std::vector<float>& f, std::vector<double>& d) {
         return rank == 0 ? g.all_reduce(view_of(f.data(), 10)) : g.all_reduce(view_of(d.data(), 10));
       }},
      {"op", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         return rank == 0 ? g.all_reduce(view_of(f.data(), 100)) : g.broadcast(view_of(f.data(), 100), {0});
       }},
      {"root", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         return g.broadcast(view_of(f.data(), 100), {rank});
       }},
      {"all_gather count", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         const std::size_t n = rank == 0 ? 5 : 7;
         return g.all_gather(view_of(f.data(), n), view_of(f.data() + 100, n * static_cast<std::size_t>(g.size())));
       }},
      {"gather root", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         return g.gather(view_of(f.data(), 10), view_of(f.data() + 100, 10 * static_cast<std::size_t>(g.size())), {rank});
       }},
      {"recv size", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         return rank == 0 ? g.send(view_of(f.data(), 10), 1) : g.recv(view_of(f.data(), 12), 0);
       }},
      {"all_to_allv counts", [](Group& g, int rank, std::vector<float>& f, std::vector<double>&) {
         std::vector<std::size_t> sc(2, 3), rc(2, 3);
         if (rank == 0) sc[1] = 4;
         const std::size_t sin = sc[0] + sc[1];
         return g.all_to_allv(view_of(f.data(), sin), sc, view_of(f.data() + 100, 6), rc);
       }},
  };
  return all;
}

}  // namespace

TEST_CASE("gloo: mismatched collectives end in errors, never a crash", "[gloo][mismatch][mp]") {
  for (const Case& c : cases()) {
    INFO(c.name);
    test::RankRunOptions options;
    options.timeout = std::chrono::seconds(60);
    options.extra_env["FASTRUN_OP_TIMEOUT"] = "5";
    auto results = test::run_ranks(
        2,
        [&c](int rank) {
          auto ctx = join({"gloo"});
          // Freed when the rank returns, right after the failed op: the group runtime's contract
          // (process_group/group_runtime.h) is that a small gloo op works on op-owned copies, so a
          // Work that failed never leaves Gloo writing these (TSan runs this case).
          std::vector<float> f(400, 1.0f);
          std::vector<double> d(400, 1.0);
          std::string outcome = "completed";
          try {
            c.issue(ctx->world(), rank, f, d)->wait(std::chrono::seconds(5));
          } catch (const Error& e) {
            outcome = e.what();
          }
          // An error leaves through the harness's message pipe, with a non-zero exit code.
          if (outcome != "completed") throw std::runtime_error(outcome);
        },
        options);
    REQUIRE(results.size() == 2);
    INFO(test::describe(results));
    for (const auto& r : results) {
      CHECK(r.signal == 0);
      CHECK(!r.timed_out);
    }
    if (std::string(c.name) == "recv size") {
      // A send smaller than its recv: the send completes, the recv fails with shm's wording
      // (p2p_work.h), and nothing else fails.
      CHECK(results[0].ok());
      CHECK(results[1].message ==
            "gloo recv on group 'world' rank 1: recv from rank 0 tag 0 (48 bytes): the message has 40 bytes, the buffer "
            "48 (count x dtype must match the send's)");
      continue;
    }
    // Each error either says the ranks disagree, or (a rank that learned it later) that the
    // peer, which exited on its own error, died; at least one says the ranks disagree.
    int explained = 0;
    for (const auto& r : results) {
      if (r.exit_code == 0) continue;
      const bool disagree = r.message.find("different collective") != std::string::npos ||
                            r.message.find("found out of step when the op stalled") != std::string::npos;
      explained += disagree;
      CHECK((disagree || r.message.find("died") != std::string::npos));
    }
    CHECK(explained >= 1);
  }
}

// An op over 2 MiB runs on the caller's buffers (no staging copies), so its wait() may return
// only once no thread can still write them, and when Gloo's transport thread fails on a
// mismatch the op's Gloo wait can no longer be woken before its own timeout (docs/collectives.md,
// "When ranks disagree"). So before such an op touches the caller's buffers the ranks compare
// their ops (backend/gloo/fingerprint_prelude.h): a mismatch fails on every rank at once.
// all_to_allv, whose counts differ by rank, has no prelude: each of its messages carries its
// length instead (rooted_ops.h), and FASTRUN_DEBUG=sequence names its pair before it starts.
namespace {

// Runs `issue` on 2 gloo ranks (after `warm_up`) and reports through each rank's message how
// long its op took and how it ended: "<seconds> s: <error or completed>". Each rank then stays
// `linger` longer with its group open (a peer that exits closes its sockets, which ends any
// wait: lingering shows what a wait does on its own).
std::vector<test::RankResult> run_timed(const std::map<std::string, std::string>& env,
                                        std::function<void(Group&, int rank)> issue,
                                        std::function<void(Group&)> warm_up = {},
                                        std::chrono::seconds linger = std::chrono::seconds(0)) {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env = env;
  return test::run_ranks(
      2,
      [&](int rank) {
        auto ctx = join({"gloo"});
        if (warm_up) warm_up(ctx->world());
        const auto start = std::chrono::steady_clock::now();
        std::string outcome = "completed";
        try {
          issue(ctx->world(), rank);
        } catch (const Error& e) {
          outcome = e.what();
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::this_thread::sleep_for(linger);
        // Seconds first, so the parent can read them back.
        throw std::runtime_error(fmt::format("{:.2f} s: {}", took, outcome));
      },
      options);
}

std::vector<test::RankResult> run_big_mismatch(const std::map<std::string, std::string>& env) {
  return run_timed(env, [](Group& g, int rank) {
    const std::size_t big = 1 << 20;  // 4 MiB of float on rank 0, 4 MiB + 4 KiB on rank 1
    std::vector<float> f(big + 1024, 1.0f);
    g.all_reduce(view_of(f.data(), rank == 0 ? big : big + 1024))->wait();
  });
}

double seconds_of(const std::string& message) { return std::stod(message.substr(0, message.find(' '))); }

// Every rank ended by itself (no signal, not killed by the harness) within `seconds`, its message
// containing `text`.
void check_every_rank_says(const std::vector<test::RankResult>& results, const std::string& text, double seconds) {
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    CHECK(r.message.find(text) != std::string::npos);
    CHECK(seconds_of(r.message) < seconds);
  }
}

}  // namespace

TEST_CASE("gloo: a mismatch on an op over 2 MiB fails on every rank promptly by default, naming both ops",
          "[gloo][mismatch][mp]") {
  // An op timeout of 60 s: every rank must have its error far sooner.
  const auto results = run_big_mismatch({{"FASTRUN_OP_TIMEOUT", "60"}});
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    REQUIRE(r.exit_code != 0);
    CHECK(r.message.find("on group 'world': rank 0 called all_reduce(float32 x 1048576, sum), rank 1 called "
                         "all_reduce(float32 x 1049600, sum) (found before an op over 2 MiB moved any data") !=
          std::string::npos);
    CHECK(seconds_of(r.message) < 10.0);
  }
}

TEST_CASE("gloo: a mismatch across the 2 MiB line (one rank's op has the prelude, the other's not) fails in seconds",
          "[gloo][mismatch][mp]") {
  // Rank 0's 4 MiB op waits in its prelude, rank 1's 1 MiB op on its data: different Gloo slots.
  // The stalled-op check finds them, and rank 0's wait returns then too: its op never reached
  // the caller's buffer (AsyncWork::enter_caller_memory), so it need not wait for Gloo's timeout.
  // The ranks linger 12 s after their op: a wait that waited for its op's thread would end only
  // when the peer's exit closed its sockets.
  const auto results = run_timed(
      {{"FASTRUN_OP_TIMEOUT", "60"}},
      [](Group& g, int rank) {
        std::vector<float> f(1 << 20, 1.0f);
        g.all_reduce(view_of(f.data(), rank == 0 ? f.size() : f.size() / 4))->wait();
      },
      {}, std::chrono::seconds(12));
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    CHECK(r.message.find("rank 0 called all_reduce(float32 x 1048576, sum), rank 1 called all_reduce(float32 x "
                         "262144, sum) (found out of step when the op stalled") != std::string::npos);
    CHECK(seconds_of(r.message) < 10.0);
  }
}

namespace {
// rank 0 sends rank 1 more than rank 1 expects, 4 MiB each way.
void issue_disagreeing_all_to_allv(Group& g, int rank) {
  const std::size_t n = 1 << 20;
  std::vector<std::size_t> sc(2, n), rc(2, n);
  if (rank == 0) sc[1] = n + 1024;
  std::vector<float> in(sc[0] + sc[1], 1.0f), out(rc[0] + rc[1]);
  g.all_to_allv(view_of(in.data(), in.size()), sc, view_of(out.data(), out.size()), rc)->wait();
}
}  // namespace

TEST_CASE("gloo: an all_to_allv over 2 MiB that sends a rank more than it expects fails there in seconds, naming the pair",
          "[gloo][mismatch][mp]") {
  // Rank 1 posts each receive once its length came (rooted_ops.h), so the longer message goes to
  // a scratch buffer. Posted at once, it failed Gloo's transport thread, and both ranks' ops
  // ended only at the op timeout (60 s here).
  const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, issue_disagreeing_all_to_allv);
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    CHECK(seconds_of(r.message) < 10.0);
  }
  CHECK(results[1].message.find("all_to_allv #1 failed: rank 0 sends 1049600 elements to rank 1, which expects "
                                "1048576 from it") != std::string::npos);
  // Rank 0's data arrived whole; rank 1's failure may reach it in its op.
  CHECK((results[0].message.find("completed") != std::string::npos ||
         results[0].message.find("peer") != std::string::npos));
}

TEST_CASE("gloo: FASTRUN_DEBUG=sequence names the pair of an all_to_allv whose counts disagree, on every rank",
          "[gloo][mismatch][mp]") {
  const auto results =
      run_timed({{"FASTRUN_OP_TIMEOUT", "60"}, {"FASTRUN_DEBUG", "sequence"}}, issue_disagreeing_all_to_allv);
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    CHECK(r.message.find("op #1 on group 'world': every rank called all_to_allv(float32), and the counts disagree: "
                         "rank 0 sends 1049600 elements to rank 1, which expects 1048576 from it (FASTRUN_DEBUG="
                         "sequence found the ranks out of step") != std::string::npos);
    CHECK(seconds_of(r.message) < 10.0);
  }
}

namespace {
// One all_to_allv on 3 ranks of `backend` whose counts differ by rank and agree by pair: rank r
// sends rank p (p + 1) * (r + 1) * `unit` floats of value 10 r + p, and every element received is
// checked. `late_rank` (-1: none) issues it 2.5 s after the others; with `short_by`, rank 0
// sends rank 1 that many elements fewer than rank 1 expects (the pair disagrees).
std::vector<test::RankResult> run_agreeing_all_to_allv(const std::string& backend, std::size_t unit,
                                                       const std::map<std::string, std::string>& env,
                                                       int late_rank = -1, std::size_t short_by = 0) {
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env = env;
  return test::run_ranks(
      3,
      [&](int rank) {
        auto ctx = join({backend});
        const auto me = static_cast<std::size_t>(rank);
        std::vector<std::size_t> sc(3), rc(3);
        for (std::size_t p = 0; p < 3; ++p) {
          sc[p] = (p + 1) * (me + 1) * unit;
          rc[p] = (me + 1) * (p + 1) * unit;  // what rank p sends this rank
        }
        if (rank == 0) sc[1] -= short_by;
        std::vector<float> in(sc[0] + sc[1] + sc[2]), out(rc[0] + rc[1] + rc[2], -1.0f);
        for (std::size_t p = 0, at = 0; p < 3; at += sc[p], ++p)
          std::fill(in.begin() + static_cast<std::ptrdiff_t>(at), in.begin() + static_cast<std::ptrdiff_t>(at + sc[p]),
                    static_cast<float>(10 * rank + static_cast<int>(p)));
        if (rank == late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        ctx->world().all_to_allv(view_of(in.data(), in.size()), sc, view_of(out.data(), out.size()), rc)->wait();
        for (std::size_t p = 0, at = 0; p < 3; at += rc[p], ++p)
          for (std::size_t i = at; i < at + rc[p]; ++i)
            if (out[i] != static_cast<float>(10 * static_cast<int>(p) + rank))
              throw std::runtime_error("element " + std::to_string(i) + " from rank " + std::to_string(p) + " is " +
                                       std::to_string(out[i]));
      },
      options);
}
}  // namespace

TEST_CASE("all_to_allv whose counts differ by rank and agree by pair is no mismatch, on gloo and shm",
          "[gloo][shm][mismatch][mp]") {
  // Units of 100,000 floats: inputs of 2.4 to 7.2 MiB, no two ranks alike, on both sides of the
  // 2 MiB line; with and without FASTRUN_DEBUG=sequence.
  for (const std::string backend : {"gloo", "shm"}) {
    for (const char* debug : {"off", "sequence"}) {
      INFO(backend << ", FASTRUN_DEBUG=" << debug);
      const auto results = run_agreeing_all_to_allv(backend, 100000, {{"FASTRUN_DEBUG", debug}});
      INFO(test::describe(results));
      CHECK(test::all_ok(results));
    }
  }
}

TEST_CASE("gloo: FASTRUN_DEBUG=sequence fails a mismatch on an op over 2 MiB promptly", "[gloo][mismatch][mp]") {
  // An op timeout of 60 s: every rank must have its error far sooner.
  const auto results = run_big_mismatch({{"FASTRUN_OP_TIMEOUT", "60"}, {"FASTRUN_DEBUG", "sequence"}});
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    REQUIRE(r.exit_code != 0);
    CHECK(r.message.find("FASTRUN_DEBUG=sequence found the ranks out of step") != std::string::npos);
    CHECK(seconds_of(r.message) < 10.0);
  }
}

// By default (no FASTRUN_DEBUG): all_reduce against broadcast waits on different Gloo slots, so
// no data moves; the stalled waits compare the ranks' last ops (stalled_op_check.h) and both
// ranks fail within seconds, naming both ops, instead of at the op timeout (60 s here).
TEST_CASE("gloo: all_reduce against broadcast fails on every rank in seconds, naming both ops", "[gloo][mismatch][mp]") {
  const auto results = run_timed(
      {{"FASTRUN_OP_TIMEOUT", "60"}},
      [](Group& g, int rank) {
        std::vector<float> f(100, 1.0f);
        if (rank == 0) g.all_reduce(view_of(f.data(), 100))->wait();
        else g.broadcast(view_of(f.data(), 100), {0})->wait();
      },
      [](Group& g) {  // in step first
        std::vector<float> f(10, 1.0f);
        for (int i = 0; i < 3; ++i) g.all_reduce(view_of(f.data(), 10))->wait();
      });
  check_every_rank_says(results,
                        "on group 'world': rank 0 called all_reduce(float32 x 100, sum), rank 1 called "
                        "broadcast(float32 x 100, root 0)",
                        20.0);
}

TEST_CASE("a stalled all_to_allv whose counts differ by rank is no mismatch for the stalled-op check, on gloo and shm",
          "[gloo][shm][mismatch][mp]") {
  // Rank 2 comes 2.5 s late: ranks 0 and 1 stall past 1 s in the same op, and their checks
  // compare their last ops through the store. Their inputs differ in size (6, 12 and 18 floats)
  // and agree by pair: the op completes on every rank.
  for (const std::string backend : {"gloo", "shm"}) {
    INFO(backend);
    const auto results = run_agreeing_all_to_allv(backend, 1, {}, /*late_rank=*/2);
    INFO(test::describe(results));
    CHECK(test::all_ok(results));
  }
}

TEST_CASE("an all_to_allv in which a rank sends fewer elements than its peer expects fails there, naming the pair, "
          "on gloo and shm",
          "[gloo][shm][mismatch][mp]") {
  // Gloo completed such a receive as if it were whole, and every rank exited 0 with rank 1's
  // output partly unwritten. Staged (6 to 18 floats) and on the caller's buffers (over 2 MiB).
  for (const std::string backend : {"gloo", "shm"}) {
    for (const std::size_t unit : {std::size_t{1}, std::size_t{100000}}) {
      INFO(backend << ", unit " << unit);
      const auto results = run_agreeing_all_to_allv(backend, unit, {{"FASTRUN_OP_TIMEOUT", "60"}}, -1, 1);
      REQUIRE(results.size() == 3);
      INFO(test::describe(results));
      for (const auto& r : results) {
        CHECK(r.signal == 0);
        CHECK(!r.timed_out);
      }
      // gloo names the pair in elements; shm's mailbox compares each message's bytes (p2p_engine.h).
      const std::string expected =
          backend == "gloo"
              ? fmt::format("all_to_allv #1 failed: rank 0 sends {} element{} to rank 1, which expects {} from it",
                            2 * unit - 1, unit == 1 ? "" : "s", 2 * unit)
              : fmt::format("all_to_allv on group 'world' rank 1: recv from rank 0 ({} bytes): the message has {} bytes",
                            8 * unit, 8 * unit - 4);
      CHECK(results[1].message.find(expected) != std::string::npos);
      // The others received what they expected; rank 1's failure may reach them in their op.
      for (const int other : {0, 2})
        CHECK((results[other].ok() || results[other].message.find("peer") != std::string::npos));
    }
  }
}

TEST_CASE("gloo: an all_to_allv message that is not whole elements of the receiver's dtype fails there, in bytes",
          "[gloo][mismatch][mp]") {
  // Rank 0 sends 3 float16 (6 bytes) where rank 1 expects 2 float32: counted in rank 1's
  // elements the message would round to a count, so the check compares bytes.
  const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, [](Group& g, int rank) {
    std::vector<std::uint16_t> halves(16);
    std::vector<float> floats(16);
    if (rank == 0) {
      const std::vector<std::size_t> sc{2, 3}, rc{2, 4};
      g.all_to_allv(BufferView{halves.data(), 5, DType::float16}, sc, BufferView{halves.data() + 8, 6, DType::float16},
                    rc)
          ->wait();
    } else {
      const std::vector<std::size_t> sc{2, 2}, rc{2, 2};
      g.all_to_allv(view_of(floats.data(), 4), sc, view_of(floats.data() + 8, 4), rc)->wait();
    }
  });
  REQUIRE(results.size() == 2);
  INFO(test::describe(results));
  CHECK(results[1].message.find("all_to_allv #1 failed: rank 0 sends 6 bytes to rank 1, which expects 2 elements of 4 "
                                "bytes from it") != std::string::npos);
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
  }
}

TEST_CASE("gloo: a gather, scatter, broadcast or reduce whose receiver is sent fewer elements than it expects fails "
          "there, naming the pair",
          "[gloo][mismatch][mp]") {
  // Data flows one way in these, so no rank is sent more than it expects: Gloo completed the
  // short receive as if whole, and both ranks exited 0 with the receiver's buffer partly stale.
  struct OneWay {
    const char* op;
    int receiver;
    std::function<void(Group&, int)> issue;
  };
  const std::vector<OneWay> cases = {
      {"gather", 0, [](Group& g, int rank) {
         std::vector<float> f(100, 1.0f);
         g.gather(view_of(f.data(), rank == 0 ? 10 : 9), view_of(f.data() + 50, 20), {0})->wait();
       }},
      {"scatter", 1, [](Group& g, int rank) {
         std::vector<float> f(100, 1.0f);
         g.scatter(view_of(f.data(), 18), view_of(f.data() + 50, rank == 0 ? 9 : 10), {0})->wait();
       }},
      {"broadcast", 1, [](Group& g, int rank) {
         std::vector<float> f(100, 1.0f);
         g.broadcast(view_of(f.data(), rank == 0 ? 9 : 10), {0})->wait();
       }},
      {"reduce", 0, [](Group& g, int rank) {
         std::vector<float> f(100, 1.0f);
         g.reduce(view_of(f.data(), rank == 0 ? 10 : 9))->wait();
       }},
  };
  for (const OneWay& c : cases) {
    INFO(c.op);
    const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, c.issue);
    REQUIRE(results.size() == 2);
    INFO(test::describe(results));
    const int sender = 1 - c.receiver;
    CHECK(results[static_cast<std::size_t>(c.receiver)].message.find(
              fmt::format("{} #1 failed: rank {} sends 9 elements to rank {}, which expects 10 from it", c.op, sender,
                          c.receiver)) != std::string::npos);
    for (const auto& r : results) {
      CHECK(r.signal == 0);
      CHECK(!r.timed_out);
      CHECK(seconds_of(r.message) < 10.0);
    }
  }
}

TEST_CASE("gloo: a broadcast on 4 ranks whose root sends fewer elements fails on every receiver in seconds",
          "[gloo][mismatch][mp]") {
  // Over the binomial tree rank 3 receives from rank 1, which fails before it forwards: rank 3
  // learns of the failure from the group, not at the op timeout (60 s).
  test::RankRunOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env = {{"FASTRUN_OP_TIMEOUT", "60"}};
  const auto results = test::run_ranks(
      4,
      [](int rank) {
        auto ctx = join({"gloo"});
        std::vector<float> f(10, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        std::string outcome = "completed";
        try {
          ctx->world().broadcast(view_of(f.data(), rank == 0 ? 9 : 10), {0})->wait();
        } catch (const Error& e) {
          outcome = e.what();
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        throw std::runtime_error(fmt::format("{:.2f} s: {}", took, outcome));
      },
      options);
  REQUIRE(results.size() == 4);
  INFO(test::describe(results));
  for (const int receiver : {1, 2})
    CHECK(results[static_cast<std::size_t>(receiver)].message.find(
              fmt::format("broadcast #1 failed: rank 0 sends 9 elements to rank {}, which expects 10 from it",
                          receiver)) != std::string::npos);
  for (const auto& r : results) {
    CHECK(r.signal == 0);
    CHECK(!r.timed_out);
    CHECK(seconds_of(r.message) < 10.0);
  }
  CHECK(results[3].message.find("completed") == std::string::npos);  // its data never came
}

TEST_CASE("gloo: a gather whose ranks' sizes fall on both sides of the packing line stalls, and the stalled-op check "
          "names both ops in seconds",
          "[gloo][mismatch][mp]") {
  // Up to 64 KiB a message and its length travel as one message on a slot of their own
  // (sized_messages.h): rank 1's 64,000 bytes go that way, while the root expects 80,000 bytes in
  // two. They never meet, so nothing is received wrong; the stalled-op check compares the ops.
  const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, [](Group& g, int rank) {
    std::vector<float> f(60000, 1.0f);
    g.gather(view_of(f.data(), rank == 0 ? 20000 : 16000), view_of(f.data() + 20000, 40000), {0})->wait();
  });
  check_every_rank_says(results,
                        "rank 0 called gather(float32 x 20000, root 0), rank 1 called gather(float32 x 16000, root "
                        "0) (found out of step when the op stalled",
                        10.0);
}

// An op of 0 elements on one rank and more on its peer. The rank with 0 used to return at once,
// unrecorded: its peer waited alone until the op timeout (every case below took the whole
// FASTRUN_OP_TIMEOUT), and the next op of each rank went on with the numbers out of step. Now
// Gloo's own algorithms (all_reduce, all_gather, reduce_scatter, all_to_all) record it, so the
// stalled-op check names both ops; the ops whose messages carry their length send it, so the
// receiver fails at once naming the pair (or, sent more than it expects, fails Gloo's transport).
TEST_CASE("gloo: an op of 0 elements on one rank against more on its peer fails in seconds, naming it",
          "[gloo][mismatch][mp]") {
  struct ZeroCase {
    const char* op;
    std::function<void(Group&, int rank, std::vector<float>&)> issue;
    std::string on_rank0, on_rank1;  // in each rank's message ("": any error)
  };
  const auto zero_on_1 = [](int rank) -> std::size_t { return rank == 0 ? 10 : 0; };
  const std::string stalled = "(found out of step when the op stalled";
  const std::vector<ZeroCase> cases = {
      {"all_reduce", [&](Group& g, int rank, std::vector<float>& f) { g.all_reduce(view_of(f.data(), zero_on_1(rank)))->wait(); },
       "rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float32 x 0, sum) " + stalled, ""},
      {"all_gather", [&](Group& g, int rank, std::vector<float>& f) {
         const std::size_t n = zero_on_1(rank);
         g.all_gather(view_of(f.data(), n), view_of(f.data() + 100, 2 * n))->wait();
       },
       "rank 0 called all_gather(float32 x 10), rank 1 called all_gather(float32 x 0) " + stalled, ""},
      {"reduce_scatter", [&](Group& g, int rank, std::vector<float>& f) {
         const std::size_t n = zero_on_1(rank);
         g.reduce_scatter(view_of(f.data() + 100, 2 * n), view_of(f.data(), n))->wait();
       },
       "rank 0 called reduce_scatter(float32 x 20, sum), rank 1 called reduce_scatter(float32 x 0, sum) " + stalled, ""},
      {"all_to_all", [&](Group& g, int rank, std::vector<float>& f) {
         const std::size_t n = 2 * zero_on_1(rank);
         g.all_to_all(view_of(f.data(), n), view_of(f.data() + 100, n))->wait();
       },
       "rank 0 called all_to_all(float32 x 20), rank 1 called all_to_all(float32 x 0) " + stalled, ""},
      {"gather", [&](Group& g, int rank, std::vector<float>& f) {
         g.gather(view_of(f.data(), zero_on_1(rank)), view_of(f.data() + 100, 20), {0})->wait();
       },
       "gather #1 failed: rank 1 sends 0 elements to rank 0, which expects 10 from it", ""},
      {"reduce", [&](Group& g, int rank, std::vector<float>& f) {
         g.reduce(view_of(f.data(), zero_on_1(rank)))->wait();
       },
       "reduce #1 failed: rank 1 sends 0 elements to rank 0, which expects 10 from it", ""},
      {"scatter from a root of 0", [&](Group& g, int rank, std::vector<float>& f) {
         const std::size_t n = 10 - zero_on_1(rank);  // the root 0, rank 1 10
         g.scatter(view_of(f.data() + 100, 2 * n), view_of(f.data(), n), {0})->wait();
       },
       "", "scatter #1 failed: rank 0 sends 0 elements to rank 1, which expects 10 from it"},
      {"broadcast from a root of 0", [&](Group& g, int rank, std::vector<float>& f) {
         g.broadcast(view_of(f.data(), 10 - zero_on_1(rank)), {0})->wait();
       },
       "", "broadcast #1 failed: rank 0 sends 0 elements to rank 1, which expects 10 from it"},
      {"broadcast to a rank of 0", [&](Group& g, int rank, std::vector<float>& f) {
         g.broadcast(view_of(f.data(), zero_on_1(rank)), {0})->wait();
       },
       "", "Gloo's transport received more bytes than the posted receive holds"},
  };
  for (const ZeroCase& c : cases) {
    INFO(c.op);
    // After the op each rank goes on to the next, as a program would: the rank with nothing to
    // move gets there at once and waits for its peer there.
    const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, [&c](Group& g, int rank) {
      std::vector<float> f(200, 1.0f);
      c.issue(g, rank, f);
      g.all_reduce(view_of(f.data(), 4))->wait();
    });
    REQUIRE(results.size() == 2);
    INFO(test::describe(results));
    for (const auto& r : results) {
      CHECK(r.signal == 0);
      CHECK(!r.timed_out);
      CHECK(r.message.find("completed") == std::string::npos);
      CHECK(seconds_of(r.message) < 10.0);
    }
    CHECK(results[0].message.find(c.on_rank0) != std::string::npos);
    CHECK(results[1].message.find(c.on_rank1) != std::string::npos);
  }
}

TEST_CASE("gloo: ops of 0 elements on every rank complete, and the ops after them too", "[gloo][mp]") {
  const auto results = run_timed({{"FASTRUN_OP_TIMEOUT", "60"}}, [](Group& g, int) {
    std::vector<float> f(8, 1.0f);
    const BufferView none = view_of(f.data(), 0);
    g.all_reduce(none)->wait();
    g.broadcast(none, {1})->wait();
    g.reduce(none, {ReduceOp::sum, 1})->wait();
    g.gather(none, none, {0})->wait();
    g.scatter(none, none, {1})->wait();
    g.all_gather(none, none)->wait();
    g.reduce_scatter(none, none)->wait();
    g.all_to_all(none, none)->wait();
    g.all_reduce(view_of(f.data(), 8))->wait();
    if (f[0] != 2.0f) throw Error(fmt::format("the all_reduce after them gave {}, not 2", f[0]));
  });
  REQUIRE(results.size() == 2);
  for (const auto& r : results) CHECK(r.message.find(" s: completed") != std::string::npos);
}
