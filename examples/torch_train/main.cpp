// torch_train: a LibTorch model trained data-parallel under fastrun, the way a Python user
// writes it with DistributedSampler, DataLoader and torch.save. A small MLP on synthetic data;
// fastrun's reproducible sampler shards each epoch through a torch::data loader; rank 0 writes
// atomic checkpoints (model, optimizer, sampler state, step); --resume continues exactly, also
// on another number of ranks, and ends with the weights of an uninterrupted run.
//
//   fastrun --nproc 4 torch_train                  # under the CLI launcher
//   torch_train --nproc 4                          # self-spawning
// See docs/torch-data.md.
#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "fastrun/launcher/self_launch.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/samplers/random_sampler.h"
#include "fastrun/torch/checkpoint.h"
#include "fastrun/torch/ddp.h"
#include "fastrun/torch/sampler.h"
#include "../common/kill_plan.h"
#include "../common/resume_path.h"
#include "model.h"
#include "options.h"

namespace torch_train {
namespace {

// Rank 0's check of an exact resume: the final weights against another run's checkpoint.
// Returns 0 when max |a - b| <= tolerance * max |b|, else 3.
int compare_weights(const Net& net, const Options& opt) {
  Net other(static_cast<std::int64_t>(opt.dim), static_cast<std::int64_t>(opt.hidden),
            static_cast<std::int64_t>(opt.classes));
  fastrun::torch::load_checkpoint(opt.compare_with, *other, nullptr);
  double max_diff = 0, max_abs = 0;
  const auto mine = net->parameters(), theirs = other->parameters();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    max_diff = std::max(max_diff, (mine[i] - theirs[i]).abs().max().item<double>());
    max_abs = std::max(max_abs, theirs[i].abs().max().item<double>());
  }
  const bool same = max_diff <= opt.tolerance * max_abs;
  std::printf("torch_train: weights %s %s: max |a-b| %.3g, max |b| %.3g (tolerance %g relative)\n",
              same ? "match" : "DIFFER from", opt.compare_with.c_str(), max_diff, max_abs, opt.tolerance);
  std::fflush(stdout);
  return same ? 0 : 3;
}

int train(const Options& opt) {
  // 1. Join: rank, world size, the default process group. One intra-op thread per rank: the
  //    ranks already share the cores.
  torch::set_num_threads(1);
  auto ctx = fastrun::join();
  auto& world = ctx->world();
  const auto R = static_cast<std::uint64_t>(ctx->world_size());
  const std::int64_t attempt = fastrun::env::find_int(fastrun::env::kRestartCount).value_or(0);
  const auto kills = fastrun_examples::parse_kill_plan(opt.kill_at);
  if (opt.global_batch % R != 0)
    throw fastrun::ConfigError(fmt::format("--global-batch {} must be a multiple of the number of ranks ({})",
                                           opt.global_batch, R));
  const std::uint64_t b = opt.global_batch / R;  // per rank and step

  // 2. Data, model and optimizer: the same on every rank (same seed).
  const auto d = static_cast<std::int64_t>(opt.dim), h = static_cast<std::int64_t>(opt.hidden),
             c = static_cast<std::int64_t>(opt.classes);
  SyntheticData data(static_cast<std::int64_t>(opt.samples), d, c, opt.seed);
  Net net = make_net(d, h, c, opt.seed);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(opt.lr).momentum(opt.momentum));

  // 3. The sampler: one permutation per epoch, rank r takes its share; step s on R ranks uses
  //    global positions [s*G, (s+1)*G) whatever R is, so any rank count trains the same way.
  fastrun::samplers::RandomSampler order(opt.samples, /*shuffle=*/true, opt.seed);
  order.set_distributed(static_cast<int>(R), ctx->rank(), /*pad=*/false);
  fastrun::torch::DistributedSampler sampler(std::move(order));

  // 4. Resume: every rank reads the checkpoint (model, optimizer, step, sampler position):
  //    --resume's, or with --resume-latest the last one written, so that every attempt of
  //    fastrun --max-restarts goes on where the last one stopped.
  fastrun::torch::TrainingProgress progress;
  const std::string resume = fastrun_examples::resume_path(opt);
  if (!resume.empty()) {
    progress = fastrun::torch::load_checkpoint(resume, *net, &optimizer);
    sampler.load_state(progress.sampler_state);  // saved on any rank count
  }
  // 5. DDP: checks every rank has the same parameters, broadcasts rank 0's, and from now on
  //    backward() averages the gradients over the ranks (in buckets, overlapping the pass).
  fastrun::torch::DistributedDataParallel ddp(world, net);

  auto loader = torch::data::make_data_loader(
      data.map(torch::data::transforms::Stack<>()), sampler,
      torch::data::DataLoaderOptions().batch_size(b).drop_last(true).workers(opt.workers));
  if (ctx->rank() == 0 && !opt.quiet) {
    std::printf("torch_train: %llu rank(s) on %s, %llu samples, global batch %llu (%llu per rank)%s\n",
                static_cast<unsigned long long>(R), world.backend_name().c_str(),
                static_cast<unsigned long long>(opt.samples), static_cast<unsigned long long>(opt.global_batch),
                static_cast<unsigned long long>(b),
                resume.empty() ? ""
                               : fmt::format("; resumed from {} at epoch {}, step {}", resume, progress.epoch,
                                                 progress.step)
                                         .c_str());
    std::fflush(stdout);
  }

  // 6. Train.
  std::uint64_t step = progress.step;
  for (std::uint64_t epoch = sampler.epoch(); epoch < opt.epochs; ++epoch) {
    sampler.set_epoch(epoch);  // the restored epoch keeps its position
    std::size_t used = 0;      // batches of this pass the model has consumed
    double loss_sum = 0;
    for (auto& batch : *loader) {
      fastrun_examples::kill_if_planned(kills, step, ctx->rank(), attempt);  // test hook (--kill-at)
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
      loss.backward();  // DDP: the gradients are averaged over the ranks when it returns
      optimizer.step();
      ++used;
      ++step;
      loss_sum += loss.item<double>();
      if (opt.checkpoint_every && step % opt.checkpoint_every == 0)
        fastrun::torch::save_checkpoint(world, opt.checkpoint, *net, &optimizer,
                                        {epoch, step, sampler.state_after_batches(used)});
    }
    if (used == 0) continue;  // resumed at the very end of an epoch
    if (ctx->rank() == 0 && !opt.quiet) {
      std::printf("epoch %llu/%llu  step %llu  rank-0 loss %.4f\n", static_cast<unsigned long long>(epoch + 1),
                  static_cast<unsigned long long>(opt.epochs), static_cast<unsigned long long>(step),
                  loss_sum / static_cast<double>(used));
      std::fflush(stdout);
    }
    if (!opt.checkpoint.empty())
      fastrun::torch::save_checkpoint(world, opt.checkpoint, *net, &optimizer,
                                      {epoch, step, sampler.state_after_batches(used)});
  }
  if (!opt.weights_out.empty())
    fastrun::torch::save_checkpoint(world, opt.weights_out, *net, &optimizer, {sampler.epoch(), step, sampler.state()});
  if (ctx->rank() == 0 && !opt.quiet) {
    std::printf("torch_train: done: %llu steps\n", static_cast<unsigned long long>(step));
    std::fflush(stdout);
  }
  if (ctx->rank() == 0 && !opt.compare_with.empty()) return compare_weights(net, opt);
  return 0;
}

}  // namespace
}  // namespace torch_train

int main(int argc, char** argv) {
  torch_train::Options opt;
  try {
    torch_train::parse_options(argc, argv, opt);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "torch_train: %s\n", e.what());
    return 2;
  }
  try {
    if (opt.nproc > 0) {  // this process becomes rank 0 and starts the others as copies of itself
      fastrun::SelfLaunchOptions launch;
      launch.nproc = opt.nproc;
      launch.log_dir = opt.log_dir;
      fastrun::launch_self(argc, argv, launch);
    }
    return torch_train::train(opt);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "torch_train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_train: error: %s\n", e.what());
    return 1;
  }
}
