#include "fastrun/runtime/process_group/reduce_kernels.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/half_float.h"

namespace fastrun::kernels {
namespace {

// Work goes in blocks of a compile-time size so the inner loops have a constant trip count and
// vectorise even under -O2's "very cheap" cost model; the accumulator lives on the stack (a
// local array no source can alias), which is also what makes dst == source safe.
constexpr std::size_t kBlock = 1024;

struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

// Storage type T -> accumulation type.
template <typename T> struct Traits {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc v) { return v; }
};
template <> struct Traits<Half> {
  using Acc = float;
  static Acc load(Half v) { return half::half_to_float(v.bits); }
  static Half store(Acc v) { return Half{half::float_to_half(v)}; }
};
template <> struct Traits<BFloat16> {
  using Acc = float;
  static Acc load(BFloat16 v) { return half::bf16_to_float(v.bits); }
  static BFloat16 store(Acc v) { return BFloat16{half::float_to_bf16(v)}; }
};

template <typename A> A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A> A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

struct SumOp {
  template <typename A> static A apply(A a, A b) { return add(a, b); }
};
struct ProdOp {
  template <typename A> static A apply(A a, A b) { return mul(a, b); }
};
struct MinOp {
  template <typename A> static A apply(A a, A b) { return b < a ? b : a; }
};
struct MaxOp {
  template <typename A> static A apply(A a, A b) { return a < b ? b : a; }
};

// One block of m <= kBlock elements. M is the compile-time trip count (kBlock) or 0 for the tail.
template <typename T, typename Op, bool Avg, std::size_t M>
void block(T* dst, T* dst2, const void* const* srcs, int nsrc, std::size_t offset, std::size_t m_runtime) {
  using Tr = Traits<T>;
  using A = typename Tr::Acc;
  const std::size_t m = M ? M : m_runtime;
  A acc[kBlock];
  const T* s0 = static_cast<const T*>(srcs[0]) + offset;
  if (nsrc >= 2) {
    const T* s1 = static_cast<const T*>(srcs[1]) + offset;
    for (std::size_t i = 0; i < m; ++i) acc[i] = Op::apply(Tr::load(s0[i]), Tr::load(s1[i]));
  } else {
    for (std::size_t i = 0; i < m; ++i) acc[i] = Tr::load(s0[i]);
  }
  for (int k = 2; k < nsrc; ++k) {
    const T* s = static_cast<const T*>(srcs[k]) + offset;
    for (std::size_t i = 0; i < m; ++i) acc[i] = Op::apply(acc[i], Tr::load(s[i]));
  }
  if constexpr (Avg) {
    const A n = static_cast<A>(nsrc);
    for (std::size_t i = 0; i < m; ++i) acc[i] = acc[i] / n;
  }
  T* d = dst + offset;
  for (std::size_t i = 0; i < m; ++i) d[i] = Tr::store(acc[i]);
  if (dst2) copy_bytes(dst2 + offset, d, m * sizeof(T));
}

template <typename T, typename Op, bool Avg>
void run(void* dst, void* dst2, const void* const* srcs, int nsrc, std::size_t count) {
  T* d = static_cast<T*>(dst);
  T* d2 = static_cast<T*>(dst2);
  std::size_t off = 0;
  for (; off + kBlock <= count; off += kBlock) block<T, Op, Avg, kBlock>(d, d2, srcs, nsrc, off, kBlock);
  if (off < count) block<T, Op, Avg, 0>(d, d2, srcs, nsrc, off, count - off);
}

template <typename T>
void dispatch_op(ReduceOp op, void* dst, void* dst2, const void* const* srcs, int nsrc, std::size_t count) {
  switch (op) {
    case ReduceOp::sum: return run<T, SumOp, false>(dst, dst2, srcs, nsrc, count);
    case ReduceOp::avg: return run<T, SumOp, true>(dst, dst2, srcs, nsrc, count);
    case ReduceOp::min: return run<T, MinOp, false>(dst, dst2, srcs, nsrc, count);
    case ReduceOp::max: return run<T, MaxOp, false>(dst, dst2, srcs, nsrc, count);
    case ReduceOp::product: return run<T, ProdOp, false>(dst, dst2, srcs, nsrc, count);
  }
  throw BackendError("reduce kernel: unknown reduce op");
}

}  // namespace

void reduce(DType dtype, ReduceOp op, void* dst, void* dst2, const void* const* srcs, int nsrc, std::size_t count) {
  if (count == 0) return;
  switch (dtype) {
    case DType::float32: return dispatch_op<float>(op, dst, dst2, srcs, nsrc, count);
    case DType::float64: return dispatch_op<double>(op, dst, dst2, srcs, nsrc, count);
    case DType::int32: return dispatch_op<std::int32_t>(op, dst, dst2, srcs, nsrc, count);
    case DType::int64: return dispatch_op<std::int64_t>(op, dst, dst2, srcs, nsrc, count);
    case DType::float16: return dispatch_op<Half>(op, dst, dst2, srcs, nsrc, count);
    case DType::bfloat16: return dispatch_op<BFloat16>(op, dst, dst2, srcs, nsrc, count);
  }
  throw BackendError("reduce kernel: unknown dtype");
}

namespace {

template <typename T>
void divide_plain(void* data, std::size_t count, int n) {
  auto* d = static_cast<T*>(data);
  const T divisor = static_cast<T>(n);  // as block<..., Avg>: acc / static_cast<Acc>(nsrc)
  for (std::size_t i = 0; i < count; ++i) d[i] = d[i] / divisor;
}

template <typename T>
void scale_plain(void* dst, const void* src, std::size_t count, double factor) {
  auto* d = static_cast<T*>(dst);
  auto* s = static_cast<const T*>(src);
  // Multiplication by the factor (DDP passes 1/world), not division by its inverse: the two can
  // differ in the last bit, and this is what DDP has always done.
  const T f = static_cast<T>(factor);
  for (std::size_t i = 0; i < count; ++i) d[i] = s[i] * f;
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void scale_16(void* dst, const void* src, std::size_t count, double factor) {
  auto* d = static_cast<std::uint16_t*>(dst);
  auto* s = static_cast<const std::uint16_t*>(src);
  const float f = static_cast<float>(factor);
  for (std::size_t i = 0; i < count; ++i) d[i] = FromFloat(ToFloat(s[i]) * f);
}

}  // namespace

void divide(DType dtype, void* data, std::size_t count, int n) {
  switch (dtype) {
    case DType::float32: return divide_plain<float>(data, count, n);
    case DType::float64: return divide_plain<double>(data, count, n);
    case DType::int32: return divide_plain<std::int32_t>(data, count, n);
    case DType::int64: return divide_plain<std::int64_t>(data, count, n);
    case DType::float16:
    case DType::bfloat16: break;
  }
  throw ConfigError("dividing a folded sum of dtype " + std::string(dtype_name(dtype)) +
                    ": accepted: float32, float64, int32, int64 (16-bit floats accumulate in float)");
}

void scale(DType dtype, void* dst, const void* src, std::size_t count, double factor) {
  switch (dtype) {
    case DType::float32: return scale_plain<float>(dst, src, count, factor);
    case DType::float64: return scale_plain<double>(dst, src, count, factor);
    case DType::float16: return scale_16<half::half_to_float, half::float_to_half>(dst, src, count, factor);
    case DType::bfloat16: return scale_16<half::bf16_to_float, half::float_to_bf16>(dst, src, count, factor);
    case DType::int32:
    case DType::int64: break;
  }
  throw ConfigError("scaling a buffer of dtype " + std::string(dtype_name(dtype)) +
                    ": only floating dtypes can be scaled; accepted: float32, float64, float16, bfloat16");
}

}  // namespace fastrun::kernels
