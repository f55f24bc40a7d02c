#include "fastrun/runtime/process_group/group.h"
#include "fastrun/runtime/process_group/shape_check.h"

#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/no_sync.h"

namespace fastrun {

Group::Group(std::shared_ptr<ProcessGroup> pg, std::vector<int> global_ranks, CpuFactory make_cpu_group)
    : pg_(std::move(pg)), global_ranks_(std::move(global_ranks)), make_cpu_group_(std::move(make_cpu_group)) {
  if (!pg_) throw ConfigError("Group: null process group");
  if (global_ranks_.empty())
    for (int r = 0; r < pg_->size(); ++r) global_ranks_.push_back(r);
  if (static_cast<int>(global_ranks_.size()) != pg_->size())
    throw ConfigError(fmt::format("Group: {} global ranks given for a group of {}", global_ranks_.size(), pg_->size()));
}

WorkHandle Group::all_reduce(BufferView buffer, const AllReduceOptions& options) {
  if (no_sync_level() >= 2) {  // local: the buffer keeps this rank's values (prescaled: DDP's pre-division)
    if (buffer.device == DeviceKind::cpu) apply_prescale(buffer, options.prescale);
    return completed_work();
  }
  return pg_->all_reduce(buffer, options);
}

WorkHandle Group::broadcast(BufferView buffer, const BroadcastOptions& options) {
  if (no_sync_level() >= 2) return completed_work();  // local: every rank keeps its own buffer
  return pg_->broadcast(buffer, options);
}

WorkHandle Group::all_gather(BufferView input, BufferView output, const AllGatherOptions& options) {
  if (no_sync_level() >= 2) {  // local: only this rank's slot is written
    check_all_gather_shapes("all_gather", input, output, size());
    if (input.device == DeviceKind::cpu && output.device == DeviceKind::cpu) {
      std::memmove(static_cast<char*>(output.data) + input.bytes() * static_cast<std::size_t>(rank()), input.data,
                   input.bytes());
      return completed_work();
    }
    // Device memory cannot be copied from here: let the backend run it (documented).
  }
  return pg_->all_gather(input, output, options);
}

WorkHandle Group::reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options) {
  if (no_sync_level() >= 2 && input.device == DeviceKind::cpu && output.device == DeviceKind::cpu) {
    check_reduce_scatter_shapes("reduce_scatter", input, output, size());
    std::memmove(output.data, static_cast<char*>(input.data) + output.bytes() * static_cast<std::size_t>(rank()),
                 output.bytes());
    return completed_work();
  }
  return pg_->reduce_scatter(input, output, options);
}

WorkHandle Group::barrier(const BarrierOptions& options) {
  if (no_sync_level() >= 1) return completed_work();
  return pg_->barrier(options);
}

bool Group::works_on_host_memory() const {
  const std::string name = backend_name();
  return name == "gloo" || name == "shm";
}

Group& Group::cpu_group() {
  if (works_on_host_memory()) return *this;
  std::call_once(cpu_once_, [&] {
    if (!make_cpu_group_)
      throw ConfigError(fmt::format("group on backend '{}' has no CPU companion group for object collectives",
                                    backend_name()));
    cpu_group_ = make_cpu_group_();
  });
  return *cpu_group_;
}

}  // namespace fastrun
