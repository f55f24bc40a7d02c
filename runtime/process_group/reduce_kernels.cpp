#include "fastrun/runtime/process_group/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/half_float.h"

namespace fastrun::kernels {
namespace {

struct Sum { template <class T> static T apply(T a, T b) { return a + b; } };
struct Prod { template <class T> static T apply(T a, T b) { return a * b; } };
struct Min { template <class T> static T apply(T a, T b) { return std::min(a, b); } };
struct Max { template <class T> static T apply(T a, T b) { return std::max(a, b); } };

template <class T, class Op>
void plain(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = Op::apply(x[i], y[i]);
}

// 16-bit floats: widen, reduce in float, round back.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float), class Op>
void widened(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint16_t*>(out);
  auto* x = static_cast<const std::uint16_t*>(a);
  auto* y = static_cast<const std::uint16_t*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = FromFloat(Op::apply(ToFloat(x[i]), ToFloat(y[i])));
}

template <class Op>
ReduceFn for_op(DType dtype) {
  switch (dtype) {
    case DType::float32: return &plain<float, Op>;
    case DType::float64: return &plain<double, Op>;
    case DType::int32: return &plain<std::int32_t, Op>;
    case DType::int64: return &plain<std::int64_t, Op>;
    case DType::float16: return &widened<half::half_to_float, half::float_to_half, Op>;
    case DType::bfloat16: return &widened<half::bf16_to_float, half::float_to_bf16, Op>;
  }
  return nullptr;
}

template <class T>
void divide(T* p, std::size_t n, int d) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(d));
}

}  // namespace

ReduceFn reduce_fn(DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return for_op<Sum>(dtype);
    case ReduceOp::product: return for_op<Prod>(dtype);
    case ReduceOp::min: return for_op<Min>(dtype);
    case ReduceOp::max: return for_op<Max>(dtype);
    case ReduceOp::avg: break;
  }
  throw BackendError(fmt::format("reduce kernel: op '{}' has no element-wise kernel (avg is sum, then divide)",
                                 reduce_op_name(op)));
}

void reduce(DType dtype, ReduceOp op, void* out, const void* a, const void* b, std::size_t count) {
  reduce_fn(dtype, op)(out, a, b, count);
}

void divide_in_place(DType dtype, void* buffer, std::size_t count, int divisor) {
  if (divisor == 1) return;
  switch (dtype) {
    case DType::float32: divide(static_cast<float*>(buffer), count, divisor); return;
    case DType::float64: divide(static_cast<double*>(buffer), count, divisor); return;
    case DType::int32: divide(static_cast<std::int32_t*>(buffer), count, divisor); return;
    case DType::int64: divide(static_cast<std::int64_t*>(buffer), count, divisor); return;
    case DType::float16: {
      auto* p = static_cast<std::uint16_t*>(buffer);
      for (std::size_t i = 0; i < count; ++i) p[i] = half::float_to_half(half::half_to_float(p[i]) / divisor);
      return;
    }
    case DType::bfloat16: {
      auto* p = static_cast<std::uint16_t*>(buffer);
      for (std::size_t i = 0; i < count; ++i) p[i] = half::float_to_bf16(half::bf16_to_float(p[i]) / divisor);
      return;
    }
  }
}

}  // namespace fastrun::kernels
