#pragma once
// The NCCL backend's checks, shared by the Catch2 test (tests/backend/nccl_backend_test.cpp,
// which skips without a GPU) and the GPU check program (nccl_checks.cpp, run by
// tools/gpu_checks.sh). Each check returns a Result instead of asserting, so the program can
// print PASS/FAIL lines and the test can REQUIRE them. Header-only: tests/backend globs *.cpp.
//
// The failure-path checks are in nccl_failure_checks.h.
// Values are chosen to be exact in every dtype (small integers: bf16 holds integers to 256),
// and expectations are computed here, on the host, for any group size n and rank r.
#ifdef FASTRUN_HAVE_NCCL

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/cuda/device_buffer.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/half_float.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/memory_store.h"

namespace fastrun::nccl_suite {

struct Result {
  std::string name;
  bool passed = false;
  std::string detail;
};

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::float32, DType::float64, DType::float16,
                                       DType::bfloat16, DType::int32,   DType::int64};
  return v;
}
inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max,
                                          ReduceOp::product};
  return v;
}

// Host bytes of `values` in `dtype`, and back.
inline std::vector<std::uint8_t> encode(const std::vector<double>& values, DType dtype) {
  std::vector<std::uint8_t> out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    void* p = out.data() + i * dtype_size(dtype);
    const double v = values[i];
    switch (dtype) {
      case DType::float32: { const float x = static_cast<float>(v); std::memcpy(p, &x, sizeof x); break; }
      case DType::float64: { std::memcpy(p, &v, sizeof v); break; }
      case DType::float16: { const auto x = half::float_to_half(static_cast<float>(v)); std::memcpy(p, &x, sizeof x); break; }
      case DType::bfloat16: { const auto x = half::float_to_bf16(static_cast<float>(v)); std::memcpy(p, &x, sizeof x); break; }
      case DType::int32: { const auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, sizeof x); break; }
      case DType::int64: { const auto x = static_cast<std::int64_t>(v); std::memcpy(p, &x, sizeof x); break; }
    }
  }
  return out;
}

inline std::vector<double> decode(const std::vector<std::uint8_t>& bytes, DType dtype) {
  const std::size_t n = bytes.size() / dtype_size(dtype);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const void* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::float32: { float x; std::memcpy(&x, p, sizeof x); out[i] = x; break; }
      case DType::float64: { double x; std::memcpy(&x, p, sizeof x); out[i] = x; break; }
      case DType::float16: { std::uint16_t x; std::memcpy(&x, p, sizeof x); out[i] = half::half_to_float(x); break; }
      case DType::bfloat16: { std::uint16_t x; std::memcpy(&x, p, sizeof x); out[i] = half::bf16_to_float(x); break; }
      case DType::int32: { std::int32_t x; std::memcpy(&x, p, sizeof x); out[i] = x; break; }
      case DType::int64: { std::int64_t x; std::memcpy(&x, p, sizeof x); out[i] = static_cast<double>(x); break; }
    }
  }
  return out;
}

inline DeviceBuffer to_device(const std::vector<double>& values, DType dtype) {
  const auto bytes = encode(values, dtype);
  DeviceBuffer b(bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

inline std::vector<double> from_device(const DeviceBuffer& b, std::size_t count, DType dtype) {
  std::vector<std::uint8_t> bytes(count * dtype_size(dtype));
  b.download(bytes.data(), bytes.size());
  return decode(bytes, dtype);
}

// A device buffer of `bytes` all 0xFF (NaN in every float type, -1 in the integer ones), for
// outputs the collective must overwrite whole: in a world of one, all-reduce and broadcast are
// the identity, so an output that still holds the poison is the proof that a call did nothing.
inline DeviceBuffer poisoned(std::size_t bytes) {
  const std::vector<std::uint8_t> poison(bytes, 0xFF);
  DeviceBuffer b(bytes);
  b.upload(poison.data(), bytes);
  return b;
}

// "" when equal, else the first mismatch.
inline std::string compare(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return fmt::format("size {} != {}", got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return fmt::format("element {}: got {} want {}", i, got[i], want[i]);
  }
  return {};
}

inline bool is_integer(DType t) { return t == DType::int32 || t == DType::int64; }

// Runs `body`, turning an exception or a mismatch text into a failed Result.
inline Result run_check(const std::string& name, const std::function<std::string()>& body) {
  try {
    const std::string mismatch = body();
    return {name, mismatch.empty(), mismatch};
  } catch (const std::exception& e) {
    return {name, false, std::string("threw: ") + e.what()};
  }
}

// A world of one on the nccl backend, made directly (no launcher, no environment).
inline std::unique_ptr<Backend> make_world_of_one(Duration op_timeout, std::shared_ptr<Store> failure_store,
                                                       const std::string& name) {
  GroupSpec spec;
  spec.store = std::make_shared<MemoryStore>();
  spec.rank = 0;
  spec.size = 1;
  spec.global_ranks = {0};
  spec.name = name;
  spec.timeout = std::chrono::seconds(60);
  spec.op_timeout = op_timeout;
  spec.failure_store = std::move(failure_store);
  return backend::find("nccl")(spec);
}

// Rank r's input ((r + 1) + i % 3) and the reduction over n ranks, for all_reduce and reduce.
inline void reduce_inputs(ReduceOp op, DType dtype, int n, int r, std::size_t count, std::vector<double>& in,
                          std::vector<double>& want) {
  in.assign(count, 0);
  want.assign(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const double k = static_cast<double>(i % 3);
    in[i] = (r + 1) + k;
    double sum = 0, prod = 1;
    for (int q = 0; q < n; ++q) { sum += (q + 1) + k; prod *= (q + 1) + k; }
    switch (op) {
      case ReduceOp::sum: want[i] = sum; break;
      case ReduceOp::avg: want[i] = is_integer(dtype) ? std::trunc(sum / n) : sum / n; break;
      case ReduceOp::min: want[i] = 1 + k; break;
      case ReduceOp::max: want[i] = n + k; break;
      case ReduceOp::product: want[i] = prod; break;
    }
  }
}

// --- collectives (any group size) ---

inline std::vector<Result> check_all_reduce(Backend& pg, std::size_t count = 1031) {
  std::vector<Result> results;
  const int n = pg.size(), r = pg.rank();
  for (DType dtype : all_dtypes()) {
    for (ReduceOp op : all_ops()) {
      results.push_back(run_check(fmt::format("all_reduce {} {}", dtype_name(dtype), reduce_op_name(op)), [&] {
        std::vector<double> in, want;
        reduce_inputs(op, dtype, n, r, count, in, want);
        DeviceBuffer buf = to_device(in, dtype);
        WorkHandle w = pg.all_reduce(buf.view(count, dtype), AllReduceOptions{op});
        w->wait();
        if (!w->completed()) return std::string("completed() is false after wait()");
        return compare(from_device(buf, count, dtype), want);
      }));
    }
  }
  return results;
}

inline std::vector<Result> check_broadcast(Backend& pg, std::size_t count = 517) {
  std::vector<Result> results;
  const int root = pg.size() - 1;
  for (DType dtype : all_dtypes()) {
    results.push_back(run_check(fmt::format("broadcast {} root {}", dtype_name(dtype), root), [&] {
      std::vector<double> in(count, 0.0), want(count);
      for (std::size_t i = 0; i < count; ++i) want[i] = 100 + static_cast<double>(i % 100);
      if (pg.rank() == root) in = want;
      DeviceBuffer buf = to_device(in, dtype);
      pg.broadcast(buf.view(count, dtype), BroadcastOptions{root})->wait();
      return compare(from_device(buf, count, dtype), want);
    }));
  }
  return results;
}

inline std::vector<Result> check_all_gather(Backend& pg, std::size_t count = 257) {
  std::vector<Result> results;
  const int n = pg.size(), r = pg.rank();
  for (DType dtype : all_dtypes()) {
    results.push_back(run_check(fmt::format("all_gather {}", dtype_name(dtype)), [&] {
      std::vector<double> in(count), want(count * n);
      for (std::size_t i = 0; i < count; ++i) in[i] = r * 8 + static_cast<double>(i % 8);
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) want[q * count + i] = q * 8 + static_cast<double>(i % 8);
      DeviceBuffer input = to_device(in, dtype);
      DeviceBuffer output = poisoned(count * n * dtype_size(dtype));
      pg.all_gather(input.view(count, dtype), output.view(count * n, dtype))->wait();
      return compare(from_device(output, count * n, dtype), want);
    }));
  }
  return results;
}

inline std::vector<Result> check_reduce_scatter(Backend& pg, std::size_t count = 129) {
  std::vector<Result> results;
  const int n = pg.size(), r = pg.rank();
  for (DType dtype : all_dtypes()) {
    results.push_back(run_check(fmt::format("reduce_scatter {} sum", dtype_name(dtype)), [&] {
      std::vector<double> in(count * n), want(count);
      for (std::size_t j = 0; j < count * n; ++j) in[j] = (r + 1) + static_cast<double>(j % 5);
      for (std::size_t i = 0; i < count; ++i)
        want[i] = n * (n + 1) / 2.0 + n * static_cast<double>((r * count + i) % 5);
      DeviceBuffer input = to_device(in, dtype);
      DeviceBuffer output = poisoned(count * dtype_size(dtype));
      pg.reduce_scatter(input.view(count * n, dtype), output.view(count, dtype), ReduceScatterOptions{ReduceOp::sum})
          ->wait();
      return compare(from_device(output, count, dtype), want);
    }));
  }
  return results;
}

inline std::vector<Result> check_barrier_and_errors(Backend& pg) {
  std::vector<Result> results;
  results.push_back(run_check("barrier", [&] {
    for (int i = 0; i < 3; ++i) pg.barrier()->wait();
    return std::string();
  }));
  results.push_back(run_check("host buffer refused with a pointer to gloo", [&] {
    std::vector<float> host(4, 1.0f);
    try {
      pg.all_reduce(view_of(host.data(), host.size()));
    } catch (const BackendError& e) {
      const std::string what = e.what();
      return what.find("gloo") != std::string::npos ? std::string() : "message lacks 'gloo': " + what;
    }
    return std::string("no BackendError for a host buffer");
  }));
  results.push_back(run_check("all_gather size mismatch refused", [&] {
    DeviceBuffer a(64), b(64);
    try {
      pg.all_gather(a.view(4, DType::float32), b.view(4 * pg.size() + 1, DType::float32));
    } catch (const ConfigError&) {  // the shared shape checks (shape_check.h), as on every backend
      return std::string();
    }
    return std::string("no ConfigError for a wrong output size");
  }));
  results.push_back(run_check("group usable after refused calls", [&] {
    DeviceBuffer buf = to_device({1.0, 2.0}, DType::float32);
    pg.all_reduce(buf.view(2, DType::float32))->wait();
    return compare(from_device(buf, 2, DType::float32), {1.0 * pg.size(), 2.0 * pg.size()});
  }));
  return results;
}

inline std::vector<Result> check_collectives(Backend& pg) {
  std::vector<Result> all;
  for (auto part : {check_all_reduce(pg), check_broadcast(pg), check_all_gather(pg), check_reduce_scatter(pg),
                    check_barrier_and_errors(pg)}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace fastrun::nccl_suite

#endif  // FASTRUN_HAVE_NCCL
