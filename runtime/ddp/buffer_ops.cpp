#include "fastrun/runtime/ddp/buffer_ops.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/half_float.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::ddp {
namespace {

DeviceOps& device_ops() {
  static DeviceOps ops;  // function-local: safe against static-initialisation order
  return ops;
}

void require_device_ops(const char* what) {
  if (!have_device_ops())
    throw ConfigError(fmt::format("DDP: {} needs device memory support, but this fastrun was built "
                                  "without CUDA (configure with FASTRUN_WITH_CUDA=ON and a CUDA toolkit)",
                                  what));
}

}  // namespace

// The public names forward to the runtime's one converter (process_group/half_float.h).
float half_to_float(std::uint16_t h) { return half::half_to_float(h); }
std::uint16_t float_to_half(float f) { return half::float_to_half(f); }
float bf16_to_float(std::uint16_t b) { return half::bf16_to_float(b); }
std::uint16_t float_to_bf16(float f) { return half::float_to_bf16(f); }

void copy_scaled(void* dst, const void* src, std::size_t count, DType dtype, DeviceKind device,
                 double scale) {
  if (count == 0) return;
  if (device == DeviceKind::cuda) {
    require_device_ops("copying a CUDA gradient");
    if (scale != 1.0) throw Error("DDP: internal: scaled copy of device memory (use ReduceOp::avg)");
    device_ops().copy(dst, src, count * dtype_size(dtype));
    return;
  }
  if (scale == 1.0) {
    copy_bytes(dst, src, count * dtype_size(dtype));
    return;
  }
  if (dtype != DType::int32 && dtype != DType::int64) return kernels::scale(dtype, dst, src, count, scale);
  throw ConfigError(fmt::format("DDP: gradients of dtype {} cannot be averaged; accepted: float32, "
                                "float64, float16, bfloat16",
                                dtype_name(dtype)));
}

void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_ops("copying host data to a CUDA device");
  device_ops().to_device(device_dst, host_src, bytes);
}

void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  require_device_ops("copying CUDA device data to the host");
  device_ops().to_host(host_dst, device_src, bytes);
}

FlatBuffer::FlatBuffer(std::size_t bytes, DeviceKind device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device == DeviceKind::cuda) {
    require_device_ops("a CUDA bucket");
    data_ = device_ops().alloc(bytes);
    return;
  }
  data_ = std::calloc(1, bytes);
  if (!data_) throw Error(fmt::format("DDP: cannot allocate a host bucket of {} bytes", bytes));
}

FlatBuffer::FlatBuffer(FlatBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_), device_(o.device_) {
  o.data_ = nullptr;
  o.bytes_ = 0;
}

FlatBuffer& FlatBuffer::operator=(FlatBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

FlatBuffer::~FlatBuffer() { release(); }

void FlatBuffer::release() noexcept {
  if (!data_) return;
  if (device_ == DeviceKind::cuda) {
    if (device_ops().free) device_ops().free(data_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

void install_device_ops(const DeviceOps& ops) { device_ops() = ops; }
bool have_device_ops() {
  const DeviceOps& ops = device_ops();
  return ops.alloc && ops.free && ops.copy && ops.to_device && ops.to_host;
}

}  // namespace fastrun::ddp
