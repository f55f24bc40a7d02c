// 16-bit float conversions and the reduction kernels every CPU path shares: the semantics
// reduce_kernels.h promises (accumulate-then-round-once, wrap-around, source order).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fastrun/runtime/process_group/half_float.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

using namespace fastrun;

TEST_CASE("half and bfloat16 conversions round to nearest even", "[kernels]") {
  CHECK(half::float_to_half(1.0f) == 0x3c00);
  CHECK(half::float_to_half(-2.0f) == 0xc000);
  CHECK(half::float_to_half(65504.0f) == 0x7bff);
  CHECK(half::float_to_half(70000.0f) == 0x7c00);
  CHECK(half::float_to_half(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(half::half_to_float(0x0001) == 5.960464477539063e-08f);
  CHECK(half::half_to_float(0x3555) == Approx(0.33325195f));
  CHECK(std::isnan(half::half_to_float(half::float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  for (std::uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive half survives the round trip
    REQUIRE(half::float_to_half(half::half_to_float(static_cast<std::uint16_t>(h))) == h);
  CHECK(half::float_to_bf16(1.0f) == 0x3f80);
  CHECK(half::bf16_to_float(0x4049) == 3.140625f);
  CHECK(half::float_to_bf16(1.00390625f) == 0x3f80);  // halfway, ties to even
}

namespace {

template <class T>
std::vector<T> reduced(DType dtype, ReduceOp op, const std::vector<std::vector<T>>& inputs) {
  std::vector<T> out(inputs[0].size());
  std::vector<const void*> srcs;
  for (const auto& in : inputs) srcs.push_back(in.data());
  kernels::reduce(dtype, op, out.data(), nullptr, srcs.data(), static_cast<int>(srcs.size()), out.size());
  return out;
}

std::uint16_t h(float f) { return half::float_to_half(f); }

}  // namespace

TEST_CASE("16-bit floats accumulate over every source in float and round once", "[kernels]") {
  // 2048 + 2 is exact in half only if the sum is not rounded to 16 bits on the way.
  CHECK(reduced<std::uint16_t>(DType::float16, ReduceOp::sum, {{h(2048)}, {h(2)}})[0] == h(2050));
  // 2048 + 1 + 1: rounding after each pair would give 2048 (1 is half an ulp, ties to even).
  CHECK(reduced<std::uint16_t>(DType::float16, ReduceOp::sum, {{h(2048)}, {h(1)}, {h(1)}})[0] == h(2050));
  // avg divides the float sum: 2050 / 3 -> 683.5, where pairwise rounding would give 2048 / 3 -> 682.5.
  CHECK(reduced<std::uint16_t>(DType::float16, ReduceOp::avg, {{h(2048)}, {h(1)}, {h(1)}})[0] == h(683.5f));
  const auto bf = [](float f) { return half::float_to_bf16(f); };
  CHECK(reduced<std::uint16_t>(DType::bfloat16, ReduceOp::sum, {{bf(256)}, {bf(1)}, {bf(1)}})[0] == bf(258));
  CHECK(reduced<std::uint16_t>(DType::bfloat16, ReduceOp::min, {{bf(3)}, {bf(-5)}})[0] == bf(-5));
}

TEST_CASE("integers wrap on overflow and avg truncates toward zero", "[kernels]") {
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  CHECK(reduced<std::int32_t>(DType::int32, ReduceOp::sum, {{big}, {1}})[0] == std::numeric_limits<std::int32_t>::min());
  CHECK(reduced<std::int32_t>(DType::int32, ReduceOp::product, {{big}, {big}, {3}})[0] == 3);  // (2^31-1)^2*3 mod 2^32
  const std::int64_t big64 = std::numeric_limits<std::int64_t>::max();
  CHECK(reduced<std::int64_t>(DType::int64, ReduceOp::sum, {{big64}, {big64}})[0] == -2);
  CHECK(reduced<std::int32_t>(DType::int32, ReduceOp::avg, {{7, -7}, {0, 0}}) == std::vector<std::int32_t>{3, -3});
  CHECK(reduced<double>(DType::float64, ReduceOp::avg, {{7}, {0}})[0] == 3.5);
}

TEST_CASE("sources combine in the order given, and min/max keep the earlier one on NaN", "[kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // (1e8 + -1e8) + 1 = 1, while 1e8 + (-1e8 + 1) = 0 in float: the order is part of the result.
  CHECK(reduced<float>(DType::float32, ReduceOp::sum, {{1e8f}, {-1e8f}, {1.0f}})[0] == 1.0f);
  CHECK(reduced<float>(DType::float32, ReduceOp::sum, {{1.0f}, {1e8f}, {-1e8f}})[0] == 0.0f);
  CHECK(std::isnan(reduced<float>(DType::float32, ReduceOp::min, {{nan}, {1.0f}})[0]));
  CHECK(reduced<float>(DType::float32, ReduceOp::max, {{1.0f}, {nan}})[0] == 1.0f);
}

TEST_CASE("in place, a second copy, and more than one block", "[kernels]") {
  const std::size_t n = 2500;  // two full blocks of 1024 and a tail
  std::vector<std::int64_t> a(n), b(n), copy(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<std::int64_t>(i), b[i] = 10 * static_cast<std::int64_t>(i);
  const void* srcs[] = {a.data(), b.data()};
  kernels::reduce(DType::int64, ReduceOp::sum, a.data(), copy.data(), srcs, 2, n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE((a[i] == 11 * static_cast<std::int64_t>(i) && copy[i] == a[i]));
  CHECK(reduced<double>(DType::float64, ReduceOp::max, {{4.0}})[0] == 4.0);  // one source: a copy
}
