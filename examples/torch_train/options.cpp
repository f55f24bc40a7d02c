#include "options.h"

#include <cstdint>

#include <CLI/CLI.hpp>

#include "../common/trainer_flags.h"
#include "fastrun/tools/flags/number_flags.h"

namespace torch_train {

void parse_options(int argc, char** argv, Options& o) {
  namespace flags = fastrun::flags;
  CLI::App app("Trains a small LibTorch MLP on synthetic data, sharded by fastrun's distributed sampler through a "
               "torch::data loader, with atomic checkpoints and exact resume on any rank count (docs/torch-data.md).",
               "torch_train");
  int quiet = 0;
  fastrun_examples::declare_trainer_flags(app, o, quiet);
  flags::decimal(app, "--momentum", o.momentum, "SGD momentum", 0, 1e6);
  flags::integer(app, "--seed", o.seed, "the data and weights' seed", 0, INT64_MAX);
  flags::integer(app, "--workers", o.workers, "torch data-loader worker threads per rank", 0, 1024);
  app.add_option("--compare-with", o.compare_with, "at the end, rank 0 compares the weights with this checkpoint's")
      ->type_name("PATH");
  flags::decimal(app, "--tolerance", o.tolerance, "... max |a - b| <= X * max |b|, else exit status 3", 0, 1e300);
  flags::parse(app, argc, argv);
  fastrun_examples::check_trainer_flags(o);
  o.quiet = quiet != 0;
}

}  // namespace torch_train
