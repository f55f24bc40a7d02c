#pragma once
// How DDP assigns parameters to buckets (a pure function, so every rank computes the same plan
// from the same registered layout, and tests can check it without a process group).
//
// Rules (PyTorch's Reducer is the model):
// - parameters are visited in reverse registration order, because backward produces gradients
//   roughly in that order;
// - a bucket holds one dtype on one device kind only: each (dtype, device) pair has its own
//   open bucket while visiting;
// - an open bucket is closed as soon as it holds >= its cap: the first bucket closed gets
//   first_bucket_bytes (small, so the first all-reduce starts early), the rest bucket_bytes;
//   a parameter is never split, so one larger than the cap gets a bucket of its own;
// - buckets are numbered in the order they were closed (then the still-open ones, in the
//   order they were opened); that index is the launch order on every rank;
// - inside a bucket, parameters are laid out in ascending registration order (`params` sorted,
//   `offsets` accordingly).
#include <cstddef>
#include <vector>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::ddp {

struct ParamLayout {
  std::size_t count = 0;
  DType dtype = DType::float32;
  DeviceKind device = DeviceKind::cpu;
};

struct BucketPlan {
  DType dtype = DType::float32;
  DeviceKind device = DeviceKind::cpu;
  std::vector<std::size_t> params;   // registration indices, ascending
  std::vector<std::size_t> offsets;  // element offset of each param in the flat bucket
  std::size_t count = 0;             // elements in the bucket
  std::size_t bytes() const { return count * dtype_size(dtype); }
};

std::vector<BucketPlan> plan_buckets(const std::vector<ParamLayout>& params, std::size_t first_bucket_bytes,
                                     std::size_t bucket_bytes);

}  // namespace fastrun::ddp
