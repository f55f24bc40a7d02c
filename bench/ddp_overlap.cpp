// fastrun-bench ddp --mode overlap: does DDP hide its communication behind the backward pass?
//
//   fastrun --nproc 2 fastrun-bench ddp --mode overlap [--params 25M] [--layers 50] [--iters 5]
//           [--backends shm,gloo] [--compute busy|sleep] [--compute-ratio 1]
//
// The backward pass is simulated per tensor, in reverse registration order, each tensor's share
// proportional to its size, and DDP's mark_ready follows each one. Its length is calibrated on
// the first backend: compute-ratio x one blocking averaging all-reduce of all the gradients.
//   busy:  passes over the tensor's gradients, 16 dependent multiply-adds per element (values
//          unchanged), so the backward keeps a core busy as a CPU backward would;
//   sleep: a wait of the same length, leaving the CPU idle as a GPU backward leaves the host.
// Per backend (the same compute for all): compute alone, the all-reduce alone, compute then one
// blocking all-reduce (no overlap possible), and DDP. With full overlap DDP's step approaches
// max(compute, all-reduce); "hidden" is the share of the all-reduce that DDP took off the step,
// (compute + all-reduce - DDP) / all-reduce. --backend and --compute-us do not apply here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ddp_bench.h"
#include "fastrun/runtime/error.h"

namespace fastrun::bench::ddp {
namespace {

using Clock = std::chrono::steady_clock;

// x*0.5 + v*0.5 == v exactly while x == v (small integers): the gradient keeps its value, the
// compiler cannot drop the chain (it does not know x == v), and the work is arithmetic, not
// memory traffic that would compete with the all-reduce for bandwidth.
void busy_pass(float* g, std::size_t n, float v) {
  const float half_v = 0.5f * v;
  for (std::size_t i = 0; i < n; ++i) {
    float x = g[i];
    for (int k = 0; k < 16; ++k) x = x * 0.5f + half_v;
    g[i] = x;
  }
}

struct Compute {
  bool sleep = false;
  double passes = 0;   // busy: passes over every gradient per step
  double seconds = 0;  // the whole backward (sleep: exact; busy: as calibrated)
  std::size_t total = 1;
  float value = 0;

  void tensor(const DdpParameter& p) const {
    if (sleep) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds * static_cast<double>(p.grad.count) /
                                                                 static_cast<double>(total)));
      return;
    }
    auto* g = static_cast<float*>(p.grad.data);
    for (double left = passes; left > 0; left -= 1)
      busy_pass(g, static_cast<std::size_t>(static_cast<double>(p.grad.count) * std::min(1.0, left)), value);
  }
  void all(const Model& m) const {
    for (std::size_t k = m.params.size(); k-- > 0;) tensor(m.params[k]);
  }
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item != "shm" && item != "gloo")
      throw ConfigError(fmt::format("--backends '{}': '{}' is not a CPU backend; accepted shm, gloo", list, item));
    out.push_back(item);
  }
  if (out.empty()) throw ConfigError("--backends '': accepted a comma-separated list of shm, gloo");
  return out;
}

struct Row {
  std::string backend;
  std::size_t buckets = 0;
  double compute = 0, allreduce = 0, serial = 0, ddp = 0;
  std::vector<DdpBucketStats> timeline;  // of the last DDP step
};

}  // namespace

int run_overlap(Context& ctx, const Args& a) {
  if (a.compute_ratio <= 0)
    throw ConfigError(fmt::format("--compute-ratio {}: expected a positive number", a.compute_ratio));
  const std::vector<std::string> backends = split(a.backends);
  Model m = make_model(a);
  const float mine = static_cast<float>(ctx.rank() + 1);
  const auto fill = [&] { m.fill(mine); };
  std::vector<int> everyone;
  for (int r = 0; r < ctx.world_size(); ++r) everyone.push_back(r);
  const float expect = static_cast<float>(ctx.world_size() + 1) / 2;
  const auto check = [&](const char* what, const std::string& backend) {
    for (const auto& p : m.params) {
      const auto* g = static_cast<const float*>(p.grad.data);
      if (g[0] != expect || g[p.grad.count - 1] != expect)
        throw Error(fmt::format("{} on {}: gradient {} holds {} (expected {})", what, backend, p.name, g[0], expect));
    }
  };

  Compute compute;
  compute.sleep = a.sleep;
  compute.total = a.params;
  compute.value = mine;
  std::vector<Row> rows;
  for (const std::string& backend : backends) {
    auto group = ctx.new_group(everyone, backend);
    DistributedDataParallel ddp(*group, m.params, ddp_options(a));
    Row row{backend, ddp.buckets().size(), 0, 0, 0, 0, {}};
    // The gradients as one all-reduce: the arena (contiguous) or each tensor's own (separate).
    const auto blocking_all_reduce = [&] {
      if (a.separate) {
        std::vector<WorkHandle> works;
        for (const auto& p : m.params) works.push_back(group->all_reduce(p.grad, {ReduceOp::avg}));
        for (auto& w : works) w->wait();
      } else {
        group->all_reduce(view_of(m.grads.data(), m.grads.size()), {ReduceOp::avg})->wait();
      }
    };
    if (rows.empty()) {
      // Calibrate once, on the first backend: the backward is compute_ratio x its all-reduce.
      std::vector<double> ar;
      for (int i = 0; i < 3; ++i) {
        fill();
        group->barrier()->wait();
        const auto t0 = Clock::now();
        blocking_all_reduce();
        ar.push_back(secs(t0, Clock::now()));
      }
      compute.seconds = a.compute_ratio * median(ar);
      if (!a.sleep) {
        fill();
        compute.passes = 1;
        compute.all(m);  // warm
        const auto t0 = Clock::now();
        compute.all(m);
        const double pass = secs(t0, Clock::now());
        // Every rank runs the same passes (the slowest rank's count).
        double passes = compute.seconds / std::max(pass, 1e-9);
        ctx.world().all_reduce(view_of(&passes, 1), {ReduceOp::max})->wait();
        compute.passes = passes;
      }
    }
    std::vector<double> c, ar, serial, overlapped;
    for (int it = -1; it < a.iters; ++it) {  // -1: warm-up; the four kinds alternate
      auto time = [&](std::vector<double>& into, auto&& body) {
        fill();
        group->barrier()->wait();
        const auto t0 = Clock::now();
        body();
        if (it >= 0) into.push_back(secs(t0, Clock::now()));
      };
      time(c, [&] { compute.all(m); });
      time(ar, blocking_all_reduce);
      time(serial, [&] {
        compute.all(m);
        blocking_all_reduce();
      });
      check("compute + all-reduce", backend);
      time(overlapped, [&] {
        for (std::size_t k = m.params.size(); k-- > 0;) {
          compute.tensor(m.params[k]);
          ddp.mark_ready(k);
        }
        ddp.finish();
      });
      check("DDP", backend);
    }
    row.compute = median(c);
    row.allreduce = median(ar);
    row.serial = median(serial);
    row.ddp = median(overlapped);
    row.timeline = ddp.last_step_stats();
    rows.push_back(row);
  }

  if (ctx.rank() == 0) {
    std::printf("ddp overlap bench: %d ranks, %zu float parameters (%.1f MB) in %zu %s tensors, bucket cap %.2f MB "
                "(first %.2f MB), backward %s %.1f ms (%.2f x the %s all-reduce%s), %d iterations, medians\n",
                ctx.world_size(), a.params, a.params * 4.0 / 1e6, m.params.size(), a.separate ? "separate" : "contiguous",
                a.bucket_mb, a.first_bucket_mb, a.sleep ? "sleep" : "busy", compute.seconds * 1e3, a.compute_ratio,
                backends.front().c_str(), a.sleep ? "" : fmt::format(", {:.2f} passes", compute.passes).c_str(),
                a.iters);
    std::printf("\n%-8s %7s %10s %12s %14s %9s %13s %9s\n", "backend", "buckets", "compute s", "all-reduce s",
                "compute+AR s", "DDP s", "max(c, AR) s", "hidden %");
    for (const auto& r : rows)
      std::printf("%-8s %7zu %10.4f %12.4f %14.4f %9.4f %13.4f %9.0f\n", r.backend.c_str(), r.buckets, r.compute,
                  r.allreduce, r.serial, r.ddp, std::max(r.compute, r.allreduce),
                  100.0 * (r.serial - r.ddp) / r.allreduce);
    std::printf("\nlast DDP step, per bucket: MB, then ms from the first mark_ready: ready / launched / done\n");
    for (const auto& r : rows) {
      std::printf("%-8s", r.backend.c_str());
      for (const auto& b : r.timeline)
        std::printf(" | %.1f: %.0f/%.0f/%.0f", b.bytes / 1e6, b.ready_s * 1e3, b.launched_s * 1e3, b.done_s * 1e3);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  ctx.world().barrier()->wait();
  return 0;
}

}  // namespace fastrun::bench::ddp
