// CUDA kernels of train_mlp_cuda: one thread per index, each calling its kernel_math.h body
// (kernels.h states the stream and error contract).
#include "kernels.h"

namespace train_mlp::cuda {
namespace {

constexpr unsigned kBlock = 128;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

__device__ std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }

__global__ void forward_kernel(BatchArgs a) {
  if (const std::size_t t = thread_index(); t < forward_threads(a)) forward_thread(a, t);
}
__global__ void layer2_kernel(BatchArgs a) {
  if (const std::size_t t = thread_index(); t < layer2_threads(a)) layer2_thread(a, t);
}
__global__ void hidden_grad_kernel(BatchArgs a) {
  if (const std::size_t t = thread_index(); t < hidden_grad_threads(a)) hidden_grad_thread(a, t);
}
__global__ void layer1_kernel(BatchArgs a) {
  if (const std::size_t t = thread_index(); t < layer1_threads(a)) layer1_thread(a, t);
}
__global__ void sgd_kernel(float* p, const float* g, std::size_t n, float lr) {
  if (const std::size_t i = thread_index(); i < n) sgd_thread(p, g, lr, i);
}

// Launches `kernel` over n threads (nothing for n == 0: an empty grid is a launch error).
template <typename... Args>
cudaError_t launch(void (*kernel)(Args...), std::size_t n, Args... args) {
  if (n == 0) return cudaSuccess;
  kernel<<<blocks_for(n), kBlock>>>(args...);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_forward(const BatchArgs& a) { return launch(forward_kernel, forward_threads(a), a); }

cudaError_t launch_layer2_grads(const BatchArgs& a) { return launch(layer2_kernel, layer2_threads(a), a); }

cudaError_t launch_layer1_grads(const BatchArgs& a) {
  if (cudaError_t e = launch(hidden_grad_kernel, hidden_grad_threads(a), a); e != cudaSuccess) return e;
  return launch(layer1_kernel, layer1_threads(a), a);
}

cudaError_t launch_sgd(float* p, const float* g, std::size_t n, float lr) { return launch(sgd_kernel, n, p, g, n, lr); }

}  // namespace train_mlp::cuda
