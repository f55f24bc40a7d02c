// fastrun-bench ddp: gradient synchronisation of a large float model through DDP (bucketed,
// launched during a simulated backward pass) against one fused all-reduce of the same bytes.
//
//   fastrun --nproc 2 fastrun-bench ddp [--params 100000000] [--layers 50] [--iters 3]
//           [--bucket-mb 25] [--first-bucket-mb 1] [--compute-us 0] [--backend gloo]
//
// The model is `layers` (weight, bias) pairs summing to --params floats; the gradients live in
// one contiguous buffer, so the fused figure is a single in-place averaging all-reduce over it. A DDP
// iteration marks the gradients ready in reverse registration order (as backward would),
// optionally spinning --compute-us microseconds before each one to stand in for the backward
// compute, then calls finish(). Reported: best and median seconds of each, DDP's overhead over
// fused, and the per-bucket timeline of the last DDP iteration. --layout separate gives each
// tensor its own gradient allocation, so DDP copies through its flat buckets (the general case);
// the default, contiguous, lets DDP reduce the buckets in place. Memory per rank: 8 bytes per
// parameter (values, gradients), plus 8 more with --layout separate (gradients, buckets).
// --mode overlap compares DDP with compute alone and compute + a blocking all-reduce instead
// (ddp_overlap.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_registry.h"
#include "ddp_bench.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/tools/flags/number_flags.h"

namespace fastrun::bench::ddp {

using Clock = std::chrono::steady_clock;
namespace {

// 100000, 100K, 2.5M, 1G (decimal: K = 1e3), from 1 to 1e12.
std::size_t parse_count(const std::string& flag, const std::string& v) {
  const char last = v.empty() ? '\0' : v.back();
  const double mult = last == 'K' ? 1e3 : last == 'M' ? 1e6 : last == 'G' ? 1e9 : 1;
  const auto x = text::to_decimal(mult == 1 ? v : v.substr(0, v.size() - 1));
  if (!x || *x * mult < 1 || *x * mult > 1e12)
    throw fastrun::ConfigError(
        fmt::format("{} '{}': expected a number from 1 to 1e12 (suffix K, M or G allowed)", flag, v));
  return static_cast<std::size_t>(*x * mult);
}

// --name WORD, one of two: sets `flag` to whether WORD is the second.
void either(CLI::App& app, const std::string& name, const std::string& first, const std::string& second, bool& flag,
            const std::string& help) {
  app.add_option_function<std::string>(name, [&flag, second](const std::string& v) { flag = v == second; }, help)
      ->check(CLI::IsMember({first, second}))
      ->type_name(first + "|" + second)
      ->default_str(flag ? second : first);
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("DDP bucketed gradient sync vs one fused all-reduce", "fastrun-bench ddp");
  auto count = [&](const std::string& name, std::size_t& into, const std::string& help, const std::string& shown) {
    app.add_option_function<std::string>(name, [&into, name](const std::string& v) { into = parse_count(name, v); }, help)
        ->type_name("N")
        ->default_str(shown);
  };
  count("--params", a.params, "float32 parameters in all, K/M/G suffix allowed", "100M");
  count("--layers", a.layers, "(weight, bias) pairs they are split into", "50");
  flags::integer(app, "--iters", a.iters, "timed steps", 1, 1000000);
  flags::decimal(app, "--bucket-mb", a.bucket_mb, "DDP bucket cap in MiB", 0, 1 << 20);
  flags::decimal(app, "--first-bucket-mb", a.first_bucket_mb, "cap of the first bucket, MiB", 0, 1 << 20);
  flags::decimal(app, "--compute-us", a.compute_us, "simulated backward time per layer, us", 0, 1e9);
  app.add_option("--backend", a.backend, "gloo|shm|auto")->capture_default_str();
  either(app, "--layout", "contiguous", "separate", a.separate, "one gradient arena, or one allocation per tensor");
  either(app, "--reduce", "sum", "avg", a.ddp_avg, "pre-divide and sum, or let the backend average");
  either(app, "--mode", "fused", "overlap", a.overlap,
         "DDP vs one fused all-reduce, or vs compute alone and compute + a blocking all-reduce "
         "(docs/ddp.md, \"Overlap\")");
  app.add_option("--backends", a.backends, "overlap mode: backends to compare, comma-separated")->capture_default_str();
  either(app, "--compute", "busy", "sleep", a.sleep,
         "overlap mode: backward as passes over the gradients, or as a wait that leaves the CPU idle, as a GPU "
         "backward would");
  flags::decimal(app, "--compute-ratio", a.compute_ratio, "overlap mode: backward time / one blocking all-reduce", 0, 1000);
  flags::parse(app, argc, argv);
  return a;
}

void spin_for(double us) {
  if (us <= 0) return;
  const auto end = Clock::now() + std::chrono::duration<double, std::micro>(us);
  while (Clock::now() < end) {
  }
}

}  // namespace

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

DdpOptions ddp_options(const Args& a) {
  DdpOptions options;
  options.bucket_bytes = static_cast<std::size_t>(a.bucket_mb * (1 << 20));
  options.first_bucket_bytes = static_cast<std::size_t>(a.first_bucket_mb * (1 << 20));
  if (a.ddp_avg) options.reduce = ReduceOp::avg;
  return options;
}

Model make_model(const Args& a) {
  Model m;
  // The model: `layers` (weight, bias) pairs over one contiguous gradient buffer.
  const std::size_t bias = a.params / a.layers > 4096 ? 1024 : 0;
  auto& sizes = m.sizes;
  std::size_t left = a.params;
  for (std::size_t l = 0; l < a.layers && left > 0; ++l) {
    std::size_t w = l + 1 == a.layers ? left - std::min(left, bias) : std::min(left, a.params / a.layers - bias);
    sizes.push_back(w);
    left -= w;
    if (bias && left >= bias) sizes.push_back(bias), left -= bias;
  }
  if (left) sizes.push_back(left);
  // Contiguous: every gradient is a slice of `grads` (one arena, as frameworks often allocate),
  // and the fused all-reduce runs on it. Separate: one allocation per tensor; `grads` is then
  // only the fused baseline's buffer.
  auto& values = m.values;
  auto& grads = m.grads;
  auto& own_grads = m.own_grads;
  auto& params = m.params;
  values.assign(a.params, 1.0f);
  grads.assign(a.params, 0.0f);
  own_grads.reserve(sizes.size());
  std::size_t off = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    float* g = grads.data() + off;
    if (a.separate) g = own_grads.emplace_back(sizes[k]).data();
    params.push_back({fmt::format("p{}", k), fastrun::view_of(values.data() + off, sizes[k]), fastrun::view_of(g, sizes[k])});
    off += sizes[k];
  }
  return m;
}

void Model::fill(float v) {
  std::fill(grads.begin(), grads.end(), v);
  for (auto& g : own_grads) std::fill(g.begin(), g.end(), v);
}

namespace {

int run_ddp_bench(int argc, char** argv) {
  const Args a = parse(argc, argv);
  fastrun::JoinOptions jo;
  jo.backend = a.backend;
  auto ctx = fastrun::join(jo);
  auto& world = ctx->world();
  const bool lead = ctx->rank() == 0;

  if (a.overlap) return run_overlap(*ctx, a);
  Model m = make_model(a);
  auto& sizes = m.sizes;
  auto& grads = m.grads;
  auto& params = m.params;
  fastrun::DdpOptions options = ddp_options(a);
  fastrun::DistributedDataParallel ddp(world, params, options);
  auto fill = [&] { m.fill(static_cast<float>(ctx->rank() + 1)); };

  if (lead)
    std::printf("ddp bench: %d ranks, backend %s, %zu float parameters (%.1f MB) in %zu %s tensors, %zu buckets "
                "(first %.2f MB, cap %.2f MB), compute %.0f us per tensor, %d iterations\n",
                world.size(), world.backend_name().c_str(), a.params, a.params * 4.0 / 1e6, sizes.size(),
                a.separate ? "separate" : "contiguous", ddp.buckets().size(), a.first_bucket_mb, a.bucket_mb,
                a.compute_us, a.iters);

  // Fused: one averaging all-reduce over the whole gradient buffer — the same result DDP leaves
  // in the gradients — after the same simulated compute (without buckets nothing can start
  // before backward ends).
  // Fused and DDP iterations alternate, so a noisy neighbour (shared CI cores) slows both alike.
  std::vector<double> fused, bucketed;
  const auto& first = params.front().grad;
  const auto& last = params.back().grad;
  const float expect = static_cast<float>(world.size() + 1) / 2;
  for (int it = -1; it < a.iters; ++it) {  // iteration -1: warm-up
    fill();
    world.barrier()->wait();
    auto t0 = Clock::now();
    for (std::size_t k = sizes.size(); k-- > 0;) spin_for(a.compute_us);
    world.all_reduce(fastrun::view_of(grads.data(), grads.size()), {fastrun::ReduceOp::avg})->wait();
    auto t1 = Clock::now();
    if (it >= 0) fused.push_back(secs(t0, t1));
    if (grads.front() != expect || grads.back() != expect)
      throw fastrun::Error(fmt::format("fused all-reduce gave {} (expected {})", grads.front(), expect));

    fill();
    world.barrier()->wait();
    t0 = Clock::now();
    for (std::size_t k = sizes.size(); k-- > 0;) {
      spin_for(a.compute_us);
      ddp.mark_ready(k);
    }
    ddp.finish();
    t1 = Clock::now();
    if (it >= 0) bucketed.push_back(secs(t0, t1));
    const float got_first = static_cast<float*>(first.data)[0], got_last = static_cast<float*>(last.data)[last.count - 1];
    if (got_first != expect || got_last != expect)
      throw fastrun::Error(fmt::format("DDP gave {} and {} (expected {})", got_first, got_last, expect));
  }

  if (lead) {
    const double f = median(fused), d = median(bucketed);
    const double bytes = a.params * 4.0;
    std::printf("\n%-22s %10s %10s %12s\n", "", "best s", "median s", "algbw GB/s");
    std::printf("%-22s %10.4f %10.4f %12.3f\n", "fused all-reduce", *std::min_element(fused.begin(), fused.end()), f,
                bytes / f / 1e9);
    std::printf("%-22s %10.4f %10.4f %12.3f\n", "DDP buckets", *std::min_element(bucketed.begin(), bucketed.end()), d,
                bytes / d / 1e9);
    std::printf("DDP overhead over fused (medians): %+.1f%%\n", 100.0 * (d - f) / f);
    std::printf("\nper bucket, last DDP iteration (ms from the first mark_ready):\n");
    std::printf("%6s %7s %9s %9s %9s %10s %9s %9s\n", "bucket", "params", "MB", "in place", "ready", "launched",
                "done", "span");
    for (const auto& s : ddp.last_step_stats())
      std::printf("%6zu %7zu %9.2f %9s %9.1f %10.1f %9.1f %9.1f\n", s.index, s.params, s.bytes / 1e6,
                  s.in_place ? "yes" : "no", s.ready_s * 1e3, s.launched_s * 1e3, s.done_s * 1e3,
                  (s.done_s - s.launched_s) * 1e3);
    std::fflush(stdout);
  }
  world.barrier()->wait();
  return 0;
}

const Registration reg{"ddp", "DDP bucketed gradient sync vs one fused all-reduce", &run_ddp_bench};

}  // namespace
}  // namespace fastrun::bench::ddp
