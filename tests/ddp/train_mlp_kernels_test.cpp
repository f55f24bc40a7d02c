// train_mlp_cuda's kernel math (examples/train_mlp/cuda/kernel_math.h) run on the host, one
// call per GPU thread index, against the CPU trainer's forward_backward and sgd_step: the same
// gradients, loss and accuracy bit for bit, step after step. This is what tests the CUDA
// trainer's arithmetic on machines without a GPU; tools/gpu_checks.sh runs the real kernels.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "cuda/kernel_math.h"
#include "dataset.h"
#include "mlp.h"

using namespace train_mlp;

namespace {

template <typename F>
void for_each_thread(std::size_t n, F f) {
  for (std::size_t t = 0; t < n; ++t) f(t);
}

// One emulated step of the kernels over model `m` (its grads accumulate, as on the GPU).
BatchResult kernel_step(Mlp& m, const Dataset& data, const std::vector<std::uint64_t>& idx, double scale) {
  const std::size_t b = idx.size(), H = m.hidden, C = m.classes;
  std::vector<double> hpre(b * H), h(b * H), dh(b * H), logit(b * C), dlogit(b * C), loss(b);
  std::vector<std::int32_t> correct(b);
  cuda::BatchArgs a;
  a.b = b, a.D = m.dim, a.H = H, a.C = C;
  a.x = data.x.data(), a.y = data.y.data(), a.idx = idx.data();
  a.W1 = m.param[0].data(), a.b1 = m.param[1].data(), a.W2 = m.param[2].data(), a.b2 = m.param[3].data();
  a.gW1 = m.grad[0].data(), a.gb1 = m.grad[1].data(), a.gW2 = m.grad[2].data(), a.gb2 = m.grad[3].data();
  a.hpre = hpre.data(), a.h = h.data(), a.logit = logit.data(), a.dlogit = dlogit.data(), a.dh = dh.data();
  a.loss = loss.data(), a.correct = correct.data(), a.scale = scale;
  for_each_thread(cuda::forward_threads(a), [&](std::size_t t) { cuda::forward_thread(a, t); });
  for_each_thread(cuda::layer2_threads(a), [&](std::size_t t) { cuda::layer2_thread(a, t); });
  for_each_thread(cuda::hidden_grad_threads(a), [&](std::size_t t) { cuda::hidden_grad_thread(a, t); });
  for_each_thread(cuda::layer1_threads(a), [&](std::size_t t) { cuda::layer1_thread(a, t); });
  BatchResult r;
  for (std::size_t s = 0; s < b; ++s) r.loss_sum += loss[s], r.correct += correct[s] != 0;
  return r;
}

}  // namespace

TEST_CASE("train_mlp_cuda's kernel math equals the CPU trainer's, bit for bit, over many steps",
          "[ddp][train][kernels]") {
  struct Shape {
    std::size_t n, dim, hidden, classes, batch, accum;
  };
  for (const Shape sh : {Shape{512, 12, 20, 5, 32, 1}, Shape{300, 7, 9, 2, 13, 3}}) {
    INFO("dim " << sh.dim << " hidden " << sh.hidden << " classes " << sh.classes << " batch " << sh.batch);
    const Dataset data = make_dataset(sh.n, sh.dim, sh.classes, 99);
    Mlp cpu(sh.dim, sh.hidden, sh.classes, 99), gpu(sh.dim, sh.hidden, sh.classes, 99);
    std::uint64_t rng = 5;
    for (int step = 0; step < 60; ++step) {
      cpu.zero_grad();
      gpu.zero_grad();
      const double scale = 1.0 / static_cast<double>(sh.batch * sh.accum);
      for (std::size_t m = 0; m < sh.accum; ++m) {  // micro-batches accumulate, as under no_sync
        std::vector<std::uint64_t> idx(sh.batch);
        for (auto& i : idx) i = splitmix64(rng) % sh.n;
        std::vector<std::size_t> ready_order;
        const BatchResult want = forward_backward(cpu, data, idx, scale, [&](std::size_t k) { ready_order.push_back(k); });
        const BatchResult got = kernel_step(gpu, data, idx, scale);
        REQUIRE(ready_order == std::vector<std::size_t>{3, 2, 1, 0});
        REQUIRE(got.loss_sum == want.loss_sum);
        REQUIRE(got.correct == want.correct);
      }
      for (std::size_t k = 0; k < 4; ++k) REQUIRE(gpu.grad[k] == cpu.grad[k]);
      cpu.sgd_step(0.2f);
      for (std::size_t k = 0; k < 4; ++k)
        for_each_thread(gpu.param[k].size(),
                        [&](std::size_t i) { cuda::sgd_thread(gpu.param[k].data(), gpu.grad[k].data(), 0.2f, i); });
      for (std::size_t k = 0; k < 4; ++k) REQUIRE(gpu.param[k] == cpu.param[k]);
    }
  }
}
