// A rank program for the multinode cases (netns_test.sh): the bits of the world group's
// all-reduce, whatever backend `auto` picked (shm on one node, hier across nodes).
//   allreduce_bits            joins, all-reduces order-sensitive inputs of each case below and
//                             prints "bits <case> <fnv-1a of the result> <ok|WRONG> <backend>"
//                             per case: ok when the result is the one-kernel rule's (the shared
//                             kernel over every rank's input in rank order, computed here), so
//                             one node and several must print the same hashes. Exit 9 on WRONG.
//   allreduce_bits --loop F   ignores SIGTERM (so that a survivor of a dead peer is stopped by
//                             its own backend's error, not by the launcher), joins, writes its
//                             pid to F ("%r" = rank), then all-reduces 4 MiB until an op fails:
//                             prints the error to stderr and exits 67.
//   allreduce_bits --mismatch  joins; the last rank broadcasts 64 Ki floats from rank 0 while
//                             the others all-reduce as many: a mismatch the default check must
//                             name on every rank (stalled_op_check.h); prints the error, exit 67
//                             (exit 0 would mean the op "succeeded": the test fails on it).
// Inputs are a function of (rank, index): magnitudes 2^-20..2^20, so float sums depend on order.
#include <unistd.h>

#include <cinttypes>
#include <csignal>
#include <cmath>
#include <type_traits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T> T value(int rank, std::size_t i) {
  const std::uint64_t h = mix((static_cast<std::uint64_t>(rank) << 40) ^ i);
  if constexpr (std::is_floating_point_v<T>) {
    const double u = static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;  // [-1, 1)
    return static_cast<T>(std::ldexp(u, static_cast<int>(h % 41) - 20));
  } else {
    return static_cast<T>(static_cast<std::int64_t>(h));  // wraps: sums overflow, avg truncates
  }
}

std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const std::uint8_t*>(data)[i]) * 1099511628211ULL;
  return h;
}

// All-reduces this rank's inputs of type T; true when the result is the rank-order kernel's.
template <typename T>
bool run_case(fastrun::Context& ctx, const char* name, fastrun::ReduceOp op, std::size_t count) {
  const int n = ctx.world_size();
  std::vector<std::vector<T>> inputs(static_cast<std::size_t>(n), std::vector<T>(count));
  std::vector<const void*> srcs;
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i) inputs[static_cast<std::size_t>(r)][i] = value<T>(r, i);
    srcs.push_back(inputs[static_cast<std::size_t>(r)].data());
  }
  std::vector<T> expected(count);
  fastrun::kernels::reduce(fastrun::dtype_of<T>(), op, expected.data(), nullptr, srcs.data(), n, count);
  if constexpr (std::is_floating_point_v<T>) {
    // The inputs must make the order matter, or this case could not tell a wrong order.
    std::vector<const void*> reversed(srcs.rbegin(), srcs.rend());
    std::vector<T> other(count);
    fastrun::kernels::reduce(fastrun::dtype_of<T>(), op, other.data(), nullptr, reversed.data(), n, count);
    if (op == fastrun::ReduceOp::sum && count > 100 && n > 2 &&
        std::memcmp(other.data(), expected.data(), count * sizeof(T)) == 0) {
      std::printf("bits %s: the inputs do not depend on the order (test defect)\n", name);
      return false;
    }
  }
  std::vector<T> buffer = inputs[static_cast<std::size_t>(ctx.rank())];
  ctx.world().all_reduce(fastrun::view_of(buffer.data(), count), {op})->wait();
  const bool ok = std::memcmp(buffer.data(), expected.data(), count * sizeof(T)) == 0;
  std::printf("bits %s %016" PRIx64 " %s %s\n", name, fnv1a(buffer.data(), count * sizeof(T)), ok ? "ok" : "WRONG",
              ctx.world().backend_name().c_str());
  return ok;
}

int loop(fastrun::Context& ctx, std::string pidfile) {
  if (auto at = pidfile.find("%r"); at != std::string::npos) pidfile.replace(at, 2, std::to_string(ctx.rank()));
  if (std::FILE* f = std::fopen(pidfile.c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  std::vector<float> buffer(1024 * 1024, 1.0f);
  for (;;) ctx.world().all_reduce(fastrun::view_of(buffer.data(), buffer.size()))->wait();
}

int mismatch(fastrun::Context& ctx) {
  std::vector<float> buffer(64 * 1024, 1.0f);
  if (ctx.rank() == ctx.world_size() - 1) {
    ctx.world().broadcast(fastrun::view_of(buffer.data(), buffer.size()), {0})->wait();
  } else {
    ctx.world().all_reduce(fastrun::view_of(buffer.data(), buffer.size()))->wait();
  }
  std::printf("mismatched op returned on rank %d over %s\n", ctx.rank(), ctx.world().backend_name().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool looping = argc == 3 && std::string(argv[1]) == "--loop";
  const bool mismatching = argc == 2 && std::string(argv[1]) == "--mismatch";
  if (looping || mismatching) std::signal(SIGTERM, SIG_IGN);
  try {
    auto ctx = fastrun::join();
    if (looping) return loop(*ctx, argv[2]);
    if (mismatching) return mismatch(*ctx);
    // 300,000 elements: several of the two-level all-reduce's 128 KiB chunks for every dtype, in
    // slices on 2 x 2 ranks (rails, chain_all_reduce.h); 100,001: a last chunk that does not
    // split evenly between a node's ranks; 7: below the rails' size, the leaders alone.
    constexpr std::size_t kCount = 300000;
    bool ok = run_case<float>(*ctx, "float32-sum", fastrun::ReduceOp::sum, kCount);
    ok = run_case<float>(*ctx, "float32-avg", fastrun::ReduceOp::avg, kCount) && ok;
    ok = run_case<float>(*ctx, "float32-max", fastrun::ReduceOp::max, kCount) && ok;
    ok = run_case<double>(*ctx, "float64-sum", fastrun::ReduceOp::sum, kCount) && ok;
    ok = run_case<std::int64_t>(*ctx, "int64-sum", fastrun::ReduceOp::sum, kCount) && ok;
    ok = run_case<std::int32_t>(*ctx, "int32-avg", fastrun::ReduceOp::avg, kCount) && ok;
    ok = run_case<float>(*ctx, "float32-sum-uneven", fastrun::ReduceOp::sum, 100001) && ok;
    ok = run_case<float>(*ctx, "float32-sum-small", fastrun::ReduceOp::sum, 7) && ok;
    std::fflush(stdout);
    return ok ? 0 : 9;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bits: %s\n", e.what());
    return 67;
  }
}
