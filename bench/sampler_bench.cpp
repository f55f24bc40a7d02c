// fastrun-bench sampler: indices per second per rank, epoch build time and memory of the
// materialized (Fisher–Yates) and lazy (Feistel) orders. A printed table, not a timed test.
#include <sys/resource.h>

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_registry.h"
#include "fastrun/tools/flags/number_flags.h"
#include "fastrun/samplers/random_sampler.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace fastrun::samplers;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time of this thread: on a shared machine the wall-clock rate understates one core's rate.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::uint64_t maxrss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string human_bytes(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB"};
  int i = 0;
  while (b >= 1024 && i < 3) b /= 1024, ++i;
  return fmt::format("{:.1f} {}", b, unit[i]);
}

// Builds rank 0's sampler of `ranks`, times the epoch's order, then draws up to `limit` indices.
void run_one(const char* kind, std::uint64_t n, bool lazy, int ranks, std::uint64_t limit) {
  const std::uint64_t rss0 = maxrss_bytes();
  const auto t0 = Clock::now();
  std::uint64_t checksum = 0, drawn = 0, order_bytes = 0;
  double build_s = 0, draw_s = 0, build_cpu = 0, draw_cpu = 0;
  const double c0 = thread_cpu_seconds();
  auto body = [&](ReproducibleSampler& s) {
    s.set_distributed(ranks, 0, true);
    s.set_epoch(1);
    order_bytes = s.order().bytes();  // builds the epoch's order
    build_s = seconds_since(t0);
    build_cpu = thread_cpu_seconds() - c0;
    std::vector<std::uint64_t> buf(4096);
    const auto t1 = Clock::now();
    const double c1 = thread_cpu_seconds();
    while (drawn < limit) {
      const std::size_t k = s.next_into(buf.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), limit - drawn)));
      if (k == 0) break;
      for (std::size_t i = 0; i < k; ++i) checksum += buf[i];
      drawn += k;
    }
    draw_s = seconds_since(t1);
    draw_cpu = thread_cpu_seconds() - c1;
  };
  if (lazy) {
    LazyRandomSampler s(n, 7);
    body(s);
  } else {
    RandomSampler s(n, true, 7);
    body(s);
  }
  const std::uint64_t rss1 = maxrss_bytes();
  fmt::print("{:<13} {:>14} {:>6} {:>8.3f} {:>8.3f} {:>13} {:>9.1f} {:>9.1f} {:>11} {:>11}   ({:x})\n", kind, n,
             ranks, build_s, build_cpu, drawn, static_cast<double>(drawn) / draw_s / 1e6,
             static_cast<double>(drawn) / draw_cpu / 1e6, human_bytes(static_cast<double>(order_bytes)),
             human_bytes(static_cast<double>(rss1 > rss0 ? rss1 - rss0 : 0)), checksum & 0xffff);
}

int run_sampler(int argc, char** argv) {
  int ranks = 8;
  std::uint64_t limit = 100000000;  // indices drawn per row at most
  bool quick = false;
  CLI::App app("sampler throughput, epoch build time and memory", "fastrun-bench sampler");
  fastrun::flags::integer(app, "--ranks", ranks, "world size the sampler splits for", 1, 1 << 20);
  fastrun::flags::integer(app, "--limit", limit, "indices drawn per row at most", 1, INT64_MAX);
  app.add_flag("--quick", quick, "epochs of 10^7 instead of 10^8");
  fastrun::flags::parse(app, argc, argv);
  const std::uint64_t big = quick ? 10000000ull : 100000000ull;
  fmt::print("sampler: rank 0 of {} with pad; build = construct + the epoch's order; rate = next_into(4096) per rank;\n"
             "M/s cpu = indices per second of this thread's CPU time (one core), M/s wall = per elapsed second\n", ranks);
  fmt::print("{:<13} {:>14} {:>6} {:>8} {:>8} {:>13} {:>9} {:>9} {:>11} {:>11}\n", "order", "n", "ranks", "build s",
             "build cpu", "drawn", "M/s wall", "M/s cpu", "order bytes", "maxrss +");
  for (int R : {1, ranks}) {
    run_one("materialized", 1000000, false, R, limit);
    run_one("lazy", 1000000, true, R, limit);
  }
  for (int R : {1, ranks}) {
    run_one("materialized", big, false, R, limit);
    run_one("lazy", big, true, R, limit);
  }
  for (int R : {1, ranks}) run_one("lazy", 10000000000ull, true, R, limit);
  return 0;
}

fastrun::bench::Registration reg{"sampler", "sampler throughput, epoch build time and memory", &run_sampler};

}  // namespace
