// The torch_train example as real jobs: 4 ranks, one SIGKILLed mid-epoch (the job fails fast),
// resumed from rank 0's last checkpoint on 2 ranks (and on 4 with loader worker threads), ends
// with the weights of an uninterrupted run. What the samplers guarantee across world sizes
// (docs/samplers.md): the consumed count is global, so step s uses the same global positions of
// the epoch's order on any number of ranks; the weights then differ only by float rounding
// (the gradient average is summed in another order).
#include <chrono>
#include <cmath>
#include <filesystem>

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


// 2048 samples, global batch 64: 32 steps per epoch, 2 epochs.
std::vector<std::string> args(int nproc, std::vector<std::string> extra) {
  std::vector<std::string> a = {TORCH_TRAIN_BIN, "--samples", "2048", "--epochs", "2", "--global-batch", "64",
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
  auto full_run = run({FASTRUN_BIN, "--nproc", "4", TORCH_TRAIN_BIN, "--samples", "2048", "--epochs", "2",
                       "--global-batch", "64", "--seed", "7", "--weights-out", dir / "full"});
  REQUIRE(full_run.exit_code == 0);
  CHECK_THAT(full_run.output, Catch::Contains("4 rank(s)") && Catch::Contains("epoch 2/2"));
  const auto full = read_weights(dir / "full");
  CHECK(full.progress.step == 64);

  // Rank 2 of 4 dies before global step 43 (epoch 1, step 11 of 32). Checkpoints every 5 steps:
  // the one of step 40 is complete (rank 0 wrote it before the all-reduce of step 41, which
  // rank 2 joined). The job fails fast with the killed rank's status.
  const auto t0 = std::chrono::steady_clock::now();
  auto killed = run(args(4, {"--checkpoint", dir / "ck", "--checkpoint-every", "5", "--die-at-step", "43",
                             "--die-rank", "2"}));
  const double killed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(killed.exit_code == 128 + 9);
  CHECK(killed_s < 30);
  const auto ck = read_weights(dir / "ck");
  CHECK(ck.progress.step == 40);
  CHECK(ck.progress.epoch == 1);

  {
    INFO("resumed on 2 ranks");
    auto resumed = run(args(2, {"--resume", dir / "ck", "--weights-out", dir / "resumed2"}));
    REQUIRE(resumed.exit_code == 0);
    const auto end = read_weights(dir / "resumed2");
    CHECK(end.progress.step == 64);
    check_close(end, full, 1e-5);
  }
  {
    INFO("resumed on 4 ranks, each with 2 loader worker threads prefetching");
    auto resumed = run(args(4, {"--resume", dir / "ck", "--workers", "2", "--weights-out", dir / "resumed4"}));
    REQUIRE(resumed.exit_code == 0);
    const auto end = read_weights(dir / "resumed4");
    CHECK(end.progress.step == 64);
    check_close(end, full, 1e-6);
  }
}

TEST_CASE("torch_train: bad flags and a rank count that does not divide the batch are refused before training",
          "[torch][train][errors]") {
  auto bad = run({TORCH_TRAIN_BIN, "--epochs", "x"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--epochs 'x'"));
  auto uneven = run(args(3, {"--global-batch", "64"}));
  CHECK(uneven.exit_code == 2);
  CHECK_THAT(uneven.output, Catch::Contains("--global-batch 64 must be a multiple of the number of ranks (3)"));
}
