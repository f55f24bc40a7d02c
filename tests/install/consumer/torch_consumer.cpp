// The LibTorch component as a user's program sees it once installed: fastrun/torch/ddp.h from
// the prefix, fastrun::torch from find_package (which finds Torch itself). A world of one: the
// set-up runs its checks and broadcasts, and one backward() goes through the adapter's hooks.
#include <cstdio>

// The headers it uses rather than <torch/torch.h>: a third less compile time in this test.
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <fastrun/fastrun.h>
#include <fastrun/torch/ddp.h>

int main() {
  auto ctx = fastrun::join();
  torch::nn::Linear net(4, 2);
  fastrun::torch::DistributedDataParallel ddp(ctx->world(), net);
  net->forward(torch::ones({3, 4})).sum().backward();
  std::printf("torch_consumer: %zu parameters, step open %d, grad sum %.1f\n", ddp.num_parameters(),
              static_cast<int>(ddp.step_open()), net->bias.grad().sum().item<float>());
  return 0;
}
