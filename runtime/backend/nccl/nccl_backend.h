#pragma once
// The "nccl" Backend: one group on one NCCL communicator, for buffers in CUDA memory.
// Internal header (includes CUDA and NCCL); users get it through backend::find("nccl").
//
// Device: the calling thread's current CUDA device when the group is made (the runtime makes
// it device 0 of the rank's pinned set). One rank per GPU.
// Threading: one thread issues collectives (NCCL calls on a communicator are not thread-safe);
// Work handles may be waited on from any thread; the watchdog thread may abort at any time.
// Streams: each collective runs on the group's own stream (cudaStreamNonBlocking), after all
// work already issued to the legacy default stream (an event recorded there); work on other
// user streams must be finished (or synchronised) by the caller first. Results are ready in
// device memory when Work::wait returns or Work::completed() is true.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "fastrun/runtime/backend/nccl/group_state.h"
#include "fastrun/runtime/backend/nccl/watchdog.h"
#include "fastrun/runtime/cuda/device_buffer.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/process_group/op_record.h"

namespace fastrun::nccl {

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(const GroupSpec& spec);
  // Stops the watchdog, waits (until the op timeout) for operations in flight, then finalizes
  // and destroys the communicator; aborts it instead after a failure or when that runs late.
  ~NcclBackend() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }

  WorkHandle all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) override;
  WorkHandle broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) override;
  WorkHandle all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions& options) override;
  WorkHandle reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) override;
  WorkHandle barrier(const Op& call, const BarrierOptions& options) override;

  // nccl_p2p_ops.cpp. NCCL has no tags: they are checked, then messages between two ranks match
  // in posting order. A lone send or recv occupies the group's stream until its peer posts the
  // other side, so two ranks that each send before they recv deadlock: post both in one
  // batch_send_recv (ncclGroupStart/End), as with torch's batch_isend_irecv.
  WorkHandle send(const Op& call, BufferView buffer, int peer, const SendOptions& options) override;
  WorkHandle recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) override;
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>& ops) override;
  WorkHandle reduce(const Op& call, BufferView buffer, const ReduceOptions& options) override;
  WorkHandle gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) override;
  WorkHandle scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) override;
  WorkHandle all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions& options) override;
  WorkHandle all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) override;

  // The group's stream, for the GPU checks' deliberate stall (testing.h).
  cudaStream_t stream() const { return stream_.get(); }

 private:
  using Launch = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;
  // Every op, collective or point-to-point, is issued here, after its argument checks: through
  // the group runtime's post() (refused once the group failed, numbered: group_runtime.h), then
  // enqueued as "name #seq (detail)" ("send #3 (float32 x 4 to rank 1)"), the label of its
  // Work, its watchdog record and its timeout message. A collective's `desc` (numbered here)
  // goes into the group's stalled-op check before it is enqueued; point-to-point ops have none
  // (numbered apart, never compared across ranks).
  WorkHandle issue(const Op& call, std::optional<OpDesc> desc, const std::string& detail, const Launch& launch);
  // Issues `ops` as grouped ncclSend/ncclRecv calls (one ncclGroupStart/End).
  WorkHandle issue_p2p(const Op& call, std::optional<OpDesc> desc, const std::string& detail, std::vector<P2POp> ops);
  // Validates nothing; enqueues `launch` under the comm mutex, waits out ncclInProgress,
  // records the end event and registers the operation with the watchdog.
  WorkHandle enqueue(std::string op, const Launch& launch);
  void require_device(const BufferView& buffer, const char* op, const char* which) const;

  struct StreamDeleter { void operator()(CUstream_st* s) const noexcept; };
  struct EventDeleter { void operator()(CUevent_st* e) const noexcept; };

  int rank_ = 0;
  int size_ = 1;
  std::string name_;  // the group's name, for the shared argument checks' messages
  GroupRuntime runtime_;  // label, failure record, op numbers (no comm thread: ops go on the stream)
  std::string label_;
  Duration close_limit_{};
  std::shared_ptr<GroupState> state_;
  // Declared before the watchdog: destroyed after it (members go in reverse order).
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<CUevent_st, EventDeleter> inputs_ready_;  // recorded on the legacy stream before each op
  DeviceBuffer barrier_scratch_;
  std::unique_ptr<Watchdog> watchdog_;
};

// The backend factory the component registers under "nccl" (runtime/backend/nccl/component.cpp).
std::unique_ptr<Backend> make_nccl_backend(const GroupSpec& spec);

}  // namespace fastrun::nccl
