// Every shm collective x dtype against locally computed values, on 2, 3 and 4 real processes,
// with sizes that hit both all-reduce paths, odd slice splits and several pipeline chunks.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "shm_test_support.h"
#include "shm_values.h"

using namespace fastrun;
using namespace fastrun::shm_test;

namespace {

// 1 element; primes; just above the small all-reduce limit (64 KiB of float32); a few pipeline
// chunks (256 KiB, or 128 KiB with more ranks than cores).
const std::vector<std::size_t> kSizes = {1, 2, 13, 1031, 16411, 140009};
// The all-reduce also gets more chunks than the ring has regions (2 MiB per rank; 512 KiB with
// more ranks than cores), so one op wraps around the ring while reading two steps back.
const std::vector<std::size_t> kAllReduceSizes = {1, 2, 13, 1031, 16411, 140009, 600011};

std::vector<char> buffer(DType t, std::size_t count) { return std::vector<char>(count * dtype_size(t) + 1, 0x5a); }

void check_all_reduce(const Rank& rk) {
  auto g = rk.world();
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllOps)
      for (std::size_t count : kAllReduceSizes) {
        auto buf = buffer(t, count), want = buffer(t, count);
        for (std::size_t i = 0; i < count; ++i) {
          put(t, buf.data(), i, input_value(rk.rank, i, op));
          put_expected(t, want.data(), i, op, rk.size);
        }
        g->all_reduce(BufferView{buf.data(), count, t}, AllReduceOptions{op})->wait();
        const long bad = first_mismatch(t, buf.data(), want.data(), count);
        if (bad >= 0)
          throw CheckFailed(fmt::format("all_reduce {} {} x{}: element {} is {}, expected {}", dtype_name(t),
                                        reduce_op_name(op), count, bad, get(t, buf.data(), static_cast<std::size_t>(bad)),
                                        get(t, want.data(), static_cast<std::size_t>(bad))));
        expect(buf.back() == 0x5a, "all_reduce {} x{} wrote past the end of the buffer", dtype_name(t), count);
      }
}

void check_broadcast(const Rank& rk) {
  auto g = rk.world();
  for (int root = 0; root < rk.size; ++root)
    for (DType t : kAllDTypes)
      for (std::size_t count : kSizes) {
        auto buf = buffer(t, count), want = buffer(t, count);
        for (std::size_t i = 0; i < count; ++i) {
          put(t, want.data(), i, input_value(root, i, ReduceOp::sum));
          if (rk.rank == root) put(t, buf.data(), i, input_value(root, i, ReduceOp::sum));
        }
        g->broadcast(BufferView{buf.data(), count, t}, BroadcastOptions{root})->wait();
        const long bad = first_mismatch(t, buf.data(), want.data(), count);
        expect(bad < 0, "broadcast from {} {} x{}: element {} differs", root, dtype_name(t), count, bad);
        expect(buf.back() == 0x5a, "broadcast wrote past the end");
      }
}

void check_all_gather(const Rank& rk) {
  auto g = rk.world();
  const auto n = static_cast<std::size_t>(rk.size);
  for (DType t : kAllDTypes)
    for (std::size_t count : kSizes) {
      auto in = buffer(t, count), out = buffer(t, count * n), want = buffer(t, count * n);
      for (std::size_t i = 0; i < count; ++i) put(t, in.data(), i, input_value(rk.rank, i, ReduceOp::sum));
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t i = 0; i < count; ++i)
          put(t, want.data(), p * count + i, input_value(static_cast<int>(p), i, ReduceOp::sum));
      g->all_gather(BufferView{in.data(), count, t}, BufferView{out.data(), count * n, t})->wait();
      long bad = first_mismatch(t, out.data(), want.data(), count * n);
      expect(bad < 0, "all_gather {} x{}: element {} differs", dtype_name(t), count, bad);
      expect(out.back() == 0x5a, "all_gather wrote past the end");
      // In place: the input is this rank's own block of the output, the other blocks hold
      // garbage.
      auto inplace = buffer(t, count * n);
      std::memset(inplace.data(), 0x3c, count * n * dtype_size(t));
      char* own = inplace.data() + static_cast<std::size_t>(rk.rank) * count * dtype_size(t);
      std::memcpy(own, in.data(), count * dtype_size(t));
      g->all_gather(BufferView{own, count, t}, BufferView{inplace.data(), count * n, t})->wait();
      bad = first_mismatch(t, inplace.data(), want.data(), count * n);
      expect(bad < 0, "all_gather in place {} x{}: element {} differs", dtype_name(t), count, bad);
      expect(inplace.back() == 0x5a, "all_gather in place wrote past the end");
    }
}

void check_reduce_scatter(const Rank& rk) {
  auto g = rk.world();
  const auto n = static_cast<std::size_t>(rk.size);
  const auto r = static_cast<std::size_t>(rk.rank);
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllOps)
      for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{1031}, std::size_t{70001}}) {
        auto in = buffer(t, count * n), out = buffer(t, count), all = buffer(t, count * n);
        for (std::size_t i = 0; i < count * n; ++i) {
          put(t, in.data(), i, input_value(rk.rank, i, op));
          put_expected(t, all.data(), i, op, rk.size);
        }
        g->reduce_scatter(BufferView{in.data(), count * n, t}, BufferView{out.data(), count, t},
                          ReduceScatterOptions{op})
            ->wait();
        const long bad = first_mismatch(t, out.data(), all.data() + r * count * dtype_size(t), count);
        expect(bad < 0, "reduce_scatter {} {} x{}: element {} differs", dtype_name(t), reduce_op_name(op), count, bad);
        expect(out.back() == 0x5a, "reduce_scatter wrote past the end");
      }
}

void run_on(int n, void (*body)(const Rank&)) {
  std::string run_id;
  const auto out = run_ranks(n, body, {}, &run_id);
  INFO(describe(out));
  CHECK(all_ok(out));
  CHECK(shm_entries(run_id).empty());
}

}  // namespace

TEST_CASE("shm all_reduce: every op and dtype on 2, 3, 4 ranks", "[shm]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " ranks");
  run_on(n, check_all_reduce);
}

TEST_CASE("shm broadcast: every root and dtype on 2, 3, 4 ranks", "[shm]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " ranks");
  run_on(n, check_broadcast);
}

TEST_CASE("shm all_gather: every dtype on 2, 3, 4 ranks, and in place", "[shm]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " ranks");
  run_on(n, check_all_gather);
}

TEST_CASE("shm reduce_scatter: every op and dtype on 2, 3, 4 ranks", "[shm]") {
  const int n = GENERATE(2, 3, 4);
  INFO(n << " ranks");
  run_on(n, check_reduce_scatter);
}
