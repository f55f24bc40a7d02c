// 16-bit float conversions and the reduction kernels the CPU backends share.
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

TEST_CASE("16-bit sums accumulate in float", "[kernels]") {
  std::vector<std::uint16_t> a(4, half::float_to_half(2048.0f)), b(4, half::float_to_half(2.0f));
  kernels::reduce(DType::float16, ReduceOp::sum, a.data(), a.data(), b.data(), a.size());
  CHECK(half::half_to_float(a[0]) == 2050.0f);
  std::vector<std::uint16_t> x{half::float_to_bf16(3.0f)}, y{half::float_to_bf16(-5.0f)};
  kernels::reduce(DType::bfloat16, ReduceOp::min, x.data(), x.data(), y.data(), 1);
  CHECK(half::bf16_to_float(x[0]) == -5.0f);
}

TEST_CASE("avg divides and integers truncate toward zero", "[kernels]") {
  std::vector<std::int32_t> i{7, -7};
  kernels::divide_in_place(DType::int32, i.data(), i.size(), 2);
  CHECK(i == std::vector<std::int32_t>{3, -3});
  std::vector<double> d{7};
  kernels::divide_in_place(DType::float64, d.data(), 1, 2);
  CHECK(d[0] == 3.5);
  CHECK_THROWS(kernels::reduce_fn(DType::float32, ReduceOp::avg));
}
