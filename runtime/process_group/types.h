#pragma once
// Element types, reduction ops and buffer views shared by every backend.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fastrun {

enum class DType { float32, float64, float16, bfloat16, int32, int64 };
enum class ReduceOp { sum, avg, min, max, product };
enum class DeviceKind { cpu, cuda };

// Inline: every op's shape checks and block offsets ask it several times.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::float16: return 2;
    case DType::bfloat16: return 2;
    case DType::int32: return 4;
    case DType::int64: return 8;
  }
  return 0;
}
std::string_view dtype_name(DType t);
std::string_view reduce_op_name(ReduceOp op);

// A typed view of `count` elements at `data`, in host or CUDA memory. Views never own.
struct BufferView {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::float32;
  DeviceKind device = DeviceKind::cpu;
  std::size_t bytes() const { return count * dtype_size(dtype); }
};

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::int32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::int64; }

template <typename T>
BufferView view_of(T* data, std::size_t count, DeviceKind device = DeviceKind::cpu) {
  return BufferView{data, count, dtype_of<T>(), device};
}

}  // namespace fastrun
