// train_mlp_cuda: train_mlp with its parameters, gradients and data in CUDA memory and its
// forward, backward and SGD in CUDA kernels (kernels.cu); DDP averages the device gradients on
// the nccl backend (FASTRUN_BACKEND=auto picks it when the rank has a GPU). Flags, data,
// sampler, metrics (object collectives, on the group's CPU companion) and checkpoints are the
// CPU trainer's (trainer.h), so checkpoints are interchangeable between the two.
//
//   fastrun --devices 0 ./train_mlp_cuda          # world of one
//   fastrun --devices 0,1 ./train_mlp_cuda        # one rank per GPU
// Without a visible GPU it refuses with one line and exit status 2. See docs/train_mlp.md.
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/cuda/device_buffer.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/error.h"
#include "kernels.h"
#include "trainer.h"

namespace train_mlp {
namespace {

using fastrun::DeviceBuffer;

template <typename T>
DeviceBuffer upload_vector(const std::vector<T>& v) {
  DeviceBuffer d(v.size() * sizeof(T));
  d.upload(v.data(), v.size() * sizeof(T));
  return d;
}

// The MLP on one GPU (the calling thread's current device). Contract of trainer.h's Model.
class DeviceModel final : public Model {
 public:
  DeviceModel(const Dataset& data, const Mlp& init)
      : D_(init.dim), H_(init.hidden), C_(init.classes), x_(upload_vector(data.x)), y_(upload_vector(data.y)) {
    for (std::size_t k = 0; k < init.param.size(); ++k) {
      sizes_[k] = init.param[k].size();
      param_[k] = upload_vector(init.param[k]);
      grad_[k] = DeviceBuffer(sizes_[k] * sizeof(float));
      grad_[k].fill_zero();
    }
  }

  std::vector<fastrun::DdpParameter> ddp_parameters() override {
    std::vector<fastrun::DdpParameter> params;
    for (std::size_t k = 0; k < 4; ++k)
      params.push_back({Mlp::kNames[k], param_[k].view(sizes_[k], fastrun::DType::float32),
                        grad_[k].view(sizes_[k], fastrun::DType::float32)});
    return params;
  }

  void zero_grad() override {
    for (auto& g : grad_) g.fill_zero();
  }

  BatchResult forward_backward(const std::vector<std::uint64_t>& idx, double scale,
                               const std::function<void(std::size_t)>& ready) override {
    const std::size_t b = idx.size();
    reserve_scratch(b);
    idx_.upload(idx.data(), b * sizeof(std::uint64_t));
    cuda::BatchArgs a = args(b, scale);
    fastrun::check_cuda(cuda::launch_forward(a), "train_mlp_cuda: forward kernel");
    fastrun::check_cuda(cuda::launch_layer2_grads(a), "train_mlp_cuda: fc2 gradient kernel");
    ready(3);  // fc2's gradients are final: DDP may start on them while fc1's are computed
    ready(2);
    fastrun::check_cuda(cuda::launch_layer1_grads(a), "train_mlp_cuda: fc1 gradient kernels");
    ready(1);
    ready(0);
    std::vector<double> loss(b);
    std::vector<std::int32_t> correct(b);
    loss_.download(loss.data(), b * sizeof(double));  // synchronous: also surfaces kernel faults
    correct_.download(correct.data(), b * sizeof(std::int32_t));
    BatchResult out;
    for (std::size_t s = 0; s < b; ++s) out.loss_sum += loss[s], out.correct += correct[s] != 0;
    return out;
  }

  void sgd_step(float lr) override {
    for (std::size_t k = 0; k < 4; ++k)
      fastrun::check_cuda(cuda::launch_sgd(static_cast<float*>(param_[k].data()),
                                           static_cast<const float*>(grad_[k].data()), sizes_[k], lr),
                          "train_mlp_cuda: SGD kernel");
  }

  std::vector<float> values() const override {
    std::vector<float> v;
    for (std::size_t k = 0; k < 4; ++k) {
      std::vector<float> p(sizes_[k]);
      param_[k].download(p.data(), p.size() * sizeof(float));
      v.insert(v.end(), p.begin(), p.end());
    }
    return v;
  }

  void load_values(const std::vector<float>& v) override {
    std::size_t off = 0;
    for (std::size_t k = 0; k < 4; ++k) off += sizes_[k];
    if (v.size() != off)
      throw fastrun::ConfigError(fmt::format("train_mlp_cuda: {} values for a model of {}", v.size(), off));
    off = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      param_[k].upload(v.data() + off, sizes_[k] * sizeof(float));
      off += sizes_[k];
    }
  }

 private:
  // Scratch for micro-batches of up to b samples (grown, never shrunk).
  void reserve_scratch(std::size_t b) {
    if (b <= capacity_) return;
    idx_ = DeviceBuffer(b * sizeof(std::uint64_t));
    hpre_ = DeviceBuffer(b * H_ * sizeof(double));
    h_ = DeviceBuffer(b * H_ * sizeof(double));
    dh_ = DeviceBuffer(b * H_ * sizeof(double));
    logit_ = DeviceBuffer(b * C_ * sizeof(double));
    dlogit_ = DeviceBuffer(b * C_ * sizeof(double));
    loss_ = DeviceBuffer(b * sizeof(double));
    correct_ = DeviceBuffer(b * sizeof(std::int32_t));
    capacity_ = b;
  }

  cuda::BatchArgs args(std::size_t b, double scale) {
    auto f = [](const DeviceBuffer& d) { return static_cast<float*>(d.data()); };
    auto dbl = [](const DeviceBuffer& d) { return static_cast<double*>(d.data()); };
    cuda::BatchArgs a;
    a.b = b, a.D = D_, a.H = H_, a.C = C_;
    a.x = f(x_);
    a.y = static_cast<const std::int32_t*>(y_.data());
    a.idx = static_cast<const std::uint64_t*>(idx_.data());
    a.W1 = f(param_[0]), a.b1 = f(param_[1]), a.W2 = f(param_[2]), a.b2 = f(param_[3]);
    a.gW1 = f(grad_[0]), a.gb1 = f(grad_[1]), a.gW2 = f(grad_[2]), a.gb2 = f(grad_[3]);
    a.hpre = dbl(hpre_), a.h = dbl(h_), a.logit = dbl(logit_), a.dlogit = dbl(dlogit_), a.dh = dbl(dh_);
    a.loss = dbl(loss_);
    a.correct = static_cast<std::int32_t*>(correct_.data());
    a.scale = scale;
    return a;
  }

  std::size_t D_, H_, C_;
  DeviceBuffer x_, y_;  // the dataset, uploaded once
  std::size_t sizes_[4] = {};
  DeviceBuffer param_[4], grad_[4];
  std::size_t capacity_ = 0;
  DeviceBuffer idx_, hpre_, h_, dh_, logit_, dlogit_, loss_, correct_;
};

// Refuses a rank without a GPU before it joins (it would otherwise join as a CPU rank and fail
// later, on DDP over device memory, with a less clear message).
void require_gpu(const Options&) {
  const fastrun::CudaDeviceProbe probe = fastrun::cuda_device_probe();
  if (probe.count > 0) return;
  throw fastrun::ConfigError(fmt::format("no CUDA device visible ({}); use train_mlp for CPU ranks, or run this one "
                                         "on a GPU machine as `fastrun --devices 0 train_mlp_cuda`",
                                         probe.error));
}

}  // namespace
}  // namespace train_mlp

int main(int argc, char** argv) {
  train_mlp::TrainerSpec spec;
  spec.program = "train_mlp_cuda";
  spec.self_spawn = false;
  spec.before_join = train_mlp::require_gpu;
  spec.make_model = [](const train_mlp::Dataset& data, train_mlp::Mlp init) -> std::unique_ptr<train_mlp::Model> {
    return std::make_unique<train_mlp::DeviceModel>(data, init);
  };
  return train_mlp::trainer_main(argc, argv, spec);
}
