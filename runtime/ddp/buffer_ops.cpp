#include "fastrun/runtime/ddp/buffer_ops.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

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

template <typename T>
void scale_plain(void* dst, const void* src, std::size_t count, double scale) {
  auto* d = static_cast<T*>(dst);
  auto* s = static_cast<const T*>(src);
  // Division rather than multiplication by 1/scale would differ in the last bit; DDP passes
  // scale = 1/world, and for the power-of-two worlds of the equivalence tests both are exact.
  const T f = static_cast<T>(scale);
  for (std::size_t i = 0; i < count; ++i) d[i] = s[i] * f;
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void scale_16(void* dst, const void* src, std::size_t count, double scale) {
  auto* d = static_cast<std::uint16_t*>(dst);
  auto* s = static_cast<const std::uint16_t*>(src);
  const float f = static_cast<float>(scale);
  for (std::size_t i = 0; i < count; ++i) d[i] = FromFloat(ToFloat(s[i]) * f);
}

}  // namespace

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t mant = x & 0x7fffffu;
  const int exp = static_cast<int>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<std::uint16_t>(sign | h);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

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
    std::memcpy(dst, src, count * dtype_size(dtype));
    return;
  }
  switch (dtype) {
    case DType::float32: return scale_plain<float>(dst, src, count, scale);
    case DType::float64: return scale_plain<double>(dst, src, count, scale);
    case DType::float16: return scale_16<half_to_float, float_to_half>(dst, src, count, scale);
    case DType::bfloat16: return scale_16<bf16_to_float, float_to_bf16>(dst, src, count, scale);
    case DType::int32:
    case DType::int64: break;
  }
  throw ConfigError(fmt::format("DDP: gradients of dtype {} cannot be averaged; accepted: float32, "
                                "float64, float16, bfloat16",
                                dtype_name(dtype)));
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
bool have_device_ops() { return device_ops().alloc && device_ops().free && device_ops().copy; }

}  // namespace fastrun::ddp
