#pragma once
// The per-thread bodies of train_mlp_cuda's kernels (kernels.cu), as plain functions that
// compile both for the GPU (nvcc: __host__ __device__) and for the host (any C++ compiler, no
// CUDA headers). The kernels call them once per thread; tests/ddp runs them on the host over
// every thread index and checks them against mlp.cpp, so the GPU math is tested on machines
// without a GPU.
//
// The arithmetic mirrors mlp.cpp operation for operation: activations and per-sample sums in
// double, each gradient summed over the batch in sample order and added to the float gradient
// once. On the host the results are bit-identical to mlp.cpp's; on a GPU they differ only by
// the ULPs of exp/log (kernels.cu is compiled with --fmad=false, so no FMA contraction).
#include <cmath>
#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define TRAIN_MLP_HD __host__ __device__
#else
#define TRAIN_MLP_HD
#endif

namespace train_mlp::cuda {

// Pointers (device memory on a GPU) and sizes for one micro-batch of b samples.
struct BatchArgs {
  std::size_t b = 0, D = 0, H = 0, C = 0;
  const float* x = nullptr;            // n * D, the whole dataset
  const std::int32_t* y = nullptr;     // n labels
  const std::uint64_t* idx = nullptr;  // b sample indices
  const float *W1 = nullptr, *b1 = nullptr, *W2 = nullptr, *b2 = nullptr;
  float *gW1 = nullptr, *gb1 = nullptr, *gW2 = nullptr, *gb2 = nullptr;
  // Scratch: b * H or b * C doubles.
  double *hpre = nullptr, *h = nullptr, *logit = nullptr, *dlogit = nullptr, *dh = nullptr;
  double* loss = nullptr;              // b per-sample cross-entropies
  std::int32_t* correct = nullptr;     // b flags: argmax == label
  double scale = 1;                    // gradients are scale * d(sum of losses)/dparam
};

// Thread counts of the steps, in launch order.
TRAIN_MLP_HD inline std::size_t forward_threads(const BatchArgs& a) { return a.b; }
TRAIN_MLP_HD inline std::size_t layer2_threads(const BatchArgs& a) { return a.C * a.H + a.C; }
TRAIN_MLP_HD inline std::size_t hidden_grad_threads(const BatchArgs& a) { return a.b * a.H; }
TRAIN_MLP_HD inline std::size_t layer1_threads(const BatchArgs& a) { return a.H * a.D + a.H; }

// Thread s < b: the forward pass of sample s and d(loss)/d(logits) (hpre, h, logit, dlogit,
// loss, correct).
TRAIN_MLP_HD inline void forward_thread(const BatchArgs& a, std::size_t s) {
  const std::size_t D = a.D, H = a.H, C = a.C;
  const float* x = a.x + a.idx[s] * D;
  double* hpre = a.hpre + s * H;
  double* h = a.h + s * H;
  double* logit = a.logit + s * C;
  for (std::size_t j = 0; j < H; ++j) {
    double v = a.b1[j];
    for (std::size_t k = 0; k < D; ++k) v += static_cast<double>(a.W1[j * D + k]) * x[k];
    hpre[j] = v;
    h[j] = v > 0 ? v : 0;
  }
  double mx = -1e300;
  std::size_t best = 0;
  for (std::size_t c = 0; c < C; ++c) {
    double v = a.b2[c];
    for (std::size_t j = 0; j < H; ++j) v += static_cast<double>(a.W2[c * H + j]) * h[j];
    logit[c] = v;
    if (v > mx) mx = v, best = c;  // the first maximum, as std::max_element
  }
  double z = 0;
  for (std::size_t c = 0; c < C; ++c) z += exp(logit[c] - mx);
  const auto label = static_cast<std::size_t>(a.y[a.idx[s]]);
  a.loss[s] = -(logit[label] - mx - log(z));
  a.correct[s] = best == label ? 1 : 0;
  for (std::size_t c = 0; c < C; ++c)
    a.dlogit[s * C + c] = a.scale * (exp(logit[c] - mx) / z - (c == label ? 1.0 : 0.0));
}

// Thread t < C*H: gW2[t] += sum_s dlogit h^T; the next C threads: gb2 += sum_s dlogit.
TRAIN_MLP_HD inline void layer2_thread(const BatchArgs& a, std::size_t t) {
  const std::size_t H = a.H, C = a.C;
  if (t < C * H) {
    const std::size_t c = t / H, j = t % H;
    double g = 0;
    for (std::size_t s = 0; s < a.b; ++s) g += a.dlogit[s * C + c] * a.h[s * H + j];
    a.gW2[t] += static_cast<float>(g);
  } else {
    const std::size_t c = t - C * H;
    double g = 0;
    for (std::size_t s = 0; s < a.b; ++s) g += a.dlogit[s * C + c];
    a.gb2[c] += static_cast<float>(g);
  }
}

// Thread t = s*H + j: the gradient reaching hidden unit j's pre-activation for sample s.
TRAIN_MLP_HD inline void hidden_grad_thread(const BatchArgs& a, std::size_t t) {
  const std::size_t H = a.H, C = a.C, s = t / H, j = t % H;
  double v = 0;
  if (a.hpre[t] > 0)
    for (std::size_t c = 0; c < C; ++c) v += a.dlogit[s * C + c] * a.W2[c * H + j];
  a.dh[t] = v;
}

// Thread t < H*D: gW1[t] += sum_s dh x^T; the next H threads: gb1 += sum_s dh.
TRAIN_MLP_HD inline void layer1_thread(const BatchArgs& a, std::size_t t) {
  const std::size_t D = a.D, H = a.H;
  if (t < H * D) {
    const std::size_t j = t / D, k = t % D;
    double g = 0;
    for (std::size_t s = 0; s < a.b; ++s) g += a.dh[s * H + j] * a.x[a.idx[s] * D + k];
    a.gW1[t] += static_cast<float>(g);
  } else {
    const std::size_t j = t - H * D;
    double g = 0;
    for (std::size_t s = 0; s < a.b; ++s) g += a.dh[s * H + j];
    a.gb1[j] += static_cast<float>(g);
  }
}

TRAIN_MLP_HD inline void sgd_thread(float* p, const float* g, float lr, std::size_t i) { p[i] -= lr * g[i]; }

}  // namespace train_mlp::cuda
