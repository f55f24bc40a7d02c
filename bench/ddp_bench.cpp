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
#include "fastrun/runtime/context.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/error.h"

namespace fastrun::bench::ddp {

using Clock = std::chrono::steady_clock;
namespace {

std::size_t parse_count(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double mult = 1;
  if (used + 1 == v.size() && (v.back() == 'M' || v.back() == 'K' || v.back() == 'G'))
    mult = v.back() == 'K' ? 1e3 : v.back() == 'M' ? 1e6 : 1e9, ++used;
  if (used == 0 || used != v.size() || x <= 0)
    throw fastrun::ConfigError(fmt::format("{} '{}': expected a positive number (suffix K, M or G allowed)", flag, v));
  return static_cast<std::size_t>(x * mult);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) throw fastrun::ConfigError(fmt::format("{} needs a value", flag));
    std::string v = argv[++i];
    if (flag == "--params") a.params = parse_count(flag, v);
    else if (flag == "--layers") a.layers = parse_count(flag, v);
    else if (flag == "--iters") a.iters = static_cast<int>(parse_count(flag, v));
    else if (flag == "--bucket-mb") a.bucket_mb = std::stod(v);
    else if (flag == "--first-bucket-mb") a.first_bucket_mb = std::stod(v);
    else if (flag == "--compute-us") a.compute_us = std::stod(v);
    else if (flag == "--backend") a.backend = v;
    else if (flag == "--mode") {
      if (v != "fused" && v != "overlap")
        throw fastrun::ConfigError(fmt::format("--mode '{}': accepted fused, overlap", v));
      a.overlap = v == "overlap";
    } else if (flag == "--backends") a.backends = v;
    else if (flag == "--compute-ratio") a.compute_ratio = std::stod(v);
    else if (flag == "--compute") {
      if (v != "busy" && v != "sleep") throw fastrun::ConfigError(fmt::format("--compute '{}': accepted busy, sleep", v));
      a.sleep = v == "sleep";
    }
    else if (flag == "--layout" || flag == "--reduce") {
      const bool layout = flag == "--layout";
      if (layout ? (v != "contiguous" && v != "separate") : (v != "sum" && v != "avg"))
        throw fastrun::ConfigError(fmt::format("{} '{}': accepted {}", flag, v, layout ? "contiguous, separate" : "sum, avg"));
      (layout ? a.separate : a.ddp_avg) = layout ? v == "separate" : v == "avg";
    }
    else
      throw fastrun::ConfigError(fmt::format("unknown flag '{}': accepted --params N --layers L --iters K --bucket-mb M "
                                             "--first-bucket-mb M --compute-us U --backend gloo|shm|auto --layout contiguous|separate --reduce sum|avg "
                                             "--mode fused|overlap --backends LIST --compute busy|sleep --compute-ratio R",
                                             flag));
  }
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

const Registration reg{
    "ddp", "DDP bucketed gradient sync vs one fused all-reduce", &run_ddp_bench,
    "  --params N                 float32 parameters in all, K/M/G suffix allowed (default 100M)\n"
    "  --layers L                 (weight, bias) pairs they are split into (default 50)\n"
    "  --iters K                  timed steps (default 3)\n"
    "  --bucket-mb M              DDP bucket cap in MiB (default 25)\n"
    "  --first-bucket-mb M        cap of the first bucket (default 1)\n"
    "  --compute-us U             simulated backward time per layer (default 0)\n"
    "  --backend gloo|shm|auto    (default gloo)\n"
    "  --layout contiguous|separate  one gradient arena, or one allocation per tensor (default contiguous)\n"
    "  --reduce sum|avg           pre-divide and sum, or let the backend average (default sum)\n"
    "  --mode fused|overlap       DDP vs one fused all-reduce (default), or vs compute alone and\n"
    "                             compute + a blocking all-reduce (docs/ddp.md, \"Overlap\")\n"
    "  --backends LIST            overlap mode: backends to compare, comma-separated (default shm,gloo)\n"
    "  --compute busy|sleep       overlap mode: backward as passes over the gradients, or as a wait\n"
    "                             that leaves the CPU idle, as a GPU backward would (default busy)\n"
    "  --compute-ratio R          overlap mode: backward time / one blocking all-reduce (default 1)\n"};

}  // namespace
}  // namespace fastrun::bench::ddp
