// The gloo backend in real processes over 127.0.0.1: every collective x dtype x op against
// values computed locally, async FIFO handles, sub-groups.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/process_group/half_float.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

// A buffer of any dtype, filled from and read back as doubles.
struct TypedBuffer {
  DType dtype;
  std::vector<std::uint8_t> bytes;
  TypedBuffer(DType t, std::size_t n) : dtype(t), bytes(n * dtype_size(t)) {}
  std::size_t count() const { return bytes.size() / dtype_size(dtype); }
  BufferView view() { return BufferView{bytes.data(), count(), dtype, DeviceKind::cpu}; }
  void set(std::size_t i, double v) {
    void* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::float32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::float64: std::memcpy(p, &v, 8); break;
      case DType::int32: { auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DType::int64: { auto x = static_cast<std::int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::float16: { auto h = half::float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::bfloat16: { auto h = half::float_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    }
  }
  double get(std::size_t i) const {
    const void* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::float32: { float f; std::memcpy(&f, p, 4); return f; }
      case DType::float64: { double d; std::memcpy(&d, p, 8); return d; }
      case DType::int32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
      case DType::int64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
      case DType::float16: { std::uint16_t h; std::memcpy(&h, p, 2); return half::half_to_float(h); }
      case DType::bfloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return half::bf16_to_float(h); }
    }
    return 0;
  }
};

bool is_int(DType t) { return t == DType::int32 || t == DType::int64; }

double tolerance(DType t) {
  switch (t) {
    case DType::float16: return 2e-3;
    case DType::bfloat16: return 1e-2;
    case DType::float32: return 1e-6;
    default: return 1e-12;
  }
}

void expect_near(double got, double want, DType t, const std::string& what) {
  if (std::fabs(got - want) > tolerance(t) * std::max(1.0, std::fabs(want)))
    throw std::runtime_error(fmt::format("{}: got {}, expected {}", what, got, want));
}

double input_value(int rank, std::size_t i) { return static_cast<double>(rank + 1) + static_cast<double>(i % 5); }

double expected_reduce(ReduceOp op, int size, std::size_t i, DType t) {
  double acc = input_value(0, i);
  for (int r = 1; r < size; ++r) {
    const double x = input_value(r, i);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: acc += x; break;
      case ReduceOp::product: acc *= x; break;
      case ReduceOp::min: acc = std::min(acc, x); break;
      case ReduceOp::max: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::avg) acc = is_int(t) ? std::trunc(acc / size) : acc / size;
  return acc;
}

const DType kDtypes[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product};

void check_every_collective(Group& g) {
  const int n = g.size(), me = g.rank();
  const std::size_t count = 37;
  for (DType t : kDtypes) {
    const std::string dt(dtype_name(t));
    for (ReduceOp op : kOps) {
      TypedBuffer b(t, count);
      for (std::size_t i = 0; i < count; ++i) b.set(i, input_value(me, i));
      g.all_reduce(b.view(), {op})->wait();
      for (std::size_t i = 0; i < count; ++i)
        expect_near(b.get(i), expected_reduce(op, n, i, t), t,
                    fmt::format("all_reduce {} {} [{}]", dt, reduce_op_name(op), i));
    }
    {  // broadcast from the last rank
      TypedBuffer b(t, count);
      for (std::size_t i = 0; i < count; ++i) b.set(i, me == n - 1 ? static_cast<double>(i % 50) : -1.0);
      g.broadcast(b.view(), {n - 1})->wait();
      for (std::size_t i = 0; i < count; ++i) expect_near(b.get(i), static_cast<double>(i % 50), t, "broadcast " + dt);
    }
    {  // all_gather
      TypedBuffer in(t, count), out(t, count * static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < count; ++i) in.set(i, input_value(me, i));
      g.all_gather(in.view(), out.view())->wait();
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i)
          expect_near(out.get(static_cast<std::size_t>(r) * count + i), input_value(r, i), t, "all_gather " + dt);
    }
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {  // reduce_scatter
      TypedBuffer in(t, count * static_cast<std::size_t>(n)), out(t, count);
      for (std::size_t i = 0; i < in.count(); ++i) in.set(i, input_value(me, i));
      g.reduce_scatter(in.view(), out.view(), {op})->wait();
      for (std::size_t i = 0; i < count; ++i)
        expect_near(out.get(i), expected_reduce(op, n, static_cast<std::size_t>(me) * count + i, t), t,
                    fmt::format("reduce_scatter {} {}", dt, reduce_op_name(op)));
      expect_near(in.get(0), input_value(me, 0), t, "reduce_scatter leaves its input alone");
    }
  }
  g.barrier()->wait();
}

}  // namespace

TEST_CASE("gloo: every collective, dtype and op on 3 ranks", "[gloo][mp]") {
  auto results = test::run_ranks(3, [](int) {
    auto ctx = join({"gloo"});
    RANK_REQUIRE(ctx->world().backend_name() == "gloo");
    check_every_collective(ctx->world());
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("gloo: 2 ranks, async handles run in issue order, large and empty buffers", "[gloo][mp]") {
  auto results = test::run_ranks(2, [](int rank) {
    auto ctx = join({"gloo"});
    auto& g = ctx->world();
    check_every_collective(g);
    std::vector<std::vector<float>> bufs(8, std::vector<float>(1000));
    std::vector<WorkHandle> works;
    for (std::size_t k = 0; k < bufs.size(); ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), static_cast<float>(k + static_cast<std::size_t>(rank)));
      works.push_back(g.all_reduce(view_of(bufs[k].data(), bufs[k].size())));
    }
    for (std::size_t k = 0; k < bufs.size(); ++k) {
      works[k]->wait();
      RANK_REQUIRE(works[k]->completed());
      RANK_REQUIRE(bufs[k][999] == static_cast<float>(2 * k + 1));
    }
    std::vector<float> big(3 << 20, static_cast<float>(rank + 1));  // 12 MiB: many ring segments
    g.all_reduce(view_of(big.data(), big.size()))->wait();
    RANK_REQUIRE(big.front() == 3.0f && big.back() == 3.0f);
    g.all_reduce(view_of(big.data(), 0))->wait();
    std::vector<double> cuda_claim(2);
    bool refused = false;
    try {
      g.all_reduce(view_of(cuda_claim.data(), 2, DeviceKind::cuda));
    } catch (const ConfigError& e) {
      refused = std::string(e.what()).find("nccl") != std::string::npos;
    }
    RANK_REQUIRE(refused);
  });
  REQUIRE(test::all_ok(results));
}

TEST_CASE("gloo: sub-groups", "[gloo][mp]") {
  auto results = test::run_ranks(3, [](int rank) {
    auto ctx = join({"gloo"});
    auto pair = ctx->new_group({2, 0});  // group rank 0 is global rank 2
    auto solo = ctx->new_group({1});
    RANK_REQUIRE((pair != nullptr) == (rank != 1));
    RANK_REQUIRE((solo != nullptr) == (rank == 1));
    if (pair) {
      RANK_REQUIRE(pair->size() == 2);
      RANK_REQUIRE(pair->rank() == (rank == 2 ? 0 : 1));
      RANK_REQUIRE(pair->global_rank(0) == 2);
      std::int64_t v = rank;
      pair->all_reduce(view_of(&v, 1))->wait();
      RANK_REQUIRE(v == 2);
      std::int64_t b = rank == 2 ? 77 : 0;
      pair->broadcast(view_of(&b, 1), {0})->wait();
      RANK_REQUIRE(b == 77);
      check_every_collective(*pair);
    }
    if (solo) {
      std::int64_t v = 5;
      solo->all_reduce(view_of(&v, 1))->wait();
      RANK_REQUIRE(v == 5);
    }
    std::int64_t w = 1;  // the world is still in step after the sub-groups
    ctx->world().all_reduce(view_of(&w, 1))->wait();
    RANK_REQUIRE(w == 3);
  });
  REQUIRE(test::all_ok(results));
}
