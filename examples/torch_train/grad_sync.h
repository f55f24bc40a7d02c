#pragma once
// INTERIM (issue 17): hand-written data parallelism for torch_train until the DDP adapter
// (fastrun::torch::DistributedDataParallel, torch/include/fastrun/torch/ddp*.h) lands. Each
// helper is called on one line of main.cpp; at merge, replace the two calls by the adapter
// (which broadcasts at construction and averages in buckets during backward, overlapping it).
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "fastrun/runtime/process_group/group.h"

namespace torch_train {

// All of the module's parameters (or their gradients) as one contiguous float32 tensor.
inline torch::Tensor flatten(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.reshape(-1));
  return torch::cat(flat).contiguous();
}

inline void unflatten_into(const torch::Tensor& flat, const std::vector<torch::Tensor>& ts) {
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (const auto& t : ts) {
    t.copy_(flat.slice(0, offset, offset + t.numel()).view_as(t));
    offset += t.numel();
  }
}

// INTERIM: rank 0's parameters to every rank (the adapter does this at construction).
inline void broadcast_parameters(fastrun::Group& world, torch::nn::Module& model) {
  const auto params = model.parameters();
  auto flat = flatten(params);
  world.broadcast(fastrun::view_of(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel())))->wait();
  unflatten_into(flat, params);
}

// INTERIM: after backward(), every gradient averaged over the ranks in one flattened all_reduce.
inline void average_gradients(fastrun::Group& world, torch::nn::Module& model) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : model.parameters()) grads.push_back(p.grad());
  auto flat = flatten(grads);
  world.all_reduce(fastrun::view_of(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel())),
                   {.op = fastrun::ReduceOp::avg})
      ->wait();
  unflatten_into(flat, grads);
}

}  // namespace torch_train
