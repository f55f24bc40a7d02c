#include "memory_rate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::bench {
namespace {

// "491520K" -> bytes.
std::size_t parse_cache_size(const std::string& text) {
  std::size_t v = 0, i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') v = v * 10 + static_cast<std::size_t>(text[i++] - '0');
  if (i < text.size() && text[i] == 'K') v <<= 10;
  else if (i < text.size() && text[i] == 'M') v <<= 20;
  return v;
}

}  // namespace

std::size_t last_level_cache_bytes() {
  std::size_t biggest = 0;
  for (int i = 0; i < 16; ++i) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", i));
    std::string text;
    if (!(in >> text)) break;
    biggest = std::max(biggest, parse_cache_size(text));
  }
  return biggest;
}

std::size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib << 10;
  return 0;
}

double add_rate(int threads, std::size_t array_bytes, int passes, int batches) {
  const std::size_t n = std::max<std::size_t>(array_bytes / sizeof(float), static_cast<std::size_t>(threads));
  // Filled by each thread over its own share, so that first-touch places the pages as the
  // passes will use them.
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
  double best = 1e30;
  for (int batch = -1; batch < batches; ++batch) {  // batch -1 fills the arrays (untimed)
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    // Each thread times its own passes and the slowest counts: thread start and join (tens of
    // microseconds on a busy machine) would swamp the passes over small arrays.
    std::vector<double> took(static_cast<std::size_t>(threads), 0.0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t lo = n * static_cast<std::size_t>(t) / static_cast<std::size_t>(threads);
        const std::size_t hi = n * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(threads);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        if (batch < 0) {
          std::fill(a.get() + lo, a.get() + hi, 1.0f);
          std::fill(b.get() + lo, b.get() + hi, 2.0f);
          std::fill(c.get() + lo, c.get() + hi, 0.0f);
          return;
        }
        const void* srcs[2] = {a.get() + lo, b.get() + lo};
        const auto t0 = std::chrono::steady_clock::now();
        for (int p = 0; p < passes; ++p)
          kernels::reduce(DType::float32, ReduceOp::sum, c.get() + lo, nullptr, srcs, 2, hi - lo);
        took[static_cast<std::size_t>(t)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    if (batch >= 0) best = std::min(best, *std::max_element(took.begin(), took.end()));
  }
  return 3.0 * static_cast<double>(n * sizeof(float)) * passes / best;
}

}  // namespace fastrun::bench
