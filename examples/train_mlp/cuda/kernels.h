#pragma once
// train_mlp_cuda's forward, backward and SGD as CUDA kernels (kernels.cu), behind plain launch
// functions so that host code compiled by the C++ compiler never sees CUDA syntax. One thread
// per output value, no shared-memory tiling: clarity over speed. The per-thread math is in
// kernel_math.h (tested on the host by tests/ddp).
//
// Every launch goes to the legacy default stream, the stream the nccl backend orders its
// collectives after (docs/backend-nccl.md), and returns cudaGetLastError() (launch errors;
// execution errors surface at the next synchronising call, e.g. a download).
#include <cstddef>

#include <cuda_runtime_api.h>

#include "kernel_math.h"

namespace train_mlp::cuda {

// Forward and d(loss)/d(logits): hpre, h, logit, dlogit, loss, correct.
cudaError_t launch_forward(const BatchArgs& a);
// gW2 += sum_s dlogit h^T, gb2 += sum_s dlogit (final for the step after this).
cudaError_t launch_layer2_grads(const BatchArgs& a);
// dh = (W2^T dlogit) masked by relu, then gW1 += sum_s dh x^T, gb1 += sum_s dh.
cudaError_t launch_layer1_grads(const BatchArgs& a);
// p[i] -= lr * g[i] for n values.
cudaError_t launch_sgd(float* p, const float* g, std::size_t n, float lr);

}  // namespace train_mlp::cuda
