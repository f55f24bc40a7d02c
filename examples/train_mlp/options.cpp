#include "options.h"

#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "../common/flag_values.h"

namespace train_mlp {
using fastrun_examples::to_u64;

std::string usage() {
  return "usage: train_mlp [--nproc N] [--log-dir DIR] [--epochs E] [--samples N] [--global-batch G]\n"
         "                 [--accum K] [--lr X] [--dim D] [--hidden H] [--classes C] [--seed S]\n"
         "                 [--checkpoint PATH] [--checkpoint-every STEPS] [--resume PATH] [--weights-out PATH]\n"
         "                 [--bucket-kb KB] [--first-bucket-kb KB] [--log-indices DIR]\n"
         "                 [--die-at-step S] [--die-rank R] [--quiet 1]\n"
         "Trains a 2-layer MLP on a synthetic seeded dataset with fastrun DDP (see docs/train_mlp.md).\n";
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
    else if (flag == "--accum") o.accum = u();
    else if (flag == "--lr") {
      try {
        o.lr = std::stod(v);
      } catch (const std::exception&) {
        throw std::invalid_argument(fmt::format("--lr '{}': expected a number", v));
      }
    } else if (flag == "--seed") o.seed = u(), o.seed_given = true;
    else if (flag == "--bucket-kb") o.bucket_kb = u();
    else if (flag == "--first-bucket-kb") o.first_bucket_kb = u();
    else if (flag == "--checkpoint") o.checkpoint = v;
    else if (flag == "--checkpoint-every") o.checkpoint_every = u();
    else if (flag == "--resume") o.resume = v;
    else if (flag == "--weights-out") o.weights_out = v;
    else if (flag == "--log-indices") o.log_indices = v;
    else if (flag == "--die-at-step") o.die_at_step = static_cast<std::int64_t>(u());
    else if (flag == "--die-rank") o.die_rank = static_cast<int>(u());
    else if (flag == "--quiet") o.quiet = u() != 0;
    else throw std::invalid_argument(fmt::format("unknown flag '{}'\n{}", flag, usage()));
  }
  if (o.samples == 0 || o.dim == 0 || o.hidden == 0 || o.classes < 2 || o.global_batch == 0 || o.accum == 0)
    throw std::invalid_argument("--samples, --dim, --hidden, --global-batch and --accum must be > 0, --classes >= 2");
  return true;
}

}  // namespace train_mlp
