// The nccl backend with real rank processes: ranks forked by test::run_ranks, each joining
// through fastrun::join() with FASTRUN_BACKEND=nccl on its own device (CUDA_VISIBLE_DEVICES =
// its rank). On a GPU-less machine the binary runs against the CPU model of CUDA and NCCL
// (docs/cuda-model.md), with FASTRUN_CUDA_MODEL_DEVICES model devices; on a GPU machine it uses
// the GPUs, and a case that needs more devices than are visible skips.
//
// CUDA is not fork-safe: a child forked after its parent used CUDA cannot use it (the model
// refuses it as CUDA does). So this binary's parent process never calls CUDA: every CUDA call,
// the device count for the skip decision included, happens in a forked child. Keep it so: a
// case that used CUDA in the parent would break every later case of a whole-binary run.
#ifdef FASTRUN_HAVE_NCCL
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/join/join.h"
#include "gpu/nccl_p2p_suite.h"
#include "gpu/nccl_suite.h"
#include "test_support/rank_runner.h"
#include "test_support/skip.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

// The environment of every rank: the nccl backend, a failure that raises in the rank (so the
// rank reports it) and, under the model, `devices` model devices.
std::map<std::string, std::string> nccl_env(int devices) {
  return {{"FASTRUN_BACKEND", "nccl"},
          {"FASTRUN_NCCL_ON_ERROR", "raise"},
          {"FASTRUN_CUDA_MODEL_DEVICES", std::to_string(devices)}};
}

// How many CUDA devices a rank would see, asked in a child (see the top of the file).
int devices_seen_by_a_rank(int model_devices) {
  test::RankRunOptions o;
  o.set_fastrun_env = false;
  o.extra_env = nccl_env(model_devices);
  o.timeout = 30s;
  const auto results = test::run_ranks(
      1, [](int) { ::_exit(std::min(cuda_device_count(), 100)); }, o);
  return results.at(0).exit_code;  // -1 when the probe itself died
}

// "" when `n` ranks can each have a device here, else why not.
std::string skip_reason(int n) {
  const int seen = devices_seen_by_a_rank(n);
  return seen >= n ? std::string() : fmt::format("{} rank(s) need {} CUDA devices; a rank sees {}", n, n, seen);
}

// Each rank's own device: device `rank` of the machine, which becomes its device 0.
void pin_to_own_device(int rank) { ::setenv("CUDA_VISIBLE_DEVICES", std::to_string(rank).c_str(), 1); }

// Throws with every failed check's name and detail.
void require_passed(const std::vector<nccl_suite::Result>& results, int rank) {
  std::string failed;
  for (const auto& r : results)
    if (!r.passed) failed += fmt::format("\n  {}: {}", r.name, r.detail);
  if (!failed.empty()) throw std::runtime_error(fmt::format("rank {}: checks failed:{}", rank, failed));
}

// A case on n ranks cannot run here (skip_reason): says why, for CTest's "Skipped".
bool skipped(int n) {
  const std::string skip = skip_reason(n);
  if (!skip.empty()) test::skip_case(skip);
  return !skip.empty();
}

// Two forked ranks, each joined on its own device (or model device), running body(rank, context).
std::vector<test::RankResult> run_two_nccl_ranks(const std::function<void(int rank, Context& ctx)>& body) {
  test::RankRunOptions o;
  o.extra_env = nccl_env(2);
  o.timeout = 60s;  // the op timeout stays 600 s
  return test::run_ranks(
      2,
      [&body](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        body(rank, *ctx);
      },
      o);
}

}  // namespace

TEST_CASE("nccl ranks: every collective, dtype and op on device buffers, 2 and 3 ranks", "[nccl][gpu][mp]") {
  const int n = GENERATE(2, 3);
  CAPTURE(n);
  if (skipped(n)) return;
  test::RankRunOptions o;
  o.extra_env = nccl_env(n);
  o.timeout = 120s;
  const auto results = test::run_ranks(
      n,
      [n](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        RANK_REQUIRE(ctx->world().backend_name() == "nccl");
        RANK_REQUIRE(ctx->world_size() == n && ctx->rank() == rank);
        RANK_REQUIRE(ctx->device() == DeviceKind::cuda);
        require_passed(nccl_suite::check_collectives(ctx->world()), rank);
        require_passed(nccl_suite::check_p2p_and_rooted(ctx->world()), rank);
        // send/recv one by one (the suite's ring is one batch): a chain 0 -> 1 -> ... -> n-1.
        const std::size_t count = 70000;  // over the model's 256 KiB chunk
        DeviceBuffer buf = nccl_suite::poisoned(count * 4);
        std::vector<double> want(count);
        for (std::size_t i = 0; i < count; ++i) want[i] = static_cast<double>(i % 1000);
        if (rank == 0) buf = nccl_suite::to_device(want, DType::float32);
        if (rank > 0) ctx->world().recv(buf.view(count, DType::float32), rank - 1)->wait();
        if (rank + 1 < n) ctx->world().send(buf.view(count, DType::float32), rank + 1)->wait();
        const std::string mismatch = nccl_suite::compare(nccl_suite::from_device(buf, count, DType::float32), want);
        if (!mismatch.empty()) throw std::runtime_error("send/recv chain: " + mismatch);
        ctx->world().barrier()->wait();
      },
      o);
  REQUIRE(test::all_ok(results));
}

// DDP on device buffers across real ranks: each rank's gradients differ, finish() must leave
// their average in every rank's gradient memory, step after step, reduced in place or through
// the flat buckets. The gradients are uploaded with cudaMemcpy, whose device write is still
// queued on the legacy stream when it returns (under the model too): DDP and the group must
// order their own streams after it, or they reduce the previous step's values.
TEST_CASE("nccl ranks: DDP on device buffers averages the ranks' gradients", "[nccl][gpu][mp][ddp]") {
  const int n = GENERATE(2, 3);
  const bool in_place = GENERATE(true, false);
  CAPTURE(n, in_place);
  if (skipped(n)) return;
  test::RankRunOptions o;
  o.extra_env = nccl_env(n);
  o.timeout = 120s;
  const auto results = test::run_ranks(
      n,
      [n, in_place](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        // 1.2 MB + 4 KB; the first cap closes "b" (the last registered) alone: two buckets.
        const std::size_t n1 = 300000, n2 = 1000;
        DeviceBuffer v1(n1 * 4), g1(n1 * 4), v2(n2 * 4), g2(n2 * 4);
        DdpOptions options;
        options.first_bucket_bytes = n2 * 4;
        options.reduce_in_place = in_place;
        DistributedDataParallel ddp(ctx->world(),
                                    {{"a", v1.view(n1, DType::float32), g1.view(n1, DType::float32)},
                                     {"b", v2.view(n2, DType::float32), g2.view(n2, DType::float32)}},
                                    options);
        RANK_REQUIRE(ddp.buckets().size() == 2);
        // Rank r's gradient is (r + 1) * base, so the average is (n + 1) / 2 * base: exact in
        // float32 for these small integers and halves.
        for (int step = 0; step < 3; ++step) {
          std::vector<float> h1(n1), h2(n2), want1(n1), want2(n2);
          for (std::size_t i = 0; i < n1; ++i) {
            const float base = static_cast<float>((i + step) % 97);
            h1[i] = static_cast<float>(rank + 1) * base;
            want1[i] = static_cast<float>(n + 1) / 2 * base;
          }
          for (std::size_t i = 0; i < n2; ++i) {
            const float base = static_cast<float>((i + 3 * step) % 13) - 6.f;
            h2[i] = static_cast<float>(rank + 1) * base;
            want2[i] = static_cast<float>(n + 1) / 2 * base;
          }
          g2.upload(h2.data(), n2 * 4);
          ddp.mark_ready(1);
          g1.upload(h1.data(), n1 * 4);
          ddp.mark_ready(0);
          ddp.finish();
          std::vector<float> r1(n1), r2(n2);
          g1.download(r1.data(), n1 * 4);
          g2.download(r2.data(), n2 * 4);
          for (std::size_t i = 0; i < n1; ++i)
            if (r1[i] != want1[i])
              throw std::runtime_error(fmt::format("step {}: a[{}] = {}, want {}", step, i, r1[i], want1[i]));
          for (std::size_t i = 0; i < n2; ++i)
            if (r2[i] != want2[i])
              throw std::runtime_error(fmt::format("step {}: b[{}] = {}, want {}", step, i, r2[i], want2[i]));
          for (const auto& stats : ddp.last_step_stats()) RANK_REQUIRE(stats.in_place == in_place);
        }
      },
      o);
  REQUIRE(test::all_ok(results));
}

// DDP's set-up check of the layouts runs on the group; on nccl it is staged through device
// memory. Ranks that registered different parameters all get the error that names them.
TEST_CASE("nccl ranks: DDP set-up names a parameter the ranks registered differently", "[nccl][gpu][mp][ddp]") {
  if (const std::string skip = skip_reason(2); !skip.empty()) {
    test::skip_case(skip);
    return;
  }
  test::RankRunOptions o;
  o.extra_env = nccl_env(2);
  o.timeout = 60s;
  const auto results = test::run_ranks(
      2,
      [](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        const std::size_t n2 = rank == 0 ? 100 : 101;
        DeviceBuffer v1(400), g1(400), v2(n2 * 4), g2(n2 * 4);
        try {
          DistributedDataParallel ddp(ctx->world(), {{"a", v1.view(100, DType::float32), g1.view(100, DType::float32)},
                                                     {"b", v2.view(n2, DType::float32), g2.view(n2, DType::float32)}});
        } catch (const ConfigError& e) {
          const std::string m = e.what();
          if (m.find("parameter 1 ('b' here)") == std::string::npos || m.find("101 x float32 on cuda on ranks [1]") == std::string::npos)
            throw std::runtime_error("the error does not name parameter 1 and rank 1's layout: " + m);
          return;
        }
        throw std::runtime_error("DDP was set up although the ranks' layouts differ");
      },
      o);
  REQUIRE(test::all_ok(results));
}

// The shm and gloo backends once failed a slower rank's join when a fast rank joined and left at
// once (tests/launcher/join_exit_test.cpp): here the same shape, ranks that join and leave at
// once, many times, on the nccl backend. The default error policy (exit) is kept: a rank whose
// group saw its peer leave as a failure would exit non-zero.
TEST_CASE("nccl ranks: join then exit never fails another rank's join", "[nccl][gpu][mp][join]") {
  const int n = GENERATE(2, 3);
  CAPTURE(n);
  if (skipped(n)) return;
  test::RankRunOptions o;
  o.extra_env = nccl_env(n);
  o.extra_env.erase("FASTRUN_NCCL_ON_ERROR");
  o.timeout = 30s;
  for (int run = 0; run < 20; ++run) {
    INFO("run " << run);
    const auto results = test::run_ranks(
        n,
        [](int rank) {
          pin_to_own_device(rank);
          // Rank 0 hosts NCCL's bootstrap in a real NCCL: let it be the fast one now and then.
          if (rank != 0 && rank % 2 == 0) std::this_thread::sleep_for(5ms);
          auto ctx = join();
          RANK_REQUIRE(ctx->world().backend_name() == "nccl");
        },  // the context ends here: the group is closed and the rank leaves
        o);
    REQUIRE(test::all_ok(results));
  }
}

#ifdef FASTRUN_BIN
// The rank program of the case below: this binary, run by the launcher with a hidden case name.
TEST_CASE("nccl ranks: rank program: join then leave", "[.nccl-rank-program]") {
  auto ctx = join();
  REQUIRE(ctx->world().backend_name() == "nccl");
}  // the context ends, then the program: the README's shape

// The same under the fastrun CLI, as tests/launcher/join_exit_test.cpp runs it for shm and
// gloo: the launcher starts a rank per device (--devices all over CUDA_VISIBLE_DEVICES=0,1) and
// fails the job if a rank's exit 0 disturbed another rank's join.
TEST_CASE("nccl ranks: join then exit under the fastrun CLI", "[nccl][gpu][mp][join][cli]") {
  if (const std::string skip = skip_reason(2); !skip.empty()) {
    test::skip_case(skip);
    return;
  }
  char self[4096] = {};
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(len > 0);
  for (int run = 0; run < 10; ++run) {
    INFO("run " << run);
    test::Children launcher;
    launcher.spawn([&] {
      ::setenv("FASTRUN_BACKEND", "nccl", 1);
      ::setenv("FASTRUN_CUDA_MODEL_DEVICES", "2", 1);
      ::setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
      ::unsetenv("FASTRUN_RANK");
      const char* argv[] = {FASTRUN_BIN, "--devices", "all", self,
                            "[.nccl-rank-program]", "--warn", "NoTests", nullptr};
      ::execv(FASTRUN_BIN, const_cast<char* const*>(argv));
      return 127;
    });
    const auto status = launcher.wait_all(test::scaled(std::chrono::milliseconds(30000)));
    REQUIRE(status.at(0).ok());
  }
}
#endif

// send/recv go through the group runtime as on shm and gloo (GroupRuntime::post): an op's label
// carries the number its Group gave it (point-to-point apart from the collectives), and after a
// failure the next op is refused with the runtime's one wording, naming the first failure.
TEST_CASE("nccl ranks: send/recv are numbered by the Group and refused after a failure", "[nccl][gpu][mp][failure]") {
  if (skipped(2)) return;
  test::RankRunOptions o;
  o.extra_env = nccl_env(2);
  o.timeout = 60s;
  const auto results = test::run_ranks(
      2,
      [](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        Group& g = ctx->world();
        const int peer = 1 - rank;
        DeviceBuffer out = nccl_suite::to_device(std::vector<double>(4, static_cast<double>(rank)), DType::float32);
        DeviceBuffer in = nccl_suite::poisoned(16);
        g.all_reduce(out.view(4, DType::float32))->wait();  // collective #1: not counted with p2p
        g.batch_send_recv({{P2POp::Kind::send, out.view(4, DType::float32), peer, 0},
                           {P2POp::Kind::recv, in.view(4, DType::float32), peer, 0}})
            ->wait();  // p2p op #1
        // p2p op #2: both ranks receive, neither sends. Rank 1 gives up first (its wait's timeout
        // fails its group and marks the job's failure); rank 0's group fails then (through the
        // mark, or NCCL's own error: the model names the peer, a real NCCL may not).
        std::string failure;
        try {
          g.recv(in.view(4, DType::float32), peer)->wait(rank == 1 ? Duration(500ms) : Duration(30s));
        } catch (const Error& e) {
          failure = e.what();
        }
        RANK_REQUIRE(!failure.empty());
        if (rank == 1 && failure.find("recv #2 (float32 x 4 from rank 0) timed out") == std::string::npos)
          throw std::runtime_error("the timeout does not name recv #2: " + failure);
        // The next op, point-to-point or not, is refused as on every backend.
        for (const bool p2p : {true, false}) {
          std::string refusal;
          try {
            if (p2p) g.send(out.view(4, DType::float32), peer);
            else g.all_reduce(out.view(4, DType::float32));
          } catch (const BackendError& e) {
            refusal = e.what();
          }
          const std::string want = std::string(p2p ? "send" : "all_reduce") +
                                   " refused: the group is unusable after an earlier failure";
          if (refusal.find(want) == std::string::npos)
            throw std::runtime_error(fmt::format("rank {}: want '{}', got '{}'", rank, want, refusal));
          if (rank == 1 && refusal.find("recv #2") == std::string::npos)
            throw std::runtime_error("the refusal does not quote the first failure (recv #2): " + refusal);
        }
      },
      o);
  REQUIRE(test::all_ok(results));
}

TEST_CASE("nccl ranks: a rank killed mid-collective fails the others, naming it", "[nccl][gpu][mp][failure]") {
  if (const std::string skip = skip_reason(3); !skip.empty()) {
    test::skip_case(skip);
    return;
  }
  test::RankRunOptions o;
  o.extra_env = nccl_env(3);
  o.timeout = 60s;
  auto results = test::run_ranks(
      3,
      [](int rank) {
        pin_to_own_device(rank);
        auto ctx = join();
        const std::size_t count = 1 << 16;
        DeviceBuffer buf = nccl_suite::to_device(std::vector<double>(count, 1.0), DType::float32);
        ctx->world().all_reduce(buf.view(count, DType::float32))->wait();
        if (rank == 2) ::raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        try {
          for (int i = 0; i < 100000; ++i) ctx->world().all_reduce(buf.view(count, DType::float32))->wait();
        } catch (const Error& e) {
          const std::string m = e.what();
          if (m.find("rank 2") == std::string::npos) throw std::runtime_error("message does not name rank 2: " + m);
          const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (took > 10) throw std::runtime_error(fmt::format("the failure came after {:.1f} s", took));
          return;
        }
        throw std::runtime_error("the collectives kept succeeding after rank 2 died");
      },
      o);
  REQUIRE(results[2].signal == SIGKILL);
  results.pop_back();
  REQUIRE(test::all_ok(results));
}

// Ranks that issue different collectives hang on the device (NCCL, and the model: its
// collectives meet only when every rank called the same one). By default the watchdog compares
// the ranks' last ops through the store once the oldest op in flight has stalled 1 s
// (stalled_op_check.h): every rank fails with the sequence mode's message, long before the op
// timeout, and the group is unusable after.
TEST_CASE("nccl ranks: mismatched collectives fail on every rank, naming both ops", "[nccl][gpu][mp][mismatch]") {
  struct Case {
    const char* name;
    std::function<WorkHandle(Group&, int rank, const DeviceBuffer& f32, const DeviceBuffer& f64)> issue;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"count 10 against 20",
       [](Group& g, int rank, const DeviceBuffer& f32, const DeviceBuffer&) {
         return g.all_reduce(f32.view(rank == 0 ? 10 : 20, DType::float32));
       },
       "op #2 on group 'world': rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float32 x 20, "
       "sum)"},
      {"float32 against float64",
       [](Group& g, int rank, const DeviceBuffer& f32, const DeviceBuffer& f64) {
         return rank == 0 ? g.all_reduce(f32.view(10, DType::float32)) : g.all_reduce(f64.view(10, DType::float64));
       },
       "rank 0 called all_reduce(float32 x 10, sum), rank 1 called all_reduce(float64 x 10, sum)"},
      {"all_reduce against broadcast",
       [](Group& g, int rank, const DeviceBuffer& f32, const DeviceBuffer&) {
         return rank == 0 ? g.all_reduce(f32.view(100, DType::float32)) : g.broadcast(f32.view(100, DType::float32), {0});
       },
       "rank 0 called all_reduce(float32 x 100, sum), rank 1 called broadcast(float32 x 100, root 0)"},
  };
  const std::size_t which = GENERATE(0u, 1u, 2u);
  const Case& c = cases.at(which);
  INFO(c.name);
  if (skipped(2)) return;
  // Only the check can end the case in time: the op timeout stays 600 s.
  const auto results = run_two_nccl_ranks([&c](int rank, Context& ctx) {
    Group& g = ctx.world();
    DeviceBuffer a = nccl_suite::to_device(std::vector<double>(100, 1.0), DType::float32);
    DeviceBuffer b = nccl_suite::to_device(std::vector<double>(100, 1.0), DType::float64);
    g.all_reduce(a.view(100, DType::float32))->wait();  // op #1 agrees
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      c.issue(g, rank, a, b)->wait();
    } catch (const ConfigError& e) {
      message = e.what();
    }
    if (message.empty()) throw std::runtime_error("the mismatched op ended without a ConfigError");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (message.find(c.expected) == std::string::npos || message.find("out of step") == std::string::npos)
      throw std::runtime_error(fmt::format("rank {}: the message does not name both ops: {}", rank, message));
    if (took > 10) throw std::runtime_error(fmt::format("rank {}: the mismatch failed after {:.1f} s", rank, took));
    try {
      g.barrier()->wait();
    } catch (const BackendError&) {
      return;  // unusable after the failure, as on every backend
    }
    throw std::runtime_error("a barrier after the mismatch succeeded");
  });
  REQUIRE(test::all_ok(results));
}

namespace {
// Whether this rank's last ops are in its group's store: the stalled-op check writes them under
// "op_check/<rank>" in the group's prefix, "fastrun/pg/<join generation>/world/nccl/", only when
// an op stalls (the generation is private to the Context: any of the first few).
bool published_last_ops(Context& ctx) {
  for (int generation = 0; generation < 4; ++generation)
    if (ctx.store().check({fmt::format("fastrun/pg/{}/world/nccl/op_check/{}", generation, ctx.rank())})) return true;
  return false;
}
}  // namespace

// The check only speaks on a mismatch: ranks in step, one of them late by more than the first
// check (so the other's op stalls and is compared), still get the right results. And the store
// is left alone while ops do not stall: many quick ops publish nothing.
TEST_CASE("nccl ranks: a stalled op whose ranks agree is not a mismatch", "[nccl][gpu][mp][mismatch]") {
  if (skipped(2)) return;
  const auto results = run_two_nccl_ranks([](int rank, Context& ctx) {
    Group& g = ctx.world();
    DeviceBuffer small = nccl_suite::to_device(std::vector<double>(16, 1.0), DType::float32);
    Duration slowest{};
    for (int i = 0; i < 200; ++i) {
      const auto start = std::chrono::steady_clock::now();
      g.all_reduce(small.view(16, DType::float32))->wait();
      slowest = std::max<Duration>(slowest, std::chrono::steady_clock::now() - start);
    }
    // An op of this rank's that took under the first check's 1 s cannot have run the check
    // (a loaded machine may stall one longer: then nothing is claimed).
    if (slowest < 900ms && published_last_ops(ctx))
      throw std::runtime_error("ops that never stalled wrote to the store");
    const std::size_t count = 70000;  // over the model's 256 KiB chunk
    for (int round = 0; round < 3; ++round) {
      if (rank == round % 2) std::this_thread::sleep_for(2s);  // the peer's op stalls past 1 s, with margin
      DeviceBuffer buf = nccl_suite::to_device(std::vector<double>(count, rank + 1.0), DType::float32);
      g.all_reduce(buf.view(count, DType::float32))->wait();
      const std::string mismatch = nccl_suite::compare(
          nccl_suite::from_device(buf, count, DType::float32), std::vector<double>(count, 3.0));
      if (!mismatch.empty()) throw std::runtime_error(fmt::format("round {}: {}", round, mismatch));
      DeviceBuffer d = nccl_suite::to_device(std::vector<double>(8, rank == 1 ? 7.0 : 0.0), DType::float64);
      g.broadcast(d.view(8, DType::float64), {1})->wait();
      if (const std::string m = nccl_suite::compare(nccl_suite::from_device(d, 8, DType::float64),
                                                    std::vector<double>(8, 7.0));
          !m.empty())
        throw std::runtime_error(fmt::format("round {}: broadcast: {}", round, m));
    }
    g.barrier()->wait();
    // Each rank's op stalled in one of the rounds: its check ran (and found nothing wrong).
    if (!published_last_ops(ctx)) throw std::runtime_error("a stalled op did not run the check");
  });
  REQUIRE(test::all_ok(results));
}

// Without a device: making an nccl group, directly or through join(), says why and names gloo.
// No device two ways: CUDA_VISIBLE_DEVICES empty (CUDA's own way, on a GPU machine too) and,
// under the model, no model device at all.
TEST_CASE("nccl ranks: without a device, the nccl backend says why and names the alternative", "[nccl][mp]") {
  std::map<std::string, std::string> env = {{"FASTRUN_BACKEND", "nccl"}};
#ifdef FASTRUN_CUDA_MODEL
  const bool no_model_device = GENERATE(true, false);
#else
  const bool no_model_device = false;
#endif
  CAPTURE(no_model_device);
  if (no_model_device) env["FASTRUN_CUDA_MODEL_DEVICES"] = "0";
  else env["CUDA_VISIBLE_DEVICES"] = "";
  test::RankRunOptions o;
  o.extra_env = env;
  o.timeout = 30s;
  const auto results = test::run_ranks(
      1,
      [](int) {
        RANK_REQUIRE(cuda_device_count() == 0);
        auto expect_refusal = [](const std::string& what, const char* how) {
          if (what.find("cudaGetDeviceCount") == std::string::npos || what.find("gloo") == std::string::npos)
            throw std::runtime_error(fmt::format("{}: the refusal lacks 'cudaGetDeviceCount' or 'gloo': {}", how, what));
        };
        try {
          GroupSpec spec;
          spec.name = "world";
          spec.global_ranks = {0};
          auto pg = backend::find("nccl")(spec);
          throw std::runtime_error("a group was made without a device");
        } catch (const BackendError& e) {
          expect_refusal(e.what(), "backend::find(\"nccl\")");
        }
        try {
          auto ctx = join();
          throw std::runtime_error("join() on nccl succeeded without a device");
        } catch (const BackendError& e) {
          expect_refusal(e.what(), "join()");
        }
      },
      o);
  REQUIRE(test::all_ok(results));
}

#endif  // FASTRUN_HAVE_NCCL
