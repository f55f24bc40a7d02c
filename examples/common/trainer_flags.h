#pragma once
// The flags both example trainers have (train_mlp, torch_train): launching, the model and data,
// checkpoints and the test hooks, each declared once with its help and its range. Each trainer
// adds its own and parses (options.cpp).
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/tools/flags/number_flags.h"
#include "kill_plan.h"

namespace fastrun_examples {

// Options: the trainer's struct, with the members named below. `quiet` takes --quiet's 0 or 1.
template <class Options>
void declare_trainer_flags(CLI::App& app, Options& o, int& quiet) {
  namespace flags = fastrun::flags;
  constexpr std::int64_t kBig = std::int64_t{1} << 40;
  flags::integer(app, "--nproc", o.nproc, "start N CPU ranks itself (ignored under fastrun)", 0, 4096);
  app.add_option("--log-dir", o.log_dir, "with --nproc: file each rank's output under DIR")->type_name("DIR");
  flags::integer(app, "--samples", o.samples, "samples in the dataset", 1, kBig);
  flags::integer(app, "--dim", o.dim, "input features", 1, kBig);
  flags::integer(app, "--hidden", o.hidden, "hidden units", 1, kBig);
  flags::integer(app, "--classes", o.classes, "output classes", 2, kBig);
  flags::integer(app, "--epochs", o.epochs, "passes over the data", 0, kBig);
  flags::integer(app, "--global-batch", o.global_batch, "samples per optimiser step over all ranks", 1, kBig);
  flags::decimal(app, "--lr", o.lr, "learning rate", 0, 1e6);
  app.add_option("--checkpoint", o.checkpoint, "rank 0 writes the training state here (atomically)")
      ->type_name("PATH");
  flags::integer(app, "--checkpoint-every", o.checkpoint_every, "steps between checkpoints (0: every epoch's end)",
                 0, kBig);
  app.add_option("--resume", o.resume, "checkpoint to start from")->type_name("PATH");
  app.add_option("--weights-out", o.weights_out, "rank 0 writes the final state here")->type_name("PATH");
  app.add_flag("--resume-latest", o.resume_latest,
               "start from --checkpoint when that file exists, so that every attempt of\n"
               "fastrun --max-restarts goes on from the last one's checkpoint");
  app.add_option("--kill-at", o.kill_at,
                 "STEP:RANK[:ATTEMPT],...: rank RANK raises SIGKILL before global step STEP,\n"
                 "in attempt ATTEMPT only (FASTRUN_RESTART_COUNT) or in every one (tests)")
      ->type_name("PLAN");
  flags::integer(app, "--quiet", quiet, "1: rank 0 prints only the summary", 0, 1);
}

// The checks across flags both trainers share, after parsing; a ConfigError names the flags.
template <class Options>
void check_trainer_flags(const Options& o) {
  if (o.checkpoint_every && o.checkpoint.empty())
    throw fastrun::ConfigError("--checkpoint-every needs --checkpoint PATH");
  if (o.resume_latest && o.checkpoint.empty())
    throw fastrun::ConfigError("--resume-latest resumes from --checkpoint PATH: give --checkpoint too");
  if (o.resume_latest && !o.resume.empty())
    throw fastrun::ConfigError(fmt::format("--resume {} and --resume-latest were both given: use one of them",
                                           o.resume));
  parse_kill_plan(o.kill_at);  // refused here, before anything starts, not at the first step
}

}  // namespace fastrun_examples
