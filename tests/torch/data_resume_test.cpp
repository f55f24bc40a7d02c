// The torch_train example as real jobs: 4 ranks, one SIGKILLed mid-epoch (the job fails fast),
// resumed from rank 0's last checkpoint on 2 ranks (and on 1 with loader worker threads), ends
// with the weights of an uninterrupted run. What the samplers guarantee across world sizes
// (docs/samplers.md): the consumed count is global, so step s uses the same global positions of
// the epoch's order on any number of ranks; the weights then differ only by float rounding
// (the gradient average is summed in another order).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <utility>

// LibTorch before Catch: Debian's LibTorch brings glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include "fastrun/torch/checkpoint.h"
#include "model.h"  // examples/torch_train
#undef CHECK
#include <catch2/catch.hpp>

#include "test_support/temp_dir.h"
#include "job_runner.h"  // tests/ddp: a program as a child in its own process group, with a deadline

namespace fs = std::filesystem;
using fastrun::test::run_job;
using fastrun::test::TempDir;

namespace {


// 1024 samples, global batch 64: 16 steps per epoch, 2 epochs (small: the ASan stage runs it too).
std::vector<std::string> args(int nproc, std::vector<std::string> extra) {
  std::vector<std::string> a = {TORCH_TRAIN_BIN, "--samples", "1024", "--epochs", "2", "--global-batch", "64",
                                "--seed", "7", "--quiet", "1"};
  if (nproc > 0) a.insert(a.end(), {"--nproc", std::to_string(nproc)});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

fastrun::test::JobResult run(const std::vector<std::string>& argv) {
  auto r = run_job(argv, std::chrono::seconds(90));
  INFO("command output:\n" << r.output);
  REQUIRE_FALSE(r.timed_out);
  return r;
}

struct Weights {
  fastrun::torch::TrainingProgress progress;
  std::vector<torch::Tensor> values;
};

Weights read_weights(const std::string& path) {
  torch_train::Net net(16, 32, 4);  // torch_train's default shape
  Weights w;
  w.progress = fastrun::torch::load_checkpoint(path, *net, nullptr);
  for (const auto& p : net->parameters()) w.values.push_back(p.detach().clone());
  return w;
}

void check_close(const Weights& a, const Weights& b, double rel) {
  REQUIRE(a.values.size() == b.values.size());
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    max_abs = std::max(max_abs, b.values[i].abs().max().item<double>());
    max_diff = std::max(max_diff, (a.values[i] - b.values[i]).abs().max().item<double>());
  }
  INFO("max |a - b| = " << max_diff << ", max |b| = " << max_abs << ", tolerance " << rel << " relative");
  CHECK(max_diff <= rel * max_abs);
}

}  // namespace

TEST_CASE("torch_train: 4 ranks with one killed mid-epoch and resumed on 2 ranks end with the uninterrupted weights",
          "[torch][train][resume]") {
  torch::set_num_threads(1);
  TempDir dir;
  // The uninterrupted run, under the fastrun CLI.
  auto full_run = run({FASTRUN_BIN, "--nproc", "4", TORCH_TRAIN_BIN, "--samples", "1024", "--epochs", "2",
                       "--global-batch", "64", "--seed", "7", "--weights-out", dir / "full"});
  REQUIRE(full_run.exit_code == 0);
  CHECK_THAT(full_run.output, Catch::Contains("4 rank(s)") && Catch::Contains("epoch 2/2"));
  const auto full = read_weights(dir / "full");
  CHECK(full.progress.step == 32);

  // Rank 2 of 4 dies before global step 23 (epoch 1, step 7 of 16). Checkpoints every 5 steps:
  // the one of step 20 is complete (rank 0 wrote it before the all-reduce of step 21, which
  // rank 2 joined). The job fails (within run()'s deadline: no hang) with the killed rank's
  // status, and the launcher names it.
  auto killed = run(args(4, {"--checkpoint", dir / "ck", "--checkpoint-every", "5", "--kill-at", "23:2"}));
  CHECK(killed.exit_code == 128 + 9);
  CHECK_THAT(killed.output, Catch::Contains("rank 2") && Catch::Contains("SIGKILL"));
  const auto ck = read_weights(dir / "ck");
  CHECK(ck.progress.step == 20);
  CHECK(ck.progress.epoch == 1);

  {
    INFO("resumed on 2 ranks");
    auto resumed = run(args(2, {"--resume", dir / "ck", "--weights-out", dir / "resumed2"}));
    REQUIRE(resumed.exit_code == 0);
    const auto end = read_weights(dir / "resumed2");
    CHECK(end.progress.step == 32);
    check_close(end, full, 1e-5);
  }
  {
    INFO("resumed on 1 rank with 2 loader worker threads prefetching");
    auto resumed = run(args(1, {"--resume", dir / "ck", "--workers", "2", "--weights-out", dir / "resumed1"}));
    REQUIRE(resumed.exit_code == 0);
    const auto end = read_weights(dir / "resumed1");
    CHECK(end.progress.step == 32);
    check_close(end, full, 1e-5);
  }
}

// The resume without a person (docs/restarts.md): under fastrun --max-restarts, --resume-latest
// makes every attempt start from the last checkpoint; a random rank killed at a random step of
// attempts 0 and 1 leaves the weights of an uninterrupted run.
TEST_CASE("torch_train: random ranks killed in two attempts under fastrun --max-restarts end with the "
          "uninterrupted weights",
          "[torch][train][resume][restarts]") {
  torch::set_num_threads(1);
  TempDir dir;
  auto full_run = run({FASTRUN_BIN, "--nproc", "2", TORCH_TRAIN_BIN, "--samples", "1024", "--epochs", "2",
                       "--global-batch", "64", "--seed", "7", "--quiet", "1", "--weights-out", dir / "full"});
  REQUIRE(full_run.exit_code == 0);
  const auto full = read_weights(dir / "full");

  // Two distinct steps of 1..31 (of 32), rising: attempt 1 resumes at or before attempt 0's kill
  // step, so it reaches its own.
  std::random_device rd;
  int first = 1 + static_cast<int>(rd() % 31), second = 1 + static_cast<int>(rd() % 31);
  while (second == first) second = 1 + static_cast<int>(rd() % 31);
  if (second < first) std::swap(first, second);
  const int rank0 = static_cast<int>(rd() % 2), rank1 = static_cast<int>(rd() % 2);
  const auto text = [](int n) { return std::to_string(n); };
  const std::string plan = text(first) + ":" + text(rank0) + ":0," + text(second) + ":" + text(rank1) + ":1";
  INFO("--kill-at " << plan);
  auto r = run({FASTRUN_BIN, "--nproc", "2", "--max-restarts", "3", TORCH_TRAIN_BIN, "--samples", "1024", "--epochs",
                "2", "--global-batch", "64", "--seed", "7", "--quiet", "1", "--checkpoint", dir / "ck",
                "--checkpoint-every", "4", "--resume-latest", "--kill-at", plan, "--weights-out", dir / "restarted"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("attempt 0 of the job failed (3 of --max-restarts 3 left)") &&
                           Catch::Contains("attempt 1 of the job failed (2 of --max-restarts 3 left)") &&
                           Catch::Contains("starting attempt 2 of the job"));
  CHECK_FALSE(Catch::Contains("attempt 2 of the job failed").match(r.output));
  const auto end = read_weights(dir / "restarted");
  CHECK(end.progress.step == 32);
  check_close(end, full, 1e-5);
}

TEST_CASE("torch_train: bad flags and a rank count that does not divide the batch are refused before training",
          "[torch][train][errors]") {
  auto bad = run({TORCH_TRAIN_BIN, "--epochs", "x"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--epochs='x' is not valid"));
  auto uneven = run(args(2, {"--global-batch", "63"}));
  CHECK(uneven.exit_code == 2);
  CHECK_THAT(uneven.output, Catch::Contains("--global-batch 63 must be a multiple of the number of ranks (2)"));
  auto plan = run({TORCH_TRAIN_BIN, "--kill-at", "5:1,7"});
  CHECK(plan.exit_code == 2);
  CHECK_THAT(plan.output, Catch::Contains("--kill-at '7': expected STEP:RANK or STEP:RANK:ATTEMPT"));
  auto latest = run({TORCH_TRAIN_BIN, "--resume-latest"});
  CHECK(latest.exit_code == 2);
  CHECK_THAT(latest.output, Catch::Contains("--resume-latest resumes from --checkpoint PATH: give --checkpoint too"));
}
