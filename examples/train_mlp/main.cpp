// train_mlp: the end-to-end example. A 2-layer MLP on a synthetic seeded dataset, trained with
// SGD by hand; fastrun starts the ranks, a distributed sampler shards the data, DDP averages
// the gradients, object collectives gather the metrics, rank 0 prints one line per epoch and
// writes checkpoints atomically; --resume continues exactly, also on another number of ranks.
//
//   fastrun --nproc 4 --log-dir logs ./train_mlp       # under the CLI launcher
//   ./train_mlp --nproc 4 --log-dir logs               # self-spawning
// See docs/train_mlp.md.
#include <memory>
#include <utility>

#include "trainer.h"

namespace train_mlp {
namespace {

// Mlp's host vectors and its CPU forward/backward, behind the trainer's Model interface.
class HostModel final : public Model {
 public:
  HostModel(const Dataset& data, Mlp init) : data_(data), m_(std::move(init)) {}

  std::vector<fastrun::DdpParameter> ddp_parameters() override {
    std::vector<fastrun::DdpParameter> params;
    for (std::size_t k = 0; k < m_.param.size(); ++k)
      params.push_back({Mlp::kNames[k], fastrun::view_of(m_.param[k].data(), m_.param[k].size()),
                        fastrun::view_of(m_.grad[k].data(), m_.grad[k].size())});
    return params;
  }
  void zero_grad() override { m_.zero_grad(); }
  BatchResult forward_backward(const std::vector<std::uint64_t>& idx, double scale,
                               const std::function<void(std::size_t)>& ready) override {
    return train_mlp::forward_backward(m_, data_, idx, scale, ready);
  }
  void sgd_step(float lr) override { m_.sgd_step(lr); }
  std::vector<float> values() const override { return m_.values(); }
  void load_values(const std::vector<float>& v) override { m_.load_values(v); }

 private:
  const Dataset& data_;  // owned by the trainer, outlives the model
  Mlp m_;
};

}  // namespace
}  // namespace train_mlp

int main(int argc, char** argv) {
  train_mlp::TrainerSpec spec;
  spec.program = "train_mlp";
  spec.make_model = [](const train_mlp::Dataset& data, train_mlp::Mlp init) -> std::unique_ptr<train_mlp::Model> {
    return std::make_unique<train_mlp::HostModel>(data, std::move(init));
  };
  return train_mlp::trainer_main(argc, argv, spec);
}
