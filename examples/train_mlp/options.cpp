#include "options.h"

#include <cstdint>

#include <CLI/CLI.hpp>

#include "../common/trainer_flags.h"
#include "fastrun/tools/flags/number_flags.h"

namespace train_mlp {

void parse_options(int argc, char** argv, Options& o) {
  namespace flags = fastrun::flags;
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  CLI::App app("Trains a 2-layer MLP on a synthetic seeded dataset with fastrun DDP (see docs/train_mlp.md).",
               "train_mlp");
  int quiet = 0;
  fastrun_examples::declare_trainer_flags(app, o, quiet);
  flags::integer(app, "--accum", o.accum, "micro-batches per step (all but the last under no_sync)", 1, kBig);
  flags::integer(app, "--seed", o.seed, "the data and weights' seed (default: FASTRUN_GLOBAL_SEED, else 1234)", 0,
                 INT64_MAX);
  flags::integer(app, "--bucket-kb", o.bucket_kb, "DDP bucket cap in KiB (0: DDP's 25 MiB)", 0, kBig);
  flags::integer(app, "--first-bucket-kb", o.first_bucket_kb, "cap of the first bucket in KiB (0: DDP's 1 MiB)", 0,
                 kBig);
  app.add_option("--log-indices", o.log_indices, "rank r appends \"epoch step idx...\" lines to DIR (tests)")
      ->type_name("DIR");
  flags::parse(app, argc, argv);
  fastrun_examples::check_trainer_flags(o);
  o.quiet = quiet != 0;
  o.seed_given = app.count("--seed") > 0;
}

}  // namespace train_mlp
