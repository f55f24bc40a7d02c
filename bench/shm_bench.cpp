// fastrun-bench shm: collectives of one backend on N ranks forked by the bench itself (no
// launcher needed), with the memory bandwidth of this machine for reference. Prints one table
// per op: size, time per op, algbw and busbw (nccl-tests definitions; docs/backend-shm.md, "Benchmarks").
//   fastrun-bench shm [--nproc N] [--backend shm|gloo] [--op allreduce|allgather|broadcast|
//                      reducescatter|object|stream|all] [--min BYTES] [--max BYTES] [--dtype float32|...]
//                     [--pin]   (pin rank r to the r-th CPU)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench_registry.h"
#include "fastrun/tools/flags/number_flags.h"
#include "forked_group.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int nproc = 2;
  std::string backend = "shm";
  std::string op = "all";
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = 256u << 20;
  DType dtype = DType::float32;
  bool pin = false;  // pin rank r to the r-th usable CPU (round robin)
};

const DType kDTypes[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64};
const std::vector<std::string> kOps{"allreduce", "allgather", "broadcast", "reducescatter", "object", "stream", "all"};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("collectives of one backend on N self-forked ranks", "fastrun-bench shm");
  flags::integer(app, "--nproc", a.nproc, "ranks to fork", 1, 1024);
  app.add_option("--backend", a.backend, "shm or gloo")->capture_default_str();
  flags::choice(app, "--op", a.op, "which collective", kOps);
  flags::integer(app, "--min", a.min_bytes, "smallest message, bytes", 1, std::int64_t{1} << 40);
  flags::integer(app, "--max", a.max_bytes, "largest message, bytes", 1, std::int64_t{1} << 40);
  std::vector<std::string> dtypes;
  for (DType t : kDTypes) dtypes.emplace_back(dtype_name(t));
  std::string dtype(dtype_name(a.dtype));
  flags::choice(app, "--dtype", dtype, "element type", dtypes);
  app.add_flag("--pin", a.pin, "pin rank r to the r-th usable CPU");
  flags::parse(app, argc, argv);
  for (DType t : kDTypes)
    if (dtype_name(t) == dtype) a.dtype = t;
  return a;
}

// Single-core memory bandwidth: memcpy of 256 MiB, best of 3 (the reference the targets cite).
double memcpy_gbps() {
  const std::size_t bytes = 256u << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

double time_op(Backend& g, std::size_t iters, const std::function<void()>& op) {
  for (int w = 0; w < 3; ++w) op();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    g.barrier()->wait();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iters; ++i) op();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters));
  }
  return best;
}

void run_rank(const Args& a, int rank, const std::string& address, const std::string& run_id) {
  if (a.pin) pin_to_cpu(rank);  // forked_group.h
  auto g = forked_group(a.backend, rank, a.nproc, address, run_id);
  const std::size_t es = dtype_size(a.dtype);
  const double n = a.nproc;
  auto say = [&](const std::string& s) {
    if (rank == 0) std::fputs(s.c_str(), stdout), std::fflush(stdout);
  };
  auto header = [&](const char* op) {
    say(fmt::format("\n{} ({} ranks, backend {}, {})\n{:>12} {:>12} {:>12} {:>12}\n", op, a.nproc, a.backend,
                    dtype_name(a.dtype), "bytes", "time_us", "algbw_GB/s", "busbw_GB/s"));
  };
  auto row = [&](std::size_t bytes, double secs, double factor) {
    const double alg = static_cast<double>(bytes) / secs / 1e9;
    say(fmt::format("{:>12} {:>12.2f} {:>12.2f} {:>12.2f}\n", bytes, secs * 1e6, alg, alg * factor));
  };
  auto iters_for = [](std::size_t bytes) {
    return std::clamp<std::size_t>((std::size_t{256} << 20) / std::max<std::size_t>(bytes, 1) / 4, 3, 20000);
  };
  auto sizes = [&] {
    std::vector<std::size_t> s;
    for (std::size_t b = a.min_bytes; b <= a.max_bytes; b *= 4) s.push_back(b / es * es);
    return s;
  };
  const bool all = a.op == "all";
  if (all || a.op == "allreduce") {
    header("all_reduce sum");
    for (std::size_t bytes : sizes()) {
      std::vector<char> buf(bytes, 0);
      BufferView v{buf.data(), bytes / es, a.dtype};
      row(bytes, time_op(*g, iters_for(bytes), [&] { g->all_reduce(v)->wait(); }), 2 * (n - 1) / n);
    }
  }
  if (all || a.op == "allgather") {
    header("all_gather (bytes = total output)");
    for (std::size_t bytes : sizes()) {
      const std::size_t per = std::max<std::size_t>(1, bytes / es / static_cast<std::size_t>(a.nproc));
      std::vector<char> in(per * es, 0), out(per * es * static_cast<std::size_t>(a.nproc), 0);
      BufferView vi{in.data(), per, a.dtype}, vo{out.data(), per * static_cast<std::size_t>(a.nproc), a.dtype};
      row(out.size(), time_op(*g, iters_for(bytes), [&] { g->all_gather(vi, vo)->wait(); }), (n - 1) / n);
    }
  }
  if (all || a.op == "broadcast") {
    header("broadcast from rank 0");
    for (std::size_t bytes : sizes()) {
      std::vector<char> buf(bytes, 0);
      BufferView v{buf.data(), bytes / es, a.dtype};
      row(bytes, time_op(*g, iters_for(bytes), [&] { g->broadcast(v)->wait(); }), 1.0);
    }
  }
  if (all || a.op == "reducescatter") {
    header("reduce_scatter sum (bytes = total input)");
    for (std::size_t bytes : sizes()) {
      const std::size_t per = std::max<std::size_t>(1, bytes / es / static_cast<std::size_t>(a.nproc));
      std::vector<char> in(per * es * static_cast<std::size_t>(a.nproc), 0), out(per * es, 0);
      BufferView vi{in.data(), per * static_cast<std::size_t>(a.nproc), a.dtype}, vo{out.data(), per, a.dtype};
      row(in.size(), time_op(*g, iters_for(bytes), [&] { g->reduce_scatter(vi, vo)->wait(); }), (n - 1) / n);
    }
  }
  if (all || a.op == "object") {
    // all_gather_object's protocol (docs/runtime.md, "Object collectives"): all-gather the int64 sizes, then the
    // payloads padded to the largest; here a 100-byte payload.
    std::int64_t size = 100, sizes_out[64];
    std::vector<std::uint8_t> payload(100, static_cast<std::uint8_t>(rank)), all_out(100 * static_cast<std::size_t>(a.nproc));
    const double secs = time_op(*g, 20000, [&] {
      g->all_gather(view_of(&size, 1), view_of(sizes_out, static_cast<std::size_t>(a.nproc)))->wait();
      g->all_gather(BufferView{payload.data(), 25, DType::int32}, BufferView{all_out.data(), 25 * static_cast<std::size_t>(a.nproc), DType::int32})->wait();
    });
    say(fmt::format("\nobject all-gather protocol, 100-byte objects ({} ranks, {}): {:.2f} us\n", a.nproc, a.backend, secs * 1e6));
  }
  if (all || a.op == "stream") {
    // The floor under any in-place all-reduce: each rank must read and write its own buffer at
    // least once. All ranks stream at once, sharing the memory bus (and, with more ranks than
    // CPUs, the cores), and the row shows the busbw an all-reduce would reach if that were its
    // only cost, so it bounds the all_reduce rows; with 2 and 4 ranks it bounds their ratio.
    header("stream floor: every rank adds 1 to its own float32 buffer in place (busbw as all_reduce)");
    for (std::size_t bytes : sizes()) {
      std::vector<float> buf(bytes / sizeof(float), 0.0f);
      double secs = time_op(*g, iters_for(bytes), [&] {
        for (float& x : buf) x += 1.0f;
        asm volatile("" : : "r"(buf.data()) : "memory");  // the stores are the point: keep them
      });
      g->all_reduce(BufferView{&secs, 1, DType::float64, DeviceKind::cpu}, {ReduceOp::max})->wait();
      row(bytes, secs, 2 * (n - 1) / n);
    }
  }
  g->barrier()->wait();
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!backend::available(a.backend)) throw ConfigError(fmt::format("backend '{}' is not built", a.backend));
  std::printf("memcpy bandwidth (one core, 256 MiB): %.1f GB/s\n", memcpy_gbps());
  std::fflush(stdout);
  return run_forked_ranks(a.nproc, "bench", [&](int r, const std::string& address, const std::string& run_id) {
    run_rank(a, r, address, run_id);
  });
}

const Registration reg{"shm", "collectives of one backend on N self-forked ranks (--nproc N --backend shm|gloo)", &run};

}  // namespace
}  // namespace fastrun::bench
