#pragma once
// The Work handle of an NCCL collective: waits on the CUDA event recorded after the operation.
// Internal header.
//
// wait(timeout) polls cudaEventQuery (20 µs doubling to 1 ms) and returns when the operation
// finished on the device; it rethrows the group's failure (TimeoutError, PeerFailure,
// BackendError) when the watchdog or another waiter failed the group. A wait that runs past
// its own timeout (zero = the group's op timeout) is an operation timeout: it takes the
// group's failure path (publish, abort, fail every operation in flight) and throws.
// Any thread may wait; the handle keeps the group's shared state alive.
#include <memory>

#include "fastrun/runtime/backend/nccl/group_state.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::nccl {

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<GroupState> state, std::shared_ptr<WorkRecord> record)
      : state_(std::move(state)), record_(std::move(record)) {}
  void wait(Duration timeout = Duration::zero()) override;
  bool completed() override;

 private:
  std::shared_ptr<GroupState> state_;
  std::shared_ptr<WorkRecord> record_;
};

}  // namespace fastrun::nccl
