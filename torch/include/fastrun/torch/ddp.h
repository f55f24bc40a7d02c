#pragma once
// DistributedDataParallel for LibTorch modules (docs/torch.md): fastrun's DDP engine
// (runtime/ddp/ddp.h, over raw buffers) driven by autograd, so a C++ PyTorch program writes
// what a Python one writes:
//
//   auto ctx = fastrun::join();
//   auto model = std::make_shared<Net>();
//   fastrun::torch::DistributedDataParallel ddp(ctx->world(), model);  // checks, broadcasts
//   torch::optim::SGD opt(model->parameters(), 0.1);
//   for (...) { opt.zero_grad(); auto loss = ...model->forward(x)...; loss.backward(); opt.step(); }
//
// Contracts:
// - Set-up (the constructor) is collective over `group`. Every rank must have the same
//   parameters (names, shapes, dtypes, devices, in registration order): otherwise every rank
//   throws the same ConfigError naming the first mismatching parameter and the ranks' versions.
//   Then parameters and buffers are broadcast from rank 0 (in place: the module keeps its tensors).
// - Each parameter's .grad() becomes a slice of a flat bucket tensor owned by this object
//   (PyTorch's gradient_as_bucket_view): autograd accumulates into it, and the bucket is
//   all-reduced in place. A gradient that was reset (zero_grad() setting it to none) or
//   replaced is copied back into its bucket at its next synced step.
// - During backward(), an autograd hook fires after each parameter's gradient is accumulated
//   (the grad accumulator's post hook, as PyTorch's Reducer uses); a bucket's all-reduce starts
//   as soon as all of its gradients are in, in bucket order, so communication overlaps the rest
//   of the backward pass. When the last parameter's gradient is in, the hook waits for every
//   bucket: when backward() returns, every gradient holds the average over the ranks.
// - A parameter that gets no gradient in a synced step (unused in the forward pass) keeps the
//   step open. finish() closes it: with UnusedParameters::error (the default) it throws an
//   Error naming them; with UnusedParameters::average their current local gradient (zero when
//   they have none) takes part. Without finish(), the next backward() throws that Error.
// - no_sync(): while the guard lives, gradients only accumulate locally (no communication);
//   the first synced backward() after it averages the sums.
// - CPU tensors go through the group's CPU backend (shm, gloo); CUDA tensors through nccl (a
//   path written against the API only: Debian's LibTorch is CPU-only, see docs/torch.md).
// - Threading: one training thread; this object must outlive the module's backward passes (its
//   destructor removes the hooks). Tested with LibTorch 1.13.1 (Debian); the API used is the same in 2.x.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/ddp/no_sync_guard.h"
#include "fastrun/runtime/duration.h"
#include "fastrun/runtime/process_group/group.h"

namespace fastrun::torch {

enum class UnusedParameters {
  error,    // finish() (or the next backward) names the parameters that got no gradient
  average,  // finish() lets them take part with their local gradient (zero when none)
};

struct DdpOptions {
  std::size_t first_bucket_bytes = std::size_t{1} << 20;  // small, so the first all-reduce starts early
  std::size_t bucket_bytes = std::size_t{25} << 20;
  bool broadcast_buffers = true;  // at set-up, with the parameters (BatchNorm statistics, ...)
  UnusedParameters unused_parameters = UnusedParameters::error;
  Duration timeout = Duration::zero();  // per wait; zero = the group's op timeout
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(Group& group, std::shared_ptr<::torch::nn::Module> module, DdpOptions options = {});
  template <typename M>
  DistributedDataParallel(Group& group, const ::torch::nn::ModuleHolder<M>& module, DdpOptions options = {})
      : DistributedDataParallel(group, module.ptr(), options) {}
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Closes a step that backward() left open (unused parameters; see above). A no-op when
  // backward() already finished it, or under no_sync().
  void finish();
  // True between the first gradient of a synced backward() and the end of its step.
  bool step_open() const;

  [[nodiscard]] NoSyncGuard no_sync() { return engine().no_sync(); }

  ::torch::nn::Module& module() { return *module_; }
  const std::shared_ptr<::torch::nn::Module>& module_ptr() const { return module_; }
  // The engine underneath: bucket plan, per-bucket timings of the last step.
  fastrun::DistributedDataParallel& engine();
  std::size_t num_parameters() const;

  struct State;  // ddp.cpp's, shared with the autograd hooks

 private:
  std::shared_ptr<::torch::nn::Module> module_;
  std::shared_ptr<State> state_;  // shared with the autograd hooks
};

}  // namespace fastrun::torch
