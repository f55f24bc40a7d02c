#include "fastrun/runtime/process_group/group.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/flight_recorder.h"
#include "fastrun/runtime/process_group/no_sync.h"
#include "fastrun/runtime/process_group/op.h"
#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/recycling_allocator.h"
#include "fastrun/runtime/process_group/sequence_check.h"
#include "fastrun/runtime/process_group/shape_check.h"

namespace fastrun {
namespace {

// The handle of an op still running when forward() returned: records its end and explains a
// timeout. Holds the recorder, not the Group, so it may outlive the Group like any handle.
class TracedWork final : public Work {
 public:
  TracedWork(WorkHandle inner, std::shared_ptr<FlightRecorder> flight, std::uint64_t slot, OpDesc op)
      : inner_(std::move(inner)), flight_(std::move(flight)), slot_(slot), op_(std::move(op)) {}

  void wait(Duration timeout) override {
    flight_->waiting(slot_);
    try {
      inner_->wait(timeout);
    } catch (const TimeoutError& e) {
      TimeoutError explained = flight_->explained(e, op_);  // before end(): this rank is still "in op #k"
      flight_->end(slot_, false);
      throw explained;
    } catch (...) {
      flight_->end(slot_, false);
      throw;
    }
    flight_->end(slot_, true);
  }
  bool completed() override { return inner_->completed(); }
  bool known_complete() override { return inner_->known_complete(); }

 private:
  WorkHandle inner_;
  std::shared_ptr<FlightRecorder> flight_;
  std::uint64_t slot_;
  OpDesc op_;
};

}  // namespace

Group::Group(std::shared_ptr<Backend> backend, std::vector<int> global_ranks, CpuFactory make_cpu_group,
             GroupPolicy policy)
    : backend_(std::move(backend)), global_ranks_(std::move(global_ranks)), make_cpu_group_(std::move(make_cpu_group)),
      name_(std::move(policy.name)) {
  if (!backend_) throw ConfigError("Group: null process group");
  if (global_ranks_.empty())
    for (int r = 0; r < backend_->size(); ++r) global_ranks_.push_back(r);
  if (static_cast<int>(global_ranks_.size()) != backend_->size())
    throw ConfigError(fmt::format("Group: {} global ranks given for a group of {}", global_ranks_.size(), backend_->size()));
  // Read once per group, here, not per op: a malformed value fails the join, before any op.
  (void)no_sync_level();
  check_sequence_ = env::get_string(env::kDebug) == "sequence" && backend_->size() > 1;
  flight_ = std::make_shared<FlightRecorder>(name_, global_ranks_, backend_->rank(), std::move(policy.job_store));
}

Group::~Group() = default;

WorkHandle Group::forward(OpDesc op, Issue issue) {
  op.seq = (op.point_to_point ? p2p_seq_ : seq_).fetch_add(1, std::memory_order_relaxed) + 1;
  const std::uint64_t slot = flight_->begin(op);
  WorkHandle work;
  try {
    // The value handed down: the backend runs op #seq under this label (op.h).
    const Op call = Op::numbered_as(op.op, static_cast<std::uint64_t>(op.seq), op.point_to_point);
    if (check_sequence_ && !op.point_to_point) check_same_op(sequence_group(), op, name_, global_ranks_);
    work = issue(*backend_, call);
  } catch (const TimeoutError& e) {
    TimeoutError explained = flight_->explained(e, op);
    flight_->end(slot, false);
    throw explained;
  } catch (...) {
    flight_->end(slot, false);
    throw;
  }
  if (!work->known_complete()) {  // not completed(): that may run a progress pass (backend.h)
    flight_->attach(slot, work);
    return std::allocate_shared<TracedWork>(RecyclingAllocator<TracedWork>{}, std::move(work), flight_, slot, std::move(op));
  }
  // Finished already (a backend that runs small ops on the caller's thread): no wrapper, but a
  // timeout it carries is explained all the same.
  try {
    work->wait();
  } catch (const TimeoutError& e) {
    auto explained = std::make_exception_ptr(flight_->explained(e, op));
    flight_->end(slot, false);
    return std::make_shared<CompletedWork>(std::move(explained));
  } catch (...) {
    flight_->end(slot, false);
    return work;
  }
  flight_->end(slot, true);
  return work;
}

Backend& Group::sequence_group() { return works_on_host_memory() ? *backend_ : cpu_group().backend(); }

WorkHandle Group::all_reduce(BufferView buffer, const AllReduceOptions& options) {
  if (no_sync_level() >= 2) {  // local: the buffer keeps this rank's values (prescaled: DDP's pre-division)
    if (buffer.device == DeviceKind::cpu) apply_prescale(buffer, options.prescale);
    return completed_work();
  }
  return forward(op_desc("all_reduce", buffer).with_reduce(options.op),
                 [&](Backend& b, const Op& call) { return b.all_reduce(call, buffer, options); });
}

WorkHandle Group::broadcast(BufferView buffer, const BroadcastOptions& options) {
  if (no_sync_level() >= 2) return completed_work();  // local: every rank keeps its own buffer
  return forward(op_desc("broadcast", buffer).with_root(options.root),
                 [&](Backend& b, const Op& call) { return b.broadcast(call, buffer, options); });
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
  return forward(op_desc("all_gather", input),
                 [&](Backend& b, const Op& call) { return b.all_gather(call, input, output, options); });
}

WorkHandle Group::reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options) {
  if (no_sync_level() >= 2 && input.device == DeviceKind::cpu && output.device == DeviceKind::cpu) {
    check_reduce_scatter_shapes("reduce_scatter", input, output, size());
    std::memmove(output.data, static_cast<char*>(input.data) + output.bytes() * static_cast<std::size_t>(rank()),
                 output.bytes());
    return completed_work();
  }
  return forward(op_desc("reduce_scatter", input).with_reduce(options.op),
                 [&](Backend& b, const Op& call) { return b.reduce_scatter(call, input, output, options); });
}

WorkHandle Group::barrier(const BarrierOptions& options) {
  if (no_sync_level() >= 1) return completed_work();
  return forward(op_desc("barrier"),
                 [&](Backend& b, const Op& call) { return b.barrier(call, options); });
}

// ---------------------------------------------------------------- point-to-point, rooted, all-to-all
// Local (NO_SYNC=2) paths copy host memory only; device buffers go to the backend, as for
// all_gather above.

namespace {
bool on_host(const BufferView& a, const BufferView& b) {
  return a.device == DeviceKind::cpu && b.device == DeviceKind::cpu;
}
// memmove: the NO_SYNC paths may be given the same or overlapping buffers (copy_bytes.h's
// copy_bytes is for disjoint ranges).
void move_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}
}  // namespace

std::string Group::where(std::string_view op) const {
  return fmt::format("{} (group of global ranks {})", op, fmt::join(global_ranks_, ","));
}

WorkHandle Group::send(BufferView buffer, int peer, const SendOptions& options) {
  if (no_sync_level() >= 2) {
    check_peer(where("send"), peer, options.tag, rank(), size());
    return completed_work();
  }
  return forward(op_desc("send", buffer).with_peer(peer),
                 [&](Backend& b, const Op& call) { return b.send(call, buffer, peer, options); });
}

WorkHandle Group::recv(BufferView buffer, int peer, const RecvOptions& options) {
  if (no_sync_level() >= 2) {
    check_peer(where("recv"), peer, options.tag, rank(), size());
    return completed_work();
  }
  return forward(op_desc("recv", buffer).with_peer(peer),
                 [&](Backend& b, const Op& call) { return b.recv(call, buffer, peer, options); });
}

WorkHandle Group::batch_send_recv(const std::vector<P2POp>& ops) {
  if (no_sync_level() >= 2) {
    check_p2p_batch(where("batch_send_recv"), ops, rank(), size());
    return completed_work();
  }
  OpDesc d = op_desc("batch_send_recv");
  d.point_to_point = true;
  return forward(std::move(d), [&](Backend& b, const Op& call) { return b.batch_send_recv(call, ops); });
}

WorkHandle Group::reduce(BufferView buffer, const ReduceOptions& options) {
  if (no_sync_level() >= 2) {
    check_root(where("reduce"), options.root, size());
    return completed_work();  // the root's buffer is its own contribution
  }
  return forward(op_desc("reduce", buffer).with_root(options.root).with_reduce(options.op),
                 [&](Backend& b, const Op& call) { return b.reduce(call, buffer, options); });
}

WorkHandle Group::gather(BufferView input, BufferView output, const GatherOptions& options) {
  if (no_sync_level() >= 2 && on_host(input, output)) {
    check_gather_shapes(where("gather"), input, output, options.root, rank(), size());
    if (rank() == options.root)
      move_bytes(static_cast<char*>(output.data) + input.bytes() * static_cast<std::size_t>(rank()), input.data,
                 input.bytes());
    return completed_work();
  }
  return forward(op_desc("gather", input).with_root(options.root),
                 [&](Backend& b, const Op& call) { return b.gather(call, input, output, options); });
}

WorkHandle Group::scatter(BufferView input, BufferView output, const ScatterOptions& options) {
  if (no_sync_level() >= 2 && on_host(input, output)) {
    check_scatter_shapes(where("scatter"), input, output, options.root, rank(), size());
    if (rank() == options.root)
      move_bytes(output.data, static_cast<char*>(input.data) + output.bytes() * static_cast<std::size_t>(rank()),
                 output.bytes());
    return completed_work();
  }
  return forward(op_desc("scatter", output).with_root(options.root),
                 [&](Backend& b, const Op& call) { return b.scatter(call, input, output, options); });
}

WorkHandle Group::all_to_all(BufferView input, BufferView output, const AllToAllOptions& options) {
  if (no_sync_level() >= 2 && on_host(input, output)) {
    check_all_to_all_shapes(where("all_to_all"), input, output, size());
    const std::size_t block = input.bytes() / static_cast<std::size_t>(size());
    const std::size_t at = block * static_cast<std::size_t>(rank());
    move_bytes(static_cast<char*>(output.data) + at, static_cast<char*>(input.data) + at, block);
    return completed_work();
  }
  return forward(op_desc("all_to_all", input),
                 [&](Backend& b, const Op& call) { return b.all_to_all(call, input, output, options); });
}

WorkHandle Group::all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                              const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) {
  if (no_sync_level() >= 2 && on_host(input, output)) {
    check_all_to_allv_shapes(where("all_to_allv"), input, send_counts, output, recv_counts, rank(), size());
    const auto me = static_cast<std::size_t>(rank());
    std::size_t in_at = 0, out_at = 0;
    for (std::size_t r = 0; r < me; ++r) {
      in_at += send_counts[r];
      out_at += recv_counts[r];
    }
    const std::size_t esize = dtype_size(input.dtype);
    move_bytes(static_cast<char*>(output.data) + out_at * esize, static_cast<char*>(input.data) + in_at * esize,
               send_counts[me] * esize);
    return completed_work();
  }
  // The counts ride along only for the sequence check, which compares them pair by pair.
  OpDesc desc = op_desc("all_to_allv", input);
  if (check_sequence_) desc.with_pair_counts(send_counts, recv_counts);
  else desc.with_count_per_rank();
  return forward(std::move(desc), [&](Backend& pg, const Op& call) {
    return pg.all_to_allv(call, input, send_counts, output, recv_counts, options);
  });
}

bool Group::works_on_host_memory() const {
  const std::string name = backend_name();
  return name == "gloo" || name == "shm" || name == "hier";
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
