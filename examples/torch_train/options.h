#pragma once
// torch_train's flags (docs/torch-data.md has the table; options.cpp declares each with its help
// and its range). Plain C++: no LibTorch here, so this file compiles in a second.
#include <cstdint>
#include <string>

namespace torch_train {

struct Options {
  int nproc = 0;  // self-spawn N CPU ranks (ignored in a rank the fastrun CLI started)
  std::string log_dir;
  std::uint64_t samples = 4096, dim = 16, hidden = 32, classes = 4;
  std::uint64_t epochs = 2;
  std::uint64_t global_batch = 64;  // samples per optimiser step over all ranks; G / R per rank
  double lr = 0.05, momentum = 0.9;
  std::uint64_t seed = 1234;
  std::uint64_t workers = 0;  // torch data-loader worker threads per rank
  std::string checkpoint;     // rank 0 writes it at the end of every epoch ...
  std::uint64_t checkpoint_every = 0;  // ... and after every K-th step
  std::string resume;
  bool resume_latest = false;  // start from `checkpoint` when it exists (fastrun --max-restarts)
  std::string weights_out;
  std::string compare_with;  // at the end, rank 0 compares the weights with this checkpoint's
  double tolerance = 1e-5;   // ... max |a - b| <= tolerance * max |b|, else exit status 3
  std::string kill_at;       // test hook: --kill-at STEP:RANK[:ATTEMPT],... (../common/kill_plan.h)
  bool quiet = false;
};

// Throws fastrun::ConfigError naming the bad flag or value; --help prints the flags and exits 0.
void parse_options(int argc, char** argv, Options& o);

}  // namespace torch_train
