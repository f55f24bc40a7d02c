#pragma once
// Command line of train_mlp (options.cpp declares each flag with its help and its range).
#include <cstdint>
#include <string>

namespace train_mlp {

struct Options {
  // Launching (only for `./train_mlp --nproc 4`; ignored by ranks started by `fastrun`).
  int nproc = 0;
  std::string log_dir;
  // The job.
  std::uint64_t samples = 16384;
  std::uint64_t dim = 32, hidden = 64, classes = 4;
  std::uint64_t epochs = 3;
  std::uint64_t global_batch = 64;  // samples per optimiser step over all ranks
  std::uint64_t accum = 1;          // micro-batches per step (all but the last under no_sync)
  double lr = 0.2;
  std::uint64_t seed = 1234;        // FASTRUN_GLOBAL_SEED when set, unless --seed is given
  bool seed_given = false;
  std::size_t bucket_kb = 0, first_bucket_kb = 0;  // 0 = DDP defaults (25 MiB, 1 MiB)
  // Checkpoints.
  std::string checkpoint;            // path rank 0 writes (atomically); "" = none
  std::uint64_t checkpoint_every = 0;  // steps; 0 = at the end of every epoch only
  std::string resume;                // checkpoint to start from
  bool resume_latest = false;        // start from `checkpoint` when it exists (fastrun --max-restarts)
  std::string weights_out;           // rank 0 writes the final state here (a checkpoint file)
  // Testing hooks.
  std::string log_indices;           // directory: rank r appends "epoch step idx..." lines
  std::string kill_at;               // --kill-at STEP:RANK[:ATTEMPT],... (../common/kill_plan.h)
  bool quiet = false;
};

// Parses argv: each flag takes one value ("--epochs 3"); a bad flag or value is a
// fastrun::ConfigError naming it; --help prints the flags and exits 0.
void parse_options(int argc, char** argv, Options& out);

}  // namespace train_mlp
