#pragma once
// Element-wise helpers DDP needs on gradient buffers: copy a gradient into a flat bucket (with
// an optional scale, for the pre-division by world size), copy a bucket slice back, and own a
// flat buffer in host or device memory. Host memory is handled here for float32, float64,
// float16 and bfloat16 (the 16-bit types are scaled through float). Device memory goes through
// hooks that runtime/cuda/ddp_device_ops.cpp installs when fastrun is built with CUDA; without
// them a device buffer is a ConfigError that says so.
//
// Threading: stateless functions; the device hooks are installed once at static-init time.
#include <cstddef>
#include <memory>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::ddp {

// dst[i] = src[i] * scale for `count` elements of `dtype` (scale == 1: a plain copy).
// Both views in host memory or both in device memory (device: scale must be 1).
void copy_scaled(void* dst, const void* src, std::size_t count, DType dtype, DeviceKind device,
                 double scale);

// An owned, zero-initialised flat buffer of `bytes` in host or device memory.
class FlatBuffer {
 public:
  FlatBuffer() = default;
  FlatBuffer(std::size_t bytes, DeviceKind device);
  FlatBuffer(FlatBuffer&&) noexcept;
  FlatBuffer& operator=(FlatBuffer&&) noexcept;
  FlatBuffer(const FlatBuffer&) = delete;
  FlatBuffer& operator=(const FlatBuffer&) = delete;
  ~FlatBuffer();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  DeviceKind device_ = DeviceKind::cpu;
};

// Host bytes into device memory and back, through the hooks below: what a check that runs a
// collective on small host data needs on a device-only backend (layout_check.cpp's all-gather).
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);

// Device-memory hooks (installed by the CUDA layer). All synchronous with respect to the host:
// when copy() returns, the bytes are in place (so a collective enqueued afterwards sees them).
struct DeviceOps {
  void* (*alloc)(std::size_t bytes) = nullptr;        // zeroed; throws on failure
  void (*free)(void* ptr) noexcept = nullptr;
  void (*copy)(void* dst, const void* src, std::size_t bytes) = nullptr;  // device to device
  void (*to_device)(void* dst, const void* src, std::size_t bytes) = nullptr;  // host to device
  void (*to_host)(void* dst, const void* src, std::size_t bytes) = nullptr;    // device to host
};
void install_device_ops(const DeviceOps& ops);
bool have_device_ops();

// float <-> IEEE half / bfloat16 bit patterns (round to nearest even), for host buffers.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

}  // namespace fastrun::ddp
