// train_mlp_compare A B [TOL]: do two train_mlp checkpoints hold the same training state?
// Same layout, epoch, step, seed and sampler state, and weights equal within TOL (default 1e-4)
// relative to the largest |weight| of A. Prints one line, "PASS ..." or "FAIL ...", and exits 0
// or 1 (2 for bad arguments or unreadable files). Used by tools/gpu_checks.sh to hold the CUDA
// trainer to the CPU trainer's result.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "checkpoint.h"
#include "fastrun/runtime/error.h"
#include "fastrun/tools/flags/number_flags.h"

int main(int argc, char** argv) {
  std::string path_a, path_b;
  double tol = 1e-4;
  CLI::App app("Do two train_mlp checkpoints hold the same training state?", "train_mlp_compare");
  app.add_option("A", path_a, "a checkpoint")->required();
  app.add_option("B", path_b, "the checkpoint to compare it with")->required();
  fastrun::flags::decimal(app, "TOL", tol, "largest difference of a weight, relative to the largest |weight| of A", 0,
                          1e300);
  try {
    fastrun::flags::parse(app, argc, argv);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "train_mlp_compare: %s\n", e.what());
    return 2;
  }
  try {
    const auto a = train_mlp::read_checkpoint(path_a), b = train_mlp::read_checkpoint(path_b);
    if (a.dim != b.dim || a.hidden != b.hidden || a.classes != b.classes || a.values.size() != b.values.size() ||
        a.epoch != b.epoch || a.global_step != b.global_step || a.seed != b.seed || a.sampler_state != b.sampler_state) {
      std::printf("FAIL: different training state: layout %llu/%llu/%llu vs %llu/%llu/%llu, epoch %llu vs %llu, "
                  "step %llu vs %llu, seed %llu vs %llu, sampler state %s\n",
                  static_cast<unsigned long long>(a.dim), static_cast<unsigned long long>(a.hidden),
                  static_cast<unsigned long long>(a.classes), static_cast<unsigned long long>(b.dim),
                  static_cast<unsigned long long>(b.hidden), static_cast<unsigned long long>(b.classes),
                  static_cast<unsigned long long>(a.epoch), static_cast<unsigned long long>(b.epoch),
                  static_cast<unsigned long long>(a.global_step), static_cast<unsigned long long>(b.global_step),
                  static_cast<unsigned long long>(a.seed), static_cast<unsigned long long>(b.seed),
                  a.sampler_state == b.sampler_state ? "equal" : "different");
      return 1;
    }
    double max_abs = 0, max_diff = 0;
    std::size_t worst = 0;
    bool nan = false;
    for (std::size_t i = 0; i < a.values.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(a.values[i])));
      const double d = std::fabs(static_cast<double>(a.values[i]) - b.values[i]);
      if (std::isnan(d)) nan = true;
      else if (d > max_diff) max_diff = d, worst = i;
    }
    const double rel = max_diff / std::max(max_abs, 1e-30);
    const bool ok = !nan && rel <= tol;
    std::printf("%s: %zu weights, step %llu: max |a-b| %.3g at value %zu, %.3g relative to max |a| %.3g (tolerance "
                "%.3g)%s\n",
                ok ? "PASS" : "FAIL", a.values.size(), static_cast<unsigned long long>(a.global_step), max_diff, worst,
                rel, max_abs, tol, nan ? "; NaN in a or b" : "");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp_compare: %s\n", e.what());
    return 2;
  }
}
