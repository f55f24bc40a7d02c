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

  // True for backends whose collectives take host memory (gloo, shm).
  bool works_on_host_memory() const;
  // The group object collectives run on (see above).
  Group& cpu_group();

 private:
  std::shared_ptr<ProcessGroup> pg_;
  std::vector<int> global_ranks_;
  CpuFactory make_cpu_group_;
  std::once_flag cpu_once_;
  std::shared_ptr<Group> cpu_group_;
};

}  // namespace fastrun
