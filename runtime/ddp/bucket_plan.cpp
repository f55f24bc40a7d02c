#include "fastrun/runtime/ddp/bucket_plan.h"

#include <algorithm>
#include <utility>

namespace fastrun::ddp {

std::vector<BucketPlan> plan_buckets(const std::vector<ParamLayout>& params, std::size_t first_bucket_bytes,
                                     std::size_t bucket_bytes) {
  std::vector<BucketPlan> closed;
  std::vector<BucketPlan> open;  // at most one per (dtype, device), in the order opened
  auto cap = [&] { return closed.empty() ? first_bucket_bytes : bucket_bytes; };

  for (std::size_t k = params.size(); k-- > 0;) {
    const ParamLayout& p = params[k];
    auto it = std::find_if(open.begin(), open.end(),
                           [&](const BucketPlan& b) { return b.dtype == p.dtype && b.device == p.device; });
    if (it == open.end()) {
      open.push_back(BucketPlan{p.dtype, p.device, {}, {}, 0});
      it = std::prev(open.end());
    }
    it->params.push_back(k);
    it->offsets.push_back(it->count);
    it->count += p.count;
    if (it->bytes() >= cap()) {
      closed.push_back(std::move(*it));
      open.erase(it);
    }
  }
  for (auto& b : open)
    if (!b.params.empty()) closed.push_back(std::move(b));
  // Inside a bucket, elements are laid out in ascending registration order: a rank-independent
  // order that is also the memory order of a gradient arena allocated in registration order
  // (which DDP can then reduce in place, with the same element layout as the other ranks).
  for (auto& b : closed) {
    std::sort(b.params.begin(), b.params.end());
    std::size_t offset = 0;
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      b.offsets[s] = offset;
      offset += params[b.params[s]].count;
    }
  }
  return closed;
}

}  // namespace fastrun::ddp
