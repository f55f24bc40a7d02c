#pragma once
// The trainer's checkpoint: a short text header, then the raw float32 parameter values.
//
//   fastrun-train-mlp-checkpoint 1
//   epoch 1
//   global_step 300
//   seed 1234
//   layout 32 64 4
//   sampler {"format":"fastrun.sampler/1","kind":"RandomSampler",...}
//   floats 2372
//   <2372 little-endian float32 values>
//   end
//
// Written atomically by rank 0 (fastrun::os::AtomicFile: an unnamed temporary in the same
// directory, fsync, rename over the target, fsync of the directory). A reader therefore sees the
// old checkpoint or the new one, never a torn one, even if the job is SIGKILLed mid-write.
#include <cstdint>
#include <string>
#include <vector>

namespace train_mlp {

struct Checkpoint {
  std::uint64_t epoch = 0;        // the sampler's epoch (also in the sampler state)
  std::uint64_t global_step = 0;  // optimiser steps completed since the start of training
  std::uint64_t seed = 0;         // dataset, initialisation and sampler seed
  std::uint64_t dim = 0, hidden = 0, classes = 0;
  std::string sampler_state;      // one line (fastrun::samplers state)
  std::vector<float> values;      // W1, b1, W2, b2 concatenated
};

void write_checkpoint_atomic(const std::string& path, const Checkpoint& c);
// Throws std::runtime_error naming the path and what is wrong.
Checkpoint read_checkpoint(const std::string& path);

}  // namespace train_mlp
