#pragma once
// A process group: the collectives DDP, the samplers' users and the object collectives need,
// each with an options struct, each returning a Work handle (c10d Work.hpp is the model; its
// very wide Backend interface is the thing to avoid). Backends (runtime/backend/<name>/)
// implement ProcessGroup; sub-groups are made by the runtime through the same backend factory.
//
// Threading: one thread issues collectives on a group; a Work may be waited on from another.
// Ordering: every rank must issue the same collectives in the same order.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/types.h"
#include "fastrun/runtime/store/job_keys.h"  // kFailureKey, which ProcessGroupOptions::failure_store holds
#include "fastrun/runtime/store/store.h"

namespace fastrun {

// A handle on one collective. wait() rethrows the operation's error (PeerFailure when a peer
// died, TimeoutError, BackendError). A zero timeout means the group's default op timeout.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait(Duration timeout = Duration::zero()) = 0;
  virtual bool completed() = 0;
};
using WorkHandle = std::shared_ptr<Work>;

struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  // Every rank's input is multiplied by this before the reduction (floating dtypes, host
  // buffers; kernels::scale's rounding), as part of the op: on the comm thread when the op runs
  // there. DDP's sum of pre-divided gradients passes 1 / world size. 1 = none.
  double prescale = 1.0;
};
struct BroadcastOptions { int root = 0; };             // root: rank within the group
struct AllGatherOptions {};
struct ReduceScatterOptions { ReduceOp op = ReduceOp::sum; };
struct BarrierOptions {};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;             // rank within this group
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;

  // In place on `buffer` (every rank the same count and dtype).
  virtual WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options = {}) = 0;
  // In place: the root's buffer is copied into every other rank's.
  virtual WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options = {}) = 0;
  // output.count == input.count * size(); rank r's input lands at output[r * input.count].
  virtual WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options = {}) = 0;
  // input.count == output.count * size(); rank r receives the reduction of block r.
  virtual WorkHandle reduce_scatter(BufferView input, BufferView output,
                                    const ReduceScatterOptions& options = {}) = 0;
  virtual WorkHandle barrier(const BarrierOptions& options = {}) = 0;
};

// What a backend needs to build a group. The store is already prefixed for this group and
// generation, so backend keys never collide with another group's.
struct GroupSpec {
  std::shared_ptr<Store> store;
  int rank = 0;                 // rank within the group
  int size = 1;
  std::vector<int> global_ranks;  // global rank of each group member, for error messages
  std::string name;             // "world", "group-3", ... (for messages and shm segment names)
  std::string run_id;           // the job's id (names shared segments)
  Duration timeout = std::chrono::seconds(300);     // set-up
  Duration op_timeout = std::chrono::seconds(600);  // default per-collective timeout
  // Global-store key the launcher or a failing rank sets ("rank N: why") when a peer fails;
  // every backend's wait watches it so no survivor hangs on a dead peer.
  std::shared_ptr<Store> failure_store;  // unprefixed; may be null in a world of one
  std::string gloo_host;  // the address gloo binds; "" = FASTRUN_GLOO_HOST (or its default)
};

}  // namespace fastrun
