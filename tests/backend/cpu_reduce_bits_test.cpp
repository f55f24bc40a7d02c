// The CPU backends share one reduction kernel set (process_group/reduce_kernels.h), so the same
// all-reduce and reduce-scatter give the same bits on gloo and on shm, whichever `auto` picks:
// float16 and bfloat16 accumulated in float in rank order and rounded once, int32 wrapping on
// overflow. Real ranks (2 and 3: with 3, a ring's per-segment summation order would show), each
// running every op on a gloo world and on an shm group of the same ranks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/process_group/half_float.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

std::uint32_t mix(std::uint32_t x) {  // a fixed integer hash, for inputs every rank can recompute
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// Values that round differently when the order or the rounding points change: magnitudes from
// 1/8 to 2^12 with a fraction, so a half's last bit is often a tie; int32 over its whole range,
// so sums and products overflow.
std::vector<std::uint8_t> input(DType t, int rank, std::size_t count) {
  std::vector<std::uint8_t> bytes(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t h = mix(static_cast<std::uint32_t>(i * 7919 + static_cast<std::size_t>(rank) * 104729 + 1));
    const float f = (static_cast<float>(h % 20001) - 10000.0f) / 1000.0f * static_cast<float>(1u << (h >> 28) % 12) / 8.0f;
    void* p = bytes.data() + i * dtype_size(t);
    if (t == DType::int32) {
      std::memcpy(p, &h, 4);
    } else if (t == DType::float32) {
      std::memcpy(p, &f, 4);
    } else {
      const std::uint16_t b = t == DType::float16 ? half::float_to_half(f) : half::float_to_bf16(f);
      std::memcpy(p, &b, 2);
    }
  }
  return bytes;
}

// The documented sum, written out: rank order, float accumulation rounded once, wrap-around.
std::vector<std::uint8_t> reference_sum(DType t, int n, std::size_t count) {
  std::vector<std::vector<std::uint8_t>> in;
  for (int r = 0; r < n; ++r) in.push_back(input(t, r, count));
  std::vector<std::uint8_t> out(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    if (t == DType::int32) {
      std::uint32_t acc = 0;
      for (const auto& b : in) {
        std::uint32_t x;
        std::memcpy(&x, b.data() + i * 4, 4);
        acc += x;
      }
      std::memcpy(out.data() + i * 4, &acc, 4);
      continue;
    }
    float acc = 0;
    for (int r = 0; r < n; ++r) {
      const std::uint8_t* p = in[static_cast<std::size_t>(r)].data() + i * dtype_size(t);
      float x;
      if (t == DType::float32) {
        std::memcpy(&x, p, 4);
      } else {
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        x = t == DType::float16 ? half::half_to_float(b) : half::bf16_to_float(b);
      }
      acc = r == 0 ? x : acc + x;
    }
    if (t == DType::float32) {
      std::memcpy(out.data() + i * 4, &acc, 4);
    } else {
      const std::uint16_t b = t == DType::float16 ? half::float_to_half(acc) : half::float_to_bf16(acc);
      std::memcpy(out.data() + i * 2, &b, 2);
    }
  }
  return out;
}

std::size_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  std::size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  return i;
}

const DType kDtypes[] = {DType::float16, DType::bfloat16, DType::int32, DType::float32};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product};

void same_bits_on_gloo_and_shm(int rank) {
  auto ctx = join({"gloo"});
  Group& gloo = ctx->world();
  const int n = gloo.size();
  std::vector<int> everyone;
  for (int r = 0; r < n; ++r) everyone.push_back(r);
  auto shm = ctx->new_group(everyone, "shm");
  RANK_REQUIRE(gloo.backend_name() == "gloo" && shm->backend_name() == "shm");
  // 1001: shm's one-step path and gloo's all-gather path; 600007: shm's pipelined path and
  // (but for 16 bits on 2 ranks) gloo's block path, split unevenly over 2 and 3 ranks.
  for (std::size_t count : {std::size_t{1001}, std::size_t{600007}}) {
    for (DType t : kDtypes) {
      for (ReduceOp op : kOps) {
        const std::string what = fmt::format("{} {} of {}", dtype_name(t), reduce_op_name(op), count);
        auto on_gloo = input(t, rank, count), on_shm = on_gloo;
        gloo.all_reduce(BufferView{on_gloo.data(), count, t, DeviceKind::cpu}, {op})->wait();
        shm->all_reduce(BufferView{on_shm.data(), count, t, DeviceKind::cpu}, {op})->wait();
        const std::size_t at = first_difference(on_gloo, on_shm);
        if (at != on_gloo.size())
          throw std::runtime_error(fmt::format("all_reduce {}: gloo and shm differ at element {}", what, at / dtype_size(t)));
        if (op == ReduceOp::sum && on_shm != reference_sum(t, n, count))
          throw std::runtime_error(fmt::format("all_reduce {}: not the rank-order, round-once sum", what));
      }
    }
  }
  for (DType t : kDtypes) {  // reduce_scatter: this rank's block of the same reduction
    for (ReduceOp op : kOps) {
      const std::size_t block = 333;
      const auto in = input(t, rank, block * static_cast<std::size_t>(n));
      std::vector<std::uint8_t> on_gloo(block * dtype_size(t)), on_shm(on_gloo.size());
      auto view = [&](const std::vector<std::uint8_t>& v, std::size_t c) {
        return BufferView{const_cast<std::uint8_t*>(v.data()), c, t, DeviceKind::cpu};
      };
      gloo.reduce_scatter(view(in, in.size() / dtype_size(t)), view(on_gloo, block), {op})->wait();
      shm->reduce_scatter(view(in, in.size() / dtype_size(t)), view(on_shm, block), {op})->wait();
      if (on_gloo != on_shm)
        throw std::runtime_error(fmt::format("reduce_scatter {} {}: gloo and shm differ at element {}", dtype_name(t),
                                             reduce_op_name(op), first_difference(on_gloo, on_shm) / dtype_size(t)));
    }
  }
}

test::RankRunOptions generous() {  // 40 collectives on two backends, on a loaded 2-core machine
  test::RankRunOptions o;
  o.timeout = std::chrono::seconds(120);
  return o;
}

}  // namespace

TEST_CASE("gloo and shm all-reduce to the same bits: 2 ranks", "[gloo][shm][mp]") {
  REQUIRE(test::all_ok(test::run_ranks(2, same_bits_on_gloo_and_shm, generous())));
}

TEST_CASE("gloo and shm all-reduce to the same bits: 3 ranks", "[gloo][shm][mp]") {
  REQUIRE(test::all_ok(test::run_ranks(3, same_bits_on_gloo_and_shm, generous())));
}
