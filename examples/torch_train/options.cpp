#include "options.h"

#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "../common/flag_values.h"

namespace torch_train {
using fastrun_examples::to_u64;
using fastrun_examples::to_nonnegative_double;

std::string usage() {
  return "usage: torch_train [--nproc N] [--log-dir DIR] [--samples N] [--dim D] [--hidden H] [--classes C]\n"
         "                   [--epochs E] [--global-batch G] [--lr X] [--momentum M] [--seed S] [--workers W]\n"
         "                   [--checkpoint PATH] [--checkpoint-every STEPS] [--resume PATH] [--weights-out PATH]\n"
         "                   [--compare-with PATH] [--tolerance X] [--die-at-step S] [--die-rank R] [--quiet 1]\n"
         "Trains a small LibTorch MLP on synthetic data, sharded by fastrun's distributed sampler through a\n"
         "torch::data loader, with atomic checkpoints and exact resume on any rank count (docs/torch-data.md).\n";
}

bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value\n{}", flag, usage()));
    const std::string v = argv[++i];
    auto u = [&] { return to_u64(flag, v); };
    if (flag == "--nproc") o.nproc = static_cast<int>(u());
    else if (flag == "--log-dir") o.log_dir = v;
    else if (flag == "--samples") o.samples = u();
    else if (flag == "--dim") o.dim = u();
    else if (flag == "--hidden") o.hidden = u();
    else if (flag == "--classes") o.classes = u();
    else if (flag == "--epochs") o.epochs = u();
    else if (flag == "--global-batch") o.global_batch = u();
    else if (flag == "--lr") o.lr = to_nonnegative_double(flag, v);
    else if (flag == "--momentum") o.momentum = to_nonnegative_double(flag, v);
    else if (flag == "--seed") o.seed = u();
    else if (flag == "--workers") o.workers = u();
    else if (flag == "--checkpoint") o.checkpoint = v;
    else if (flag == "--checkpoint-every") o.checkpoint_every = u();
    else if (flag == "--resume") o.resume = v;
    else if (flag == "--weights-out") o.weights_out = v;
    else if (flag == "--compare-with") o.compare_with = v;
    else if (flag == "--tolerance") o.tolerance = to_nonnegative_double(flag, v);
    else if (flag == "--die-at-step") o.die_at_step = static_cast<std::int64_t>(u());
    else if (flag == "--die-rank") o.die_rank = static_cast<int>(u());
    else if (flag == "--quiet") o.quiet = u() != 0;
    else throw std::invalid_argument(fmt::format("unknown flag '{}'\n{}", flag, usage()));
  }
  if (o.samples == 0 || o.dim == 0 || o.hidden == 0 || o.classes < 2 || o.global_batch == 0)
    throw std::invalid_argument("--samples, --dim, --hidden and --global-batch must be > 0, --classes >= 2");
  if (o.checkpoint_every && o.checkpoint.empty())
    throw std::invalid_argument("--checkpoint-every needs --checkpoint PATH");
  return true;
}

}  // namespace torch_train
