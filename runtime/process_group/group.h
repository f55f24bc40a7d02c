#pragma once
// fastrun::Group: what user code holds. It wraps a backend's ProcessGroup and adds
//   - the FASTRUN_NO_SYNC levels (no_sync.h) in front of every collective;
//   - the global ranks of its members (for messages and the driver surface);
//   - a CPU companion group for object collectives: the group itself when its backend works on
//     host memory (gloo, shm), else a gloo group over the same ranks, made on first use (every
//     member reaches that first use in the same collective order, so creation is collective).
// Collectives have the ProcessGroup contracts (process_group.h): the same order on every rank,
// handles waited with wait(timeout) that rethrow the operation's error.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun {

class Group {
 public:
  using CpuFactory = std::function<std::shared_ptr<Group>()>;

  // `global_ranks[i]` is the global rank of group rank i. `make_cpu_group` is called at most
  // once, when cpu_group() is first needed and the backend is not a host-memory one.
  Group(std::shared_ptr<ProcessGroup> pg, std::vector<int> global_ranks, CpuFactory make_cpu_group = {});

  int rank() const { return pg_->rank(); }
  int size() const { return pg_->size(); }
  std::string backend_name() const { return pg_->backend_name(); }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  int global_rank(int group_rank) const { return global_ranks_.at(static_cast<std::size_t>(group_rank)); }

  ProcessGroup& process_group() { return *pg_; }
  const std::shared_ptr<ProcessGroup>& process_group_ptr() const { return pg_; }

  WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options = {});
  WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options = {});
  WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options = {});
  WorkHandle reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options = {});
  WorkHandle barrier(const BarrierOptions& options = {});

  // The ProcessGroup ops (process_group.h). Under FASTRUN_NO_SYNC=2 they are local and complete
  // at once: send/recv/batch_send_recv move nothing (a recv buffer keeps its contents); reduce
  // leaves the buffer as it is (this rank's own contribution); gather (at the root), scatter (at
  // the root), all_to_all and all_to_allv copy only this rank's own block; elsewhere the output
  // is untouched. Arguments are checked as on the backends first.
  WorkHandle send(BufferView buffer, int peer, const SendOptions& options = {});
  WorkHandle recv(BufferView buffer, int peer, const RecvOptions& options = {});
  WorkHandle batch_send_recv(const std::vector<P2POp>& ops);
  WorkHandle reduce(BufferView buffer, const ReduceOptions& options = {});
  WorkHandle gather(BufferView input, BufferView output, const GatherOptions& options = {});
  WorkHandle scatter(BufferView input, BufferView output, const ScatterOptions& options = {});
  WorkHandle all_to_all(BufferView input, BufferView output, const AllToAllOptions& options = {});
  WorkHandle all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options = {});

  // True for backends whose collectives take host memory (gloo, shm).
  bool works_on_host_memory() const;

  // The group object collectives run on (see above).
  Group& cpu_group();

 private:
  // How the local (NO_SYNC=2) checks name an op: "gather (group of global ranks 0,2)".
  std::string where(std::string_view op) const;

  std::shared_ptr<ProcessGroup> pg_;
  std::vector<int> global_ranks_;
  CpuFactory make_cpu_group_;
  std::once_flag cpu_once_;
  std::shared_ptr<Group> cpu_group_;
};

}  // namespace fastrun
