#pragma once
// Element-wise reductions of the NCCL model over n ranks' chunks, in rank order. Floating types
// accumulate in double and round once (NCCL's ring order and per-step rounding are not
// modelled); integers wrap like NCCL's; avg divides the sum by n (truncating for integers).
#include <nccl.h>

#include <cstdint>
#include <cstring>

namespace fastrun_nccl_model {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal
    int e = -1;
    std::uint32_t m = mant;
    do { ++e; m <<= 1; } while ((m & 0x400u) == 0);
    bits = sign | static_cast<std::uint32_t>(112 - e) << 23 | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (abs < 0x38800000u) {  // subnormal or zero: round to nearest even at 2^-24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    const float scaled = a * 16777216.0f;  // exact
    auto m = static_cast<std::uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
    return static_cast<std::uint16_t>(sign | m);
  }
  const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline std::size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;  // fp8 types are not modelled
  }
}

template <typename Acc>
Acc combine(Acc a, Acc b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return static_cast<Acc>(a * b);
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return static_cast<Acc>(a + b);  // sum, avg
  }
}

template <typename T, typename Acc, typename Load, typename Store>
void reduce_as(const char* const* src, int n, char* dst, std::size_t count, ncclRedOp_t op, Load load, Store store) {
  for (std::size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, src[0] + i * sizeof(T), sizeof x);
    Acc acc = load(x);
    for (int r = 1; r < n; ++r) {
      std::memcpy(&x, src[r] + i * sizeof(T), sizeof x);
      acc = combine<Acc>(acc, load(x), op);
    }
    if (op == ncclAvg) acc = static_cast<Acc>(acc / static_cast<Acc>(n));
    const T out = store(acc);
    std::memcpy(dst + i * sizeof(T), &out, sizeof out);
  }
}

template <typename T>
void reduce_plain(const char* const* src, int n, char* dst, std::size_t count, ncclRedOp_t op) {
  if constexpr (std::is_floating_point_v<T>) {
    reduce_as<T, double>(src, n, dst, count, op, [](T v) { return static_cast<double>(v); },
                         [](double v) { return static_cast<T>(v); });
  } else {
    reduce_as<T, T>(src, n, dst, count, op, [](T v) { return v; }, [](T v) { return v; });
  }
}

// dst[i] = op over r of src[r][i]; dst may be one of the sources.
inline void reduce(const char* const* src, int n, char* dst, std::size_t count, ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclInt8: return reduce_plain<std::int8_t>(src, n, dst, count, op);
    case ncclUint8: return reduce_plain<std::uint8_t>(src, n, dst, count, op);
    case ncclInt32: return reduce_plain<std::int32_t>(src, n, dst, count, op);
    case ncclUint32: return reduce_plain<std::uint32_t>(src, n, dst, count, op);
    case ncclInt64: return reduce_plain<std::int64_t>(src, n, dst, count, op);
    case ncclUint64: return reduce_plain<std::uint64_t>(src, n, dst, count, op);
    case ncclFloat32: return reduce_plain<float>(src, n, dst, count, op);
    case ncclFloat64: return reduce_plain<double>(src, n, dst, count, op);
    case ncclFloat16:
      return reduce_as<std::uint16_t, double>(src, n, dst, count, op, [](std::uint16_t v) { return double{half_to_float(v)}; },
                                              [](double v) { return float_to_half(static_cast<float>(v)); });
    case ncclBfloat16:
      return reduce_as<std::uint16_t, double>(src, n, dst, count, op, [](std::uint16_t v) { return double{bf16_to_float(v)}; },
                                              [](double v) { return float_to_bf16(static_cast<float>(v)); });
    default: return;
  }
}

}  // namespace fastrun_nccl_model
