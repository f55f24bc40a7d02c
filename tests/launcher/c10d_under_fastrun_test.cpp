// A plain c10d program (tests/c10d/c10d_allreduce.cpp: LibTorch's TCPStore + ProcessGroupGloo
// set up from MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) runs unchanged under `fastrun`, which
// gives every rank those variables (MASTER_PORT: a port it picked for the ranks' own use), on
// one node and as two fastrun "nodes" on 127.0.0.1. Skipped when the program is not built.
#include <catch2/catch.hpp>

#include "process_runner.h"
#include "test_support/free_port.h"
#include "test_support/skip.h"

using namespace fastrun::test;
using namespace std::chrono_literals;

#ifdef C10D_ALLREDUCE_BIN
namespace {
const std::string kC10dAllreduce = C10D_ALLREDUCE_BIN;
const std::map<std::string, std::optional<std::string>> kEnv = {
    {"FASTRUN_GLOO_HOST", std::nullopt}, {"MASTER_ADDR", std::nullopt}, {"MASTER_PORT", std::nullopt},
    {"RANK", std::nullopt}, {"WORLD_SIZE", std::nullopt}, {"FASTRUN_STORE_TOKEN", "c10d-test-secret"}};
}  // namespace
#endif

TEST_CASE("a plain c10d program runs unchanged under fastrun --nproc 2", "[launcher][c10d]") {
#ifndef C10D_ALLREDUCE_BIN
  return skip_case("tests/c10d/c10d_allreduce not built (LibTorch not found, FASTRUN_WITH_TORCH=OFF, or a sanitizer build)");
#else
  const auto r = run({kFastrun, "--nproc", "2", kC10dAllreduce}, kEnv, 90s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "c10d rank 0 of 2: all_reduce 3 ok\n"));
  CHECK(contains(r.out, "c10d rank 1 of 2: all_reduce 3 ok\n"));
#endif
}

TEST_CASE("a plain c10d program runs unchanged under two fastrun nodes (--nnodes 2)", "[launcher][c10d][multinode]") {
#ifndef C10D_ALLREDUCE_BIN
  return skip_case("tests/c10d/c10d_allreduce not built (LibTorch not found, FASTRUN_WITH_TORCH=OFF, or a sanitizer build)");
#else
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Process>> nodes;
  for (const char* node : {"1", "0"}) {
    dirs.push_back(std::make_unique<TempDir>());
    nodes.push_back(std::make_unique<Process>(
        std::vector<std::string>{kFastrun, "--nnodes", "2", "--node-rank", node, "--master-addr", "127.0.0.1",
                                 "--master-port", port, "--nproc", "2", kC10dAllreduce},
        kEnv, dirs.back()->path()));
  }
  std::string out;
  for (auto& n : nodes) {
    const auto r = n->finish(90s);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    out += r.out;
  }
  for (int rank = 0; rank < 4; ++rank)
    CHECK(contains(out, "c10d rank " + std::to_string(rank) + " of 4: all_reduce 10 ok\n"));
#endif
}
