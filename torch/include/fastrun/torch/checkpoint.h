#pragma once
// Training checkpoints for LibTorch programs: a module's parameters and buffers, an optimizer's
// state, a sampler's state and the epoch/step counters, in one file written all or nothing.
//
//   fastrun::torch::save_checkpoint(ctx->world(), "ck.pt", *model, &optimizer,
//                                   {epoch, step, sampler.state_after_batches(used)});  // rank 0 writes
//   auto progress = fastrun::torch::load_checkpoint("ck.pt", *model, &optimizer);      // every rank
//   sampler.load_state(progress.sampler_state);
//
// Atomic: the file is written to an unnamed temporary in the same directory, fsynced and
// renamed over `path` (fastrun::os::AtomicFile), so a reader sees the previous checkpoint or
// the new one, never a torn one, also when the writer is killed mid-write or the disk fills up;
// an interrupted write leaves no temporary behind (where the filesystem has O_TMPFILE).
//
// Format: a torch::serialize archive (the zip torch::save writes). Keys: "fastrun_checkpoint"
// ("fastrun.torch.checkpoint/1"), "epoch", "step" (int), "sampler_state" (string), "model" (the
// module's own archive, as Module::save writes it), "optimizer" (Optimizer::save's, when one
// was given). The model archive loads with torch's own `model->load(archive)` too.
//
// Loading checks before changing anything that every parameter and buffer of the module is in
// the file with the same shape and dtype (the first mismatch is named), then loads the module
// and the optimizer. Errors are fastrun::Error naming the path and what is wrong.
// Threading: the calls are independent; one thread per module and optimizer.
#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

namespace fastrun {
class Group;
}

namespace fastrun::torch {

inline constexpr const char* kCheckpointFormat = "fastrun.torch.checkpoint/1";

struct TrainingProgress {
  std::uint64_t epoch = 0;    // the epoch the sampler state is in
  std::uint64_t step = 0;     // optimiser steps completed since training began
  std::string sampler_state;  // DistributedSampler::state_after_batches(k), or any fastrun sampler state
};

// Writes the checkpoint; `optimizer` may be null (no optimizer state saved).
void save_checkpoint(const std::string& path, const ::torch::nn::Module& model,
                     const ::torch::optim::Optimizer* optimizer, const TrainingProgress& progress);
// Rank 0 of `group` writes; the other ranks return at once (after gradient averaging every
// rank holds the same module, so one copy is the job's). Not a collective: no rank waits.
void save_checkpoint(Group& group, const std::string& path, const ::torch::nn::Module& model,
                     const ::torch::optim::Optimizer* optimizer, const TrainingProgress& progress);

// Every rank reads the file (on one node, or a filesystem all nodes share). Loads the module,
// and the optimizer when one is given (a file without optimizer state is then an error);
// returns the progress counters and the sampler state.
TrainingProgress load_checkpoint(const std::string& path, ::torch::nn::Module& model,
                                 ::torch::optim::Optimizer* optimizer);

}  // namespace fastrun::torch
