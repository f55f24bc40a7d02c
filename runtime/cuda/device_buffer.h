#pragma once
// An owned block of CUDA device memory (RAII), for tests, the GPU checks, benchmarks and DDP.
// CUDA-free header; compiled only where the build has CUDA (guard with FASTRUN_HAVE_NCCL).
//
// Copies are synchronous (cudaMemcpy on the legacy default stream): an upload is complete when
// it returns, and so it is ordered before any later collective (see docs/backend-nccl.md for
// the stream contract). Download results of a collective only after its Work::wait returned.
#include <cstddef>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc on the calling thread's current device; BackendError on failure.
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();  // cudaFree; never throws
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  // Host <-> device copies of `bytes` at `offset` (BackendError when out of range).
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill_zero();

  // A BufferView of `count` elements of `dtype` on the device (BackendError when too small).
  BufferView view(std::size_t count, DType dtype) const;

 private:
  void check_range(std::size_t bytes, std::size_t offset, const char* what) const;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace fastrun
