#pragma once
// What `fastrun-bench ddp`'s two modes share: the flags, the model (weight, bias) pairs over
// one gradient arena (or one allocation per tensor), DDP's options and the timing helpers.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/join/context.h"

namespace fastrun::bench::ddp {

struct Args {
  std::size_t params = 100'000'000;
  std::size_t layers = 50;
  int iters = 3;
  double bucket_mb = 25, first_bucket_mb = 1;
  double compute_us = 0;
  std::string backend = "gloo";
  bool separate = false;  // --layout separate: one allocation per tensor (DDP copies through buckets)
  bool ddp_avg = false;   // --reduce avg: DDP lets the backend average instead of pre-dividing
  // --mode overlap (ddp_overlap.cpp)
  bool overlap = false;
  std::string backends = "shm,gloo";
  bool sleep = false;          // --compute sleep: the backward leaves the CPU idle
  double compute_ratio = 1.0;  // backward time / one blocking all-reduce of the gradients
};

struct Model {
  std::vector<std::size_t> sizes;  // elements per tensor, in registration order
  std::vector<float> values, grads;
  std::vector<std::vector<float>> own_grads;  // --layout separate
  std::vector<DdpParameter> params;

  void fill(float v);  // every gradient (and the fused baseline's arena) holds v
};

Model make_model(const Args& a);
DdpOptions ddp_options(const Args& a);
int run_overlap(Context& ctx, const Args& a);

double secs(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);
double median(std::vector<double> v);

}  // namespace fastrun::bench::ddp
