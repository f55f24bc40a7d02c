#pragma once
// The NCCL backend's checks of the point-to-point, rooted and all-to-all ops, for any group
// size (a world of one included: NCCL sends to itself inside a group call). Same shape as
// nccl_suite.h (Results, values exact in every dtype); run by nccl_checks.cpp.
#ifdef FASTRUN_HAVE_NCCL

#include <numeric>

#include "gpu/nccl_suite.h"

namespace fastrun::nccl_suite {

inline double p2p_mark(int from, int to, std::size_t i) { return static_cast<double>((from * 7 + to * 3 + static_cast<int>(i % 23)) % 61); }

inline std::vector<Result> check_p2p_and_rooted(Backend& pg, std::size_t count = 37) {
  std::vector<Result> results;
  const int n = pg.size(), r = pg.rank();
  const auto N = static_cast<std::size_t>(n);
  for (DType dtype : all_dtypes()) {
    const std::string dt(dtype_name(dtype));
    for (ReduceOp op : all_ops()) {
      results.push_back(run_check(fmt::format("reduce {} {} root {}", dt, reduce_op_name(op), n - 1), [&] {
        std::vector<double> in, want;
        reduce_inputs(op, dtype, n, r, count, in, want);
        DeviceBuffer buf = to_device(in, dtype);
        pg.reduce(buf.view(count, dtype), ReduceOptions{op, n - 1})->wait();
        return compare(from_device(buf, count, dtype), r == n - 1 ? want : in);
      }));
    }
    results.push_back(run_check(fmt::format("gather {} root 0", dt), [&] {
      std::vector<double> in(count), want(count * N);
      for (std::size_t i = 0; i < count; ++i) in[i] = p2p_mark(r, 0, i);
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) want[static_cast<std::size_t>(q) * count + i] = p2p_mark(q, 0, i);
      DeviceBuffer input = to_device(in, dtype), output = poisoned(count * N * dtype_size(dtype));
      pg.gather(input.view(count, dtype), output.view(count * N, dtype), GatherOptions{0})->wait();
      return r == 0 ? compare(from_device(output, count * N, dtype), want) : std::string();
    }));
    results.push_back(run_check(fmt::format("scatter {} root 0", dt), [&] {
      std::vector<double> in(count * N), want(count);
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) in[static_cast<std::size_t>(q) * count + i] = p2p_mark(0, q, i);
      for (std::size_t i = 0; i < count; ++i) want[i] = p2p_mark(0, r, i);
      DeviceBuffer input = to_device(in, dtype), output = poisoned(count * dtype_size(dtype));
      pg.scatter(input.view(count * N, dtype), output.view(count, dtype), ScatterOptions{0})->wait();
      return compare(from_device(output, count, dtype), want);
    }));
    results.push_back(run_check(fmt::format("all_to_all {}", dt), [&] {
      std::vector<double> in(count * N), want(count * N);
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) {
          in[static_cast<std::size_t>(q) * count + i] = p2p_mark(r, q, i);
          want[static_cast<std::size_t>(q) * count + i] = p2p_mark(q, r, i);
        }
      DeviceBuffer input = to_device(in, dtype), output = poisoned(count * N * dtype_size(dtype));
      pg.all_to_all(input.view(count * N, dtype), output.view(count * N, dtype))->wait();
      return compare(from_device(output, count * N, dtype), want);
    }));
    results.push_back(run_check(fmt::format("all_to_allv {}", dt), [&] {
      auto len = [](int a, int b) { return static_cast<std::size_t>((a + b) % 4 * 5 + 1); };
      std::vector<std::size_t> sc(N), rc(N);
      std::vector<double> in, want;
      for (int q = 0; q < n; ++q) {
        sc[static_cast<std::size_t>(q)] = len(r, q);
        rc[static_cast<std::size_t>(q)] = len(q, r);
        for (std::size_t i = 0; i < len(r, q); ++i) in.push_back(p2p_mark(r, q, i));
        for (std::size_t i = 0; i < len(q, r); ++i) want.push_back(p2p_mark(q, r, i));
      }
      DeviceBuffer input = to_device(in, dtype), output = poisoned(want.size() * dtype_size(dtype));
      pg.all_to_allv(input.view(in.size(), dtype), sc, output.view(want.size(), dtype), rc)->wait();
      return compare(from_device(output, want.size(), dtype), want);
    }));
  }
  if (n > 1) {
    results.push_back(run_check("batch_send_recv ring exchange (1 Mi floats)", [&] {
      const std::size_t big = (1 << 20) + 3;
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      std::vector<double> out(big), want(big);
      for (std::size_t i = 0; i < big; ++i) {
        out[i] = p2p_mark(r, next, i);
        want[i] = p2p_mark(prev, r, i);
      }
      DeviceBuffer send = to_device(out, DType::float32), recv = poisoned(big * 4);
      pg.batch_send_recv({{P2POp::Kind::send, send.view(big, DType::float32), next, 0},
                          {P2POp::Kind::recv, recv.view(big, DType::float32), prev, 0}})
          ->wait();
      return compare(from_device(recv, big, DType::float32), want);
    }));
  }
  results.push_back(run_check("send to self refused with the shared wording", [&] {
    DeviceBuffer a(64);
    try {
      pg.send(a.view(4, DType::float32), r);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      return what.find("is this rank") != std::string::npos ? std::string() : "unexpected text: " + what;
    }
    return std::string("no ConfigError for a send to self");
  }));
  return results;
}

}  // namespace fastrun::nccl_suite

#endif  // FASTRUN_HAVE_NCCL
