#pragma once
// A two-layer perceptron, by hand: logits = W2 relu(W1 x + b1) + b2, softmax cross-entropy.
// Parameters are plain float vectors (registration order W1, b1, W2, b2), each with a gradient
// vector of the same size: exactly what fastrun's DDP wraps.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataset.h"

namespace train_mlp {

struct Mlp {
  std::size_t dim = 0, hidden = 0, classes = 0;
  std::vector<std::vector<float>> param, grad;  // [W1, b1, W2, b2]
  static constexpr const char* kNames[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

  Mlp(std::size_t dim, std::size_t hidden, std::size_t classes, std::uint64_t seed);
  std::size_t num_values() const;
  void zero_grad();
  void sgd_step(float lr);
  // W1, b1, W2, b2 concatenated (the checkpoint's values), and back (std::invalid_argument when
  // the count is not num_values()).
  std::vector<float> values() const;
  void load_values(const std::vector<float>& v);
};

struct BatchResult {
  double loss_sum = 0;       // sum over the batch of per-sample cross-entropy
  std::uint64_t correct = 0;  // argmax == label
};

// Forward and backward over the samples `idx` of `data`, adding scale * d(sum of losses)/dparam
// into model.grad (so scale = 1 / (samples in the step) gives the mean). Backward runs layer by
// layer over the whole batch and calls ready(k) as soon as gradient k is final, so DDP can start
// reducing fc2 while fc1 is still being computed.
BatchResult forward_backward(Mlp& model, const Dataset& data, const std::vector<std::uint64_t>& idx, double scale,
                             const std::function<void(std::size_t)>& ready);

}  // namespace train_mlp
