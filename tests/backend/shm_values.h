#pragma once
// Inputs and locally computed expected results for the shm backend tests, for every DType x
// ReduceOp. Inputs are small integers (exact in every dtype, products stay tiny); expected
// values are accumulated in the backend's accumulation type in rank order and rounded once, so
// results must match bit for bit.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fastrun/runtime/process_group/half_float.h"
#include "fastrun/runtime/process_group/types.h"

namespace fastrun::shm_test {

inline const std::vector<DType> kAllDTypes = {DType::float32, DType::float64, DType::float16,
                                              DType::bfloat16, DType::int32,   DType::int64};
inline const std::vector<ReduceOp> kAllOps = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max,
                                              ReduceOp::product};

// The input value of element i on `rank` (products get values in [-2, 2]).
inline int input_value(int rank, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::product) return static_cast<int>((i * 5 + static_cast<std::size_t>(rank) * 3) % 5) - 2;
  return static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13 + i / 977) % 19) - 9;
}

// Writes `v` (an exact small integer or a float) as element i of a `t` buffer.
inline void put(DType t, void* base, std::size_t i, double v) {
  switch (t) {
    case DType::float32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::float64: static_cast<double*>(base)[i] = v; return;
    case DType::float16: static_cast<std::uint16_t*>(base)[i] = half::float_to_half(static_cast<float>(v)); return;
    case DType::bfloat16: static_cast<std::uint16_t*>(base)[i] = half::float_to_bf16(static_cast<float>(v)); return;
    case DType::int32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); return;
    case DType::int64: static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(v); return;
  }
}

inline double get(DType t, const void* base, std::size_t i) {
  switch (t) {
    case DType::float32: return static_cast<const float*>(base)[i];
    case DType::float64: return static_cast<const double*>(base)[i];
    case DType::float16: return half::half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::bfloat16: return half::bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::int32: return static_cast<const std::int32_t*>(base)[i];
    case DType::int64: return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
  }
  return 0;
}

template <typename A> A combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::product: return a * b;
    case ReduceOp::min: return b < a ? b : a;
    case ReduceOp::max: return a < b ? b : a;
  }
  return a;
}

template <typename A> A reduce_values(ReduceOp op, int n, std::size_t i) {
  A acc = static_cast<A>(input_value(0, i, op));
  for (int r = 1; r < n; ++r) acc = combine(op, acc, static_cast<A>(input_value(r, i, op)));
  if (op == ReduceOp::avg) acc = acc / static_cast<A>(n);
  return acc;
}

// Element i of the reduction over ranks 0..n-1 of input_value, as `t` would store it.
inline void put_expected(DType t, void* base, std::size_t i, ReduceOp op, int n) {
  switch (t) {
    case DType::float32:
    case DType::float16:
    case DType::bfloat16: put(t, base, i, reduce_values<float>(op, n, i)); return;
    case DType::float64: put(t, base, i, reduce_values<double>(op, n, i)); return;
    case DType::int32: put(t, base, i, reduce_values<std::int32_t>(op, n, i)); return;
    case DType::int64: put(t, base, i, static_cast<double>(reduce_values<std::int64_t>(op, n, i))); return;
  }
}

// First element where a and b differ bytewise, or -1.
inline long first_mismatch(DType t, const void* a, const void* b, std::size_t count) {
  const std::size_t es = dtype_size(t);
  for (std::size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const char*>(a) + i * es, static_cast<const char*>(b) + i * es, es) != 0)
      return static_cast<long>(i);
  return -1;
}

}  // namespace fastrun::shm_test
