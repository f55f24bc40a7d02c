#pragma once
// torch_train's model and data: a 2-layer MLP and a synthetic classification set generated from
// the seed (nothing is downloaded). Every rank builds the same data and the same initial weights
// from the same seed. Header-only so that the tests (tests/torch/data_resume_test.cpp) load the
// example's checkpoints into the same module.
#include <cstdint>

#include <torch/torch.h>

namespace torch_train {

struct NetImpl : torch::nn::Module {
  NetImpl(std::int64_t dim, std::int64_t hidden, std::int64_t classes)
      : fc1(register_module("fc1", torch::nn::Linear(dim, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, classes))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// The model's initial weights, the same on every rank (a seed of its own, apart from the data's).
inline Net make_net(std::int64_t dim, std::int64_t hidden, std::int64_t classes, std::uint64_t seed) {
  torch::manual_seed(seed + 1);
  return Net(dim, hidden, classes);
}

// n points in `dim` dimensions, labelled by the arg-max of a random linear "teacher" plus noise.
class SyntheticData : public torch::data::datasets::Dataset<SyntheticData> {
 public:
  SyntheticData(std::int64_t n, std::int64_t dim, std::int64_t classes, std::uint64_t seed) {
    torch::manual_seed(seed);
    x_ = torch::randn({n, dim});
    const auto teacher = torch::randn({dim, classes});
    y_ = (x_.matmul(teacher) + 0.3 * torch::randn({n, classes})).argmax(1);
  }
  torch::data::Example<> get(std::size_t i) override {
    const auto k = static_cast<std::int64_t>(i);
    return {x_[k], y_[k]};
  }
  c10::optional<std::size_t> size() const override { return static_cast<std::size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

}  // namespace torch_train
