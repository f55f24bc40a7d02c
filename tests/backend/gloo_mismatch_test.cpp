// Ranks that issue different collectives on gloo (op, dtype, count, root) must never crash a
// process: every rank ends with a clear error from its Work (or completes), none dies of
// SIGABRT from an uncaught gloo::EnforceNotMet.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/context.h"
#include "fastrun/runtime/error.h"
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
    // Each error either says the ranks disagree, or (a rank that learned it later) that the
    // peer, which exited on its own error, died.
    int explained = 0;
    for (const auto& r : results) {
      CHECK(r.signal == 0);
      CHECK(!r.timed_out);
      if (r.exit_code == 0) continue;
      const bool disagree = r.message.find("different collective") != std::string::npos;
      explained += disagree;
      CHECK((disagree || r.message.find("died") != std::string::npos));
    }
    // A send smaller than its recv goes unnoticed by Gloo (documented); everything else fails
    // at least one rank with an error that says the ranks disagree.
    if (std::string(c.name) != "recv size") CHECK(explained >= 1);
  }
}
