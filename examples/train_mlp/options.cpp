#include "options.h"

#include <cstdint>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../common/trainer_flags.h"
#include "fastrun/runtime/error.h"
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
  app.add_flag("--resume-latest", o.resume_latest,
               "start from --checkpoint when that file exists, so that every attempt of\n"
               "fastrun --max-restarts goes on from the last one's checkpoint");
  flags::integer(app, "--die-in-attempt", o.die_in_attempt,
                 "--die-at-step only in attempt N (FASTRUN_RESTART_COUNT; tests); -1: every attempt", -1, kBig);
  flags::parse(app, argc, argv);
  if (o.resume_latest && o.checkpoint.empty())
    throw fastrun::ConfigError("--resume-latest resumes from --checkpoint PATH: give --checkpoint too");
  if (o.resume_latest && !o.resume.empty())
    throw fastrun::ConfigError(fmt::format("--resume {} and --resume-latest were both given: use one of them",
                                           o.resume));
  o.quiet = quiet != 0;
  o.seed_given = app.count("--seed") > 0;
}

}  // namespace train_mlp
