#pragma once
// Data-parallel gradient averaging over plain buffers (docs/ddp.md; PyTorch's Reducer is
// the model). The model is an ordered list of parameters, each a value buffer and a gradient
// buffer of the same size and dtype, in host or CUDA memory, owned by the caller (any framework
// or none). fastrun never allocates or frees them and keeps only views.
//
//   std::vector<fastrun::DdpParameter> params = {{"fc1.weight", w1, g1}, {"fc1.bias", b1, gb1}, ...};
//   fastrun::DistributedDataParallel ddp(group, params);   // checks layouts, broadcasts from rank 0
//   for (each step) {
//     forward(); backward_with([&](size_t i) { ddp.mark_ready(i); });  // as each grad is final
//     ddp.finish();                      // waits; every grad now holds the average over ranks
//     sgd_step();
//   }
//
// Contracts:
// - Set-up (the constructor) is collective: every rank constructs with the same layout; it
//   checks that (ConfigError naming the first mismatch and the ranks) and then broadcasts the
//   parameter values from rank 0 (unless options.broadcast_parameters is false).
// - mark_ready(i) says gradient i is final for this step. Its bytes are copied (pre-divided by
//   the world size, for ReduceOp::sum) into its bucket at once (or, for a bucket reduced in
//   place, scaled where it is). Do not write into a gradient buffer between mark_ready and
//   finish(): the backend may be reading it, and finish() overwrites it. A bucket's all-reduce
//   starts as soon as all of its gradients are ready, but always in bucket-index order (a later
//   ready bucket waits for the earlier ones), so every rank issues the same collectives in the
//   same order.
// - finish() waits for every bucket and copies the averaged gradients back into the caller's
//   gradient buffers. A gradient never marked ready in a synced step is an Error naming it
//   (raised after the launched buckets completed; the step is then abandoned).
// - no_sync(): while the returned guard lives, mark_ready() and finish() do nothing and the
//   caller keeps accumulating (adding) into its gradient buffers; the first synced step after it
//   averages the accumulated sums.
// - Threading: one thread calls mark_ready/finish (the thread that issues the group's
//   collectives). The object must outlive any step in flight; the destructor waits for one.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/ddp/bucket_plan.h"
#include "fastrun/runtime/ddp/no_sync_guard.h"
#include "fastrun/runtime/process_group/group.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun {

struct DdpParameter {
  std::string name;   // for error messages ("fc1.weight")
  BufferView value;   // broadcast from rank 0 at set-up
  BufferView grad;    // same count, dtype and device as value; averaged in place by finish()
};

struct DdpOptions {
  std::size_t first_bucket_bytes = std::size_t{1} << 20;   // 1 MiB: the first all-reduce starts early
  std::size_t bucket_bytes = std::size_t{25} << 20;        // 25 MiB for the others
  // sum: pre-divide by the world size while copying into the bucket, then SUM (PyTorch's way;
  // needs no backend support for avg). avg: copy as is and let the backend average (used for
  // device buffers, where fastrun has no scaling kernel). Other ops are a ConfigError.
  ReduceOp reduce = ReduceOp::sum;
  bool broadcast_parameters = true;
  // A bucket whose gradients tile one contiguous range of memory (e.g. all gradients in one
  // arena) is all-reduced in place on that memory: no copy into a flat buffer and back.
  // false: always copy (keeps the caller's gradient memory untouched until finish()).
  bool reduce_in_place = true;
  Duration timeout = Duration::zero();   // per wait; zero = the group's op timeout
};

// Per-bucket figures of the last synced step, for benchmarks and logs. Times are seconds from
// the step's first mark_ready().
struct DdpBucketStats {
  std::size_t index = 0;
  std::size_t params = 0;
  std::size_t bytes = 0;
  bool in_place = false;  // reduced on the caller's contiguous gradient memory
  double ready_s = 0;     // last gradient of the bucket arrived
  double launched_s = 0;  // all-reduce started
  double done_s = 0;      // its wait() returned in finish()
};

class DistributedDataParallel {
 public:
  // On any Backend: a fastrun::Group (what join() gives, itself a Backend whose
  // collectives go through the FASTRUN_NO_SYNC levels and the flight record) or a backend used
  // directly. The group must outlive this object.
  DistributedDataParallel(Backend& group, std::vector<DdpParameter> params, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  void mark_ready(std::size_t param_index);
  // Marks every not yet marked gradient ready, in reverse registration order (a whole gradient
  // set handed over at once).
  void mark_all_ready();
  void finish();
  // mark_all_ready() + finish().
  void synchronize() { mark_all_ready(); finish(); }

  // The gradients stay local while the guard lives (fastrun::NoSyncGuard, no_sync_guard.h).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  bool syncing() const { return sync_; }

  const std::vector<ddp::BucketPlan>& buckets() const { return plan_; }
  const std::vector<DdpBucketStats>& last_step_stats() const { return stats_; }
  std::size_t num_parameters() const { return params_.size(); }
  const DdpParameter& parameter(std::size_t i) const { return params_.at(i); }

 private:
  friend class NoSyncGuard;
  // Turns syncing off for a NoSyncGuard; returns the previous state. Error mid-step.
  bool begin_no_sync();
  struct BucketState;
  void setup();
  void broadcast_parameters();
  void launch_ready_buckets();
  void wait_launched() noexcept;
  void reset_step();
  Duration timeout() const { return options_.timeout; }
  double since_start() const;

  Backend& group_;
  std::vector<DdpParameter> params_;
  DdpOptions options_;
  std::vector<ddp::BucketPlan> plan_;
  std::vector<BucketState> buckets_;
  std::vector<std::size_t> bucket_of_;  // param index -> bucket index
  std::vector<std::size_t> slot_of_;    // param index -> position within its bucket
  std::vector<bool> ready_;             // this step
  std::size_t next_launch_ = 0;
  bool step_started_ = false;
  bool sync_ = true;
  std::chrono::steady_clock::time_point step_start_;
  std::vector<DdpBucketStats> stats_;
};

}  // namespace fastrun
