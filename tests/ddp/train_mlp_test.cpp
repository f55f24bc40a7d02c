// The example trainer as real jobs: equivalence across rank counts and with no_sync
// accumulation, and exact resume after a rank is SIGKILLed (also on another rank count), with
// the consumed indices checked: every sample exactly once per epoch. train_mlp is started
// self-spawning (`train_mlp --nproc N`) and through the fastrun CLI when it is built.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checkpoint.h"
#include "job_runner.h"
#include "test_support/temp_dir.h"

namespace fs = std::filesystem;
using fastrun::test::run_job;
using fastrun::test::TempDir;

namespace {


// Small and quick: 2048 samples, global batch 64 -> 32 steps per epoch, 2 epochs.
std::vector<std::string> base_args(int nproc, const std::string& weights_out) {
  std::vector<std::string> a = {TRAIN_MLP_BIN, "--samples", "2048", "--epochs", "2", "--global-batch", "64",
                                "--hidden", "32", "--seed", "7", "--quiet", "1", "--weights-out", weights_out};
  if (nproc > 0) {
    a.push_back("--nproc");
    a.push_back(std::to_string(nproc));
  }
  return a;
}

fastrun::test::JobResult run(std::vector<std::string> args, std::vector<std::string> extra = {}) {
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_job(args, std::chrono::seconds(60));
  INFO("command output:\n" << r.output);
  REQUIRE_FALSE(r.timed_out);
  return r;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  REQUIRE(a.size() == b.size());
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(b[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  INFO("max |a - b| = " << max_diff << ", max |b| = " << max_abs << ", tolerance " << rel << " relative");
  CHECK(max_diff <= rel * max_abs);
}

// Reads every "epoch step idx..." line of the index logs in `dir`; keeps steps < max_step.
std::map<std::uint64_t, std::vector<std::uint64_t>> read_indices(const std::string& dir, std::uint64_t max_step) {
  std::map<std::uint64_t, std::vector<std::uint64_t>> by_epoch;
  for (auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::uint64_t epoch = 0, step = 0, idx = 0;
      ss >> epoch >> step;
      if (step >= max_step) continue;
      while (ss >> idx) by_epoch[epoch].push_back(idx);
    }
  }
  return by_epoch;
}

void check_each_sample_once(std::map<std::uint64_t, std::vector<std::uint64_t>> by_epoch, std::size_t epochs,
                            std::size_t n) {
  REQUIRE(by_epoch.size() == epochs);
  for (auto& [epoch, idx] : by_epoch) {
    INFO("epoch " << epoch);
    std::sort(idx.begin(), idx.end());
    REQUIRE(idx.size() == n);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(idx[i] == i);
  }
}

}  // namespace

TEST_CASE("train_mlp: N ranks reach the weights of 1 rank with the same global batch, also with no_sync accumulation",
          "[ddp][train][equivalence]") {
  TempDir dir;
  REQUIRE(run(base_args(0, dir / "w1")).exit_code == 0);
  const auto reference = train_mlp::read_checkpoint(dir / "w1");
  CHECK(reference.global_step == 64);
  for (int n : {2, 4}) {
    INFO(n << " ranks");
    REQUIRE(run(base_args(n, dir / "wn")).exit_code == 0);
    check_close(train_mlp::read_checkpoint(dir / "wn").values, reference.values, 1e-5);
  }
  INFO("2 ranks, 4 micro-batches per step under no_sync");
  REQUIRE(run(base_args(2, dir / "wa"), {"--accum", "4"}).exit_code == 0);
  check_close(train_mlp::read_checkpoint(dir / "wa").values, reference.values, 1e-5);
}

TEST_CASE("train_mlp: a rank SIGKILLed mid-epoch, resumed on the same or another rank count, ends as if never "
          "interrupted",
          "[ddp][train][resume]") {
  TempDir dir;
  fs::create_directories(dir / "idx-full");
  REQUIRE(run(base_args(2, dir / "full"), {"--log-indices", dir / "idx-full"}).exit_code == 0);
  const auto full = train_mlp::read_checkpoint(dir / "full");
  check_each_sample_once(read_indices(dir / "idx-full", 1u << 30), 2, 2048);

  // Rank 1 dies before global step 47 (epoch 1, step 15 of 32); checkpoints every 5 steps, so the
  // one of step 45 is complete (rank 0 wrote it before joining the all-reduces of steps 45 and 46).
  fs::create_directories(dir / "idx-a");
  auto killed = run(base_args(2, dir / "unused"), {"--checkpoint", dir / "ckpt", "--checkpoint-every", "5",
                                                   "--log-indices", dir / "idx-a", "--kill-at", "47:1"});
  CHECK(killed.exit_code == 128 + 9);  // the job ends with the SIGKILLed rank's status
  const auto ckpt = train_mlp::read_checkpoint(dir / "ckpt");
  CHECK(ckpt.global_step == 45);
  CHECK(ckpt.epoch == 1);

  for (int n : {2, 4}) {
    INFO("resumed on " << n << " ranks");
    const std::string idx_b = dir / fmt::format("idx-b{}", n);
    fs::create_directories(idx_b);
    auto resumed = run(base_args(n, dir / "resumed"), {"--resume", dir / "ckpt", "--log-indices", idx_b});
    REQUIRE(resumed.exit_code == 0);
    const auto end = train_mlp::read_checkpoint(dir / "resumed");
    CHECK(end.global_step == 64);
    check_close(end.values, full.values, n == 2 ? 1e-6 : 1e-5);
    // What the final weights saw: the killed run up to its checkpoint, then the resumed run.
    auto seen = read_indices(dir / "idx-a", ckpt.global_step);
    for (auto& [epoch, idx] : read_indices(idx_b, 1u << 30)) seen[epoch].insert(seen[epoch].end(), idx.begin(), idx.end());
    check_each_sample_once(seen, 2, 2048);
  }
}

TEST_CASE("train_mlp: a checkpoint whose number field is damaged is refused, naming the field", "[ddp][train][resume]") {
  TempDir dir;
  train_mlp::Checkpoint c;
  c.global_step = 45;
  c.sampler_state = "{}";
  c.values = {1.0f, 2.0f};
  train_mlp::write_checkpoint_atomic(dir / "ckpt", c);
  CHECK(train_mlp::read_checkpoint(dir / "ckpt").global_step == 45);
  // "45" followed by damage: a lenient parser read 45 and resumed from the wrong place.
  std::string text;
  {
    std::ifstream in(dir / "ckpt", std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = text.find("global_step 45\n");
  REQUIRE(at != std::string::npos);
  text.replace(at, 15, "global_step 45x\n");
  std::ofstream(dir / "ckpt", std::ios::binary) << text;
  CHECK_THROWS_WITH(train_mlp::read_checkpoint(dir / "ckpt"),
                    Catch::Contains("'global_step' is '45x', expected a whole number >= 0"));
}

#ifdef FASTRUN_BIN
TEST_CASE("train_mlp: a malformed --kill-at entry is refused by name before anything starts", "[ddp][train]") {
  // Fields come from text::split: an empty entry or part reaches the checks, which name it.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"5:1,7", "--kill-at '7': expected STEP:RANK or STEP:RANK:ATTEMPT, comma-separated"},
      {"5:1,", "--kill-at '': expected STEP:RANK or STEP:RANK:ATTEMPT"},
      {"5:1:0:2", "--kill-at '5:1:0:2': expected STEP:RANK or STEP:RANK:ATTEMPT"},
      {"5:", "--kill-at RANK='' is not valid: expected an integer from 0 to"},
      {"5:1:x", "--kill-at ATTEMPT='x' is not valid"}};
  for (const auto& [plan, message] : cases) {
    INFO("--kill-at " << plan);
    const auto r = run({TRAIN_MLP_BIN, "--kill-at", plan});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
}

TEST_CASE("train_mlp under the fastrun CLI: 4 ranks with --log-dir", "[ddp][train][cli]") {
  TempDir dir;
  auto r = run({FASTRUN_BIN, "--nproc", "4", "--log-dir", dir / "logs", "--run-id", "mlp-logs", TRAIN_MLP_BIN,
                "--samples", "2048", "--epochs", "1", "--weights-out", dir / "w"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("epoch 1/1"));
  CHECK(train_mlp::read_checkpoint(dir / "w").global_step == 32);
  // Every rank's output was filed; rank 0's stdout holds the lines the terminal showed.
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const fs::path rank_dir = fs::path(dir / "logs") / "mlp-logs" / fmt::format("rank-{}", rank);
    CHECK(fs::exists(rank_dir / "stdout.log"));
    CHECK(fs::exists(rank_dir / "stderr.log"));
  }
  std::ifstream log(fs::path(dir / "logs") / "mlp-logs/rank-0/stdout.log");
  const std::string rank0((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK_THAT(rank0, Catch::Contains("epoch 1/1"));
}

// fastrun --max-restarts with --resume-latest (docs/restarts.md): a random rank SIGKILLed at a
// random step of attempts 0, 1 and 2 costs nothing but time: each next attempt goes on from rank
// 0's last checkpoint and the job ends with the uninterrupted weights, on shm and on gloo.
TEST_CASE("train_mlp under fastrun --max-restarts: random ranks killed at random steps of three attempts, each "
          "resumed by the next, end as if never interrupted",
          "[ddp][train][cli][restarts]") {
  TempDir dir;
  REQUIRE(run(base_args(2, dir / "full")).exit_code == 0);
  const auto full = train_mlp::read_checkpoint(dir / "full");
  std::random_device rd;
  for (const char* backend : {"shm", "gloo"}) {
    // Three distinct steps of 1..63 (of 64), in rising order: attempt k resumes from a checkpoint
    // at or before attempt k-1's kill step, so it reaches its own, later, kill step.
    std::vector<int> steps;
    while (steps.size() < 3) {
      const int s = 1 + static_cast<int>(rd() % 63);
      if (std::find(steps.begin(), steps.end(), s) == steps.end()) steps.push_back(s);
    }
    std::sort(steps.begin(), steps.end());
    std::string plan;
    std::vector<int> ranks;
    for (int attempt = 0; attempt < 3; ++attempt) {
      ranks.push_back(static_cast<int>(rd() % 2));
      plan += fmt::format("{}{}:{}:{}", attempt ? "," : "", steps[attempt], ranks.back(), attempt);
    }
    INFO(backend << ": --kill-at " << plan);
    const std::string ckpt = dir / fmt::format("ckpt-{}", backend);
    std::vector<std::string> args = {"/usr/bin/env", fmt::format("FASTRUN_BACKEND={}", backend), FASTRUN_BIN,
                                      "--nproc", "2", "--max-restarts", "3"};
    for (const std::string& a : base_args(0, dir / fmt::format("w-{}", backend))) args.push_back(a);
    auto r = run(args, {"--checkpoint", ckpt, "--checkpoint-every", "3", "--resume-latest", "--kill-at", plan});
    CHECK(r.exit_code == 0);
    for (int attempt = 0; attempt < 3; ++attempt) {
      // Each attempt's summary names its killed rank: its failure is the one planned for it.
      const auto at = r.output.find(fmt::format("attempt {} of the job failed ({} of --max-restarts 3 left)",
                                                attempt, 3 - attempt));
      REQUIRE(at != std::string::npos);
      CHECK_THAT(r.output.substr(at, 300), Catch::Contains(fmt::format("rank {} (pid", ranks[attempt])) &&
                                               Catch::Contains("killed by signal SIGKILL"));
      CHECK_THAT(r.output, Catch::Contains(fmt::format("starting attempt {} of the job", attempt + 1)));
    }
    CHECK_FALSE(Catch::Contains("attempt 3 of the job failed").match(r.output));
    const auto end = train_mlp::read_checkpoint(dir / fmt::format("w-{}", backend));
    CHECK(end.global_step == 64);
    check_close(end.values, full.values, 1e-6);
  }
}

TEST_CASE("train_mlp under fastrun --max-restarts: a rank that dies in every attempt ends the job with its status "
          "after the last one",
          "[ddp][train][cli][restarts]") {
  TempDir dir;
  std::vector<std::string> args = {FASTRUN_BIN, "--nproc", "2", "--max-restarts", "2"};
  for (const std::string& a : base_args(0, dir / "w")) args.push_back(a);
  // Checkpoints every 5 steps: each attempt resumes at step 45 and dies again before step 47.
  auto r = run(args, {"--checkpoint", dir / "ckpt", "--checkpoint-every", "5", "--resume-latest", "--kill-at",
                      "47:1"});
  CHECK(r.exit_code == 128 + 9);
  CHECK_THAT(r.output, Catch::Contains("attempt 2 of the job failed, the last one --max-restarts 2 allows"));
  CHECK_THAT(r.output, Catch::Contains("attempt 1 of the job failed (1 of --max-restarts 2 left)"));
  CHECK_FALSE(fs::exists(dir / "w"));
  CHECK(train_mlp::read_checkpoint(dir / "ckpt").global_step == 45);
}
#endif
