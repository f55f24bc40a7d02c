#pragma once
// The training loop shared by train_mlp (parameters in host memory, math on the CPU) and
// train_mlp_cuda (parameters in CUDA memory, math in CUDA kernels). Everything but the model's
// storage and arithmetic is here, once: flags, data, sampler, DDP set-up, the step loop with
// no_sync micro-batches, metrics through object collectives, checkpoints and resume.
//
// Contract for a Model: parameters in registration order W1, b1, W2, b2 (Mlp::kNames), float32,
// each with a gradient buffer of the same size on the same device; forward_backward adds
// scale * d(sum of losses)/dparam into the gradients and calls ready(k) as soon as gradient k is
// final (for DDP's overlap); all calls come from the thread that issues the collectives.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dataset.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "mlp.h"
#include "options.h"

namespace train_mlp {

class Model {
 public:
  virtual ~Model() = default;
  // Views of the parameter and gradient buffers (they live as long as the model).
  virtual std::vector<fastrun::DdpParameter> ddp_parameters() = 0;
  virtual void zero_grad() = 0;
  virtual BatchResult forward_backward(const std::vector<std::uint64_t>& idx, double scale,
                                       const std::function<void(std::size_t)>& ready) = 0;
  virtual void sgd_step(float lr) = 0;
  // W1, b1, W2, b2 concatenated (the checkpoint's values), and loading them back.
  virtual std::vector<float> values() const = 0;
  virtual void load_values(const std::vector<float>& values) = 0;
};

struct TrainerSpec {
  const char* program = "train_mlp";  // prefix of every line printed
  // Builds the model over `data` with the initial values of `init` (Mlp's seeded init).
  std::function<std::unique_ptr<Model>(const Dataset& data, Mlp init)> make_model;
  // Runs in every rank before it joins the job; throws fastrun::ConfigError to refuse to run
  // (printed as one line, exit status 2). May be empty.
  std::function<void(const Options&)> before_join;
  bool self_spawn = true;  // false: --nproc is refused (the ranks need the CLI's --devices)
};

// The whole program: parse flags, self-spawn on --nproc, train. Returns the exit status
// (0 done, 2 bad flags or configuration, 1 any other error).
int trainer_main(int argc, char** argv, const TrainerSpec& spec);

}  // namespace train_mlp
