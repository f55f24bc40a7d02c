// Device-memory hooks for DDP (runtime/ddp/buffer_ops.h): bucket allocation, device-to-device
// gradient copies, and the host copies of the set-up's layout check. Installed by the component
// (runtime/backend/nccl/component.cpp) without touching CUDA (function pointers only), so
// CUDA_VISIBLE_DEVICES is still read at the rank's first real CUDA call.
// Copies are synchronous cudaMemcpy on the legacy default stream (the contract of
// docs/backend-nccl.md): a bucket is filled before its all-reduce is enqueued, and read back
// only after that all-reduce's Work::wait returned.
#include "fastrun/runtime/cuda/ddp_device_ops.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/ddp/buffer_ops.h"

namespace fastrun::ddp {
namespace {

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), fmt::format("DDP: cudaMalloc of a {}-byte bucket", bytes));
  if (cudaError_t s = cudaMemset(p, 0, bytes); s != cudaSuccess) {
    cudaFree(p);
    throw_cuda_error(s, "DDP: cudaMemset of a bucket");
  }
  return p;
}

void device_free(void* p) noexcept { cudaFree(p); }

void device_copy(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "DDP: device-to-device gradient copy");
}

// Host to device: cudaMemcpy from pageable memory may return before the device write is done,
// but the write is queued on the legacy stream, which the nccl group's stream waits for.
void device_upload(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "DDP: host-to-device copy");
}

// Device to host: returns once the bytes are on the host.
void device_download(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "DDP: device-to-host copy");
}

}  // namespace

void install_cuda_device_ops() {
  install_device_ops(DeviceOps{&device_alloc, &device_free, &device_copy, &device_upload, &device_download});
}

}  // namespace fastrun::ddp
