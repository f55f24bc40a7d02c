#include "fastrun/runtime/cuda/device_buffer.h"

#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/error.h"

namespace fastrun {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMalloc(&data_, bytes), fmt::format("cudaMalloc({} bytes)", bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) (void)cudaFree(data_);  // an error here (context already torn down) has no remedy
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) (void)cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::check_range(std::size_t bytes, std::size_t offset, const char* what) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw BackendError(fmt::format("DeviceBuffer::{}: {} bytes at offset {} do not fit in a buffer of {} bytes",
                                   what, bytes, offset, bytes_));
  }
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  check_range(bytes, offset, "upload");
  if (bytes == 0) return;
  check_cuda(cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice),
             fmt::format("DeviceBuffer::upload: cudaMemcpy({} bytes)", bytes));
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  check_range(bytes, offset, "download");
  if (bytes == 0) return;
  check_cuda(cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost),
             fmt::format("DeviceBuffer::download: cudaMemcpy({} bytes)", bytes));
}

void DeviceBuffer::fill_zero() {
  if (bytes_ == 0) return;
  check_cuda(cudaMemset(data_, 0, bytes_), "DeviceBuffer::fill_zero: cudaMemset");
}

BufferView DeviceBuffer::view(std::size_t count, DType dtype) const {
  check_range(count * dtype_size(dtype), 0, "view");
  return BufferView{data_, count, dtype, DeviceKind::cuda};
}

}  // namespace fastrun
