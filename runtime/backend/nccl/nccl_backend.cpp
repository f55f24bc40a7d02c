#include "fastrun/runtime/backend/nccl/nccl_backend.h"
#include "fastrun/runtime/process_group/shape_check.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/backend/nccl/nccl_check.h"
#include "fastrun/runtime/backend/nccl/nccl_types.h"
#include "fastrun/runtime/backend/nccl/nccl_work.h"
#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/op_timeout.h"

namespace fastrun::nccl {
namespace {

// The orderly close of a healthy group may need peers that are gone: bound it.
constexpr Duration kCloseLimit = std::chrono::seconds(60);

RuntimeConfig nccl_runtime_config() {
  RuntimeConfig c;
  c.backend = "nccl";
  // Ops are enqueued on the group's stream by the issuing thread and waited for through their
  // CUDA event (NcclWork): no comm thread. The runtime gives the label, failure record and op numbers.
  c.async_from_bytes = RuntimeConfig::kNever;
  return c;
}

// Makes the group's device current for the calling thread while enqueueing (the stream,
// events and communicator live there), and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
    else previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const GroupSpec& spec) { return std::make_unique<NcclBackend>(spec); }

NcclBackend::NcclBackend(const GroupSpec& spec)
    : rank_(spec.rank),
      size_(spec.size),
      name_(spec.name),
      runtime_(spec, nccl_runtime_config()),
      label_(runtime_.label()),
      close_limit_(std::min(spec.timeout, kCloseLimit)) {
  // 1. arguments and the join deadline (set-up as a whole must fit in it)
  if (spec.size < 1 || spec.rank < 0 || spec.rank >= spec.size) {
    throw ConfigError(fmt::format("{}: rank {} is not in 0..{} (group size {})", label_, spec.rank, spec.size - 1,
                                  spec.size));
  }
  const auto deadline = Clock::now() + spec.timeout;

  // 2. the device: the calling thread's current one
  const CudaDeviceProbe probe = cuda_device_probe();
  if (probe.count == 0) {
    throw BackendError(fmt::format("{}: the nccl backend needs a CUDA device and none is visible ({}); use the "
                                   "gloo backend for CPU ranks (FASTRUN_BACKEND=gloo) or start GPU ranks with "
                                   "`fastrun --devices ...`",
                                   label_, probe.error));
  }
  state_ = std::make_shared<GroupState>();
  state_->label = label_;
  state_->global_rank = runtime_.health().global_rank();
  state_->health = runtime_.shared_health();
  state_->in_flight = runtime_.in_flight();
  state_->device = cuda_current_device();
  state_->op_timeout = spec.op_timeout;
  state_->policy = error_policy_from_env();
  if (spec.size > 1 && spec.store)
    state_->op_check = std::make_shared<StalledOpCheck>(*spec.store, spec.rank, spec.size, spec.global_ranks, spec.name);

  // 3. the group's own stream, the input-ordering event and the barrier's scratch element
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), label_ + ": cudaStreamCreateWithFlags");
  stream_.reset(stream);
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), label_ + ": cudaEventCreateWithFlags");
  inputs_ready_.reset(event);
  barrier_scratch_ = DeviceBuffer(sizeof(float));
  barrier_scratch_.fill_zero();

  // 4. the communicator (unique id through the store, non-blocking init under the deadline)
  state_->comm = Communicator::create(spec, label_, deadline);

  // 5. the watchdog (it reads the job's failure record through state_->health)
  watchdog_ = std::make_unique<Watchdog>(state_);
  log::info("{}: ready on CUDA device {} (op timeout {:.3g} s, on error: {})", label_, state_->device,
            std::chrono::duration<double>(spec.op_timeout).count(),
            state_->policy == ErrorPolicy::exit ? "exit" : "raise");
}

NcclBackend::~NcclBackend() {
  try {
    // Let operations in flight end while the watchdog still enforces their deadlines and
    // watches the failure key, so this wait is bounded by the op timeout.
    os::BackoffSleeper sleeper({std::chrono::milliseconds(1), std::chrono::milliseconds(1)});
    for (;;) {
      const auto works = state_->in_flight->snapshot();
      const bool pending = std::any_of(works.begin(), works.end(), [&](const auto& w) {
        auto* record = dynamic_cast<WorkRecord*>(w.get());
        return record && state_->poll(*record) == WorkRecord::pending;
      });
      if (!pending || state_->failed()) break;
      sleeper.sleep(Clock::time_point::max());  // bounded by the watchdog's op deadlines (above)
    }
    watchdog_.reset();
    if (!state_->failed()) {
      std::lock_guard lock(state_->comm_mutex);
      if (!state_->comm.close(Clock::now() + close_limit_)) {
        log::warn("{}: ncclCommFinalize did not finish within {:.3g} s; the communicator was aborted", label_,
                  std::chrono::duration<double>(close_limit_).count());
      }
    }
  } catch (...) {
    // Destructors never throw; the communicator's own destructor aborts it if still open.
  }
}

void NcclBackend::StreamDeleter::operator()(CUstream_st* s) const noexcept { (void)cudaStreamDestroy(s); }
void NcclBackend::EventDeleter::operator()(CUevent_st* e) const noexcept { (void)cudaEventDestroy(e); }

void NcclBackend::require_device(const BufferView& buffer, const char* op, const char* which) const {
  if (buffer.device != DeviceKind::cuda) {
    throw BackendError(fmt::format("{}: {}: the {} buffer is in host memory; the nccl backend takes CUDA device "
                                   "buffers only (host buffers need the gloo or shm backend: FASTRUN_BACKEND=gloo)",
                                   label_, op, which));
  }
  if (buffer.data == nullptr && buffer.count > 0) {
    throw BackendError(fmt::format("{}: {}: the {} buffer has {} elements but a null pointer", label_, op, which,
                                   buffer.count));
  }
}

WorkHandle NcclBackend::issue(const Op& call, std::optional<OpDesc> desc, const std::string& detail,
                               const Launch& launch) {
  return runtime_.post(call, [&](std::uint64_t seq) {
    if (desc && state_->op_check) {  // before the op can stall (a lock and a 64-byte copy)
      desc->seq = static_cast<std::int64_t>(seq);
      state_->op_check->record(*desc);
    }
    std::string label = fmt::format("{} #{}", call.name, seq);
    if (!detail.empty()) label += fmt::format(" ({})", detail);
    return enqueue(std::move(label), launch);
  });
}

WorkHandle NcclBackend::enqueue(std::string op, const Launch& launch) {
  std::unique_lock lock(state_->comm_mutex);
  state_->check_usable(op);
  const DeviceGuard device_guard(state_->device);  // before the event: events belong to a device
  const auto start = Clock::now();
  auto record = std::make_shared<WorkRecord>(std::move(op), start, start + state_->op_timeout);

  // Inputs: everything issued to the legacy default stream so far comes first.
  check_cuda(cudaEventRecord(inputs_ready_.get(), cudaStreamLegacy), label_ + ": cudaEventRecord(legacy stream)");
  check_cuda(cudaStreamWaitEvent(stream_.get(), inputs_ready_.get(), 0), label_ + ": cudaStreamWaitEvent");

  ncclResult_t r = launch(state_->comm.get(), stream_.get());
  // Non-blocking communicator: a call may return ncclInProgress (lazy connection set-up);
  // nothing may be put on the stream until its state leaves that. Poll without holding the
  // comm mutex for long, so the watchdog keeps watching.
  os::BackoffSleeper sleeper({std::chrono::microseconds(50), std::chrono::microseconds(50)});
  while (r == ncclInProgress) {
    lock.unlock();
    sleeper.sleep(record->deadline);
    lock.lock();
    state_->throw_if_failed();
    r = state_->comm.async_error();
    if (r == ncclInProgress && Clock::now() >= record->deadline) {
      lock.unlock();
      const std::string reason = op_timeout_message(
          {label_, record->op, state_->op_timeout, {}, "NCCL was still setting up its connections; the communicator "
                                                       "was aborted"});
      state_->fail(std::make_exception_ptr(TimeoutError(reason)), reason, GroupState::Origin::self);
      state_->throw_if_failed();
    }
  }
  if (r != ncclSuccess) {
    std::string reason = describe(r, state_->comm.get(), record->op, label_);
    if (!is_fatal(r)) throw BackendError(reason);  // a caller bug: the communicator stays usable
    lock.unlock();
    reason += "; the communicator was aborted";
    state_->fail(std::make_exception_ptr(BackendError(reason)), reason, GroupState::Origin::self);
    state_->throw_if_failed();
  }
  check_cuda(cudaEventRecord(record->event, stream_.get()), label_ + ": cudaEventRecord(" + record->op + ")");
  state_->in_flight->add(record, InFlightOps::Hold::strong);  // still under comm_mutex (GroupState::fail)
  return std::make_shared<NcclWork>(state_, std::move(record));
}

WorkHandle NcclBackend::all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) {
  require_device(buffer, "all_reduce", "in-place");
  check_prescale(Where::joined({label_, ": all_reduce"}), buffer, options.prescale);  // host buffers only
  const ncclDataType_t type = to_nccl(buffer.dtype);
  const ncclRedOp_t op = to_nccl(options.op);
  return issue(call, op_desc("all_reduce", buffer).with_reduce(options.op),
               fmt::format("{}, {}", describe_view(buffer), reduce_op_name(options.op)),
               [=](ncclComm_t comm, cudaStream_t s) {
                 return ncclAllReduce(buffer.data, buffer.data, buffer.count, type, op, comm, s);
               });
}

WorkHandle NcclBackend::broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) {
  require_device(buffer, "broadcast", "in-place");
  if (!root_ok(options.root, size_)) check_root(op_where("broadcast", name_), options.root, size_);
  const ncclDataType_t type = to_nccl(buffer.dtype);
  return issue(call, op_desc("broadcast", buffer).with_root(options.root),
               fmt::format("{}, root {}", describe_view(buffer), options.root),
               [=](ncclComm_t comm, cudaStream_t s) {
                 return ncclBroadcast(buffer.data, buffer.data, buffer.count, type, options.root, comm, s);
               });
}

WorkHandle NcclBackend::all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions&) {
  require_device(input, "all_gather", "input");
  require_device(output, "all_gather", "output");
  check_all_gather_shapes(Where::joined({label_, ": all_gather"}), input, output, size_);
  const ncclDataType_t type = to_nccl(input.dtype);
  return issue(call, op_desc("all_gather", input), fmt::format("{} per rank", describe_view(input)),
               [=](ncclComm_t comm, cudaStream_t s) {
                 return ncclAllGather(input.data, output.data, input.count, type, comm, s);
               });
}

WorkHandle NcclBackend::reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) {
  require_device(input, "reduce_scatter", "input");
  require_device(output, "reduce_scatter", "output");
  check_reduce_scatter_shapes(Where::joined({label_, ": reduce_scatter"}), input, output, size_);
  const ncclDataType_t type = to_nccl(input.dtype);
  const ncclRedOp_t op = to_nccl(options.op);
  return issue(call, op_desc("reduce_scatter", input).with_reduce(options.op),
               fmt::format("{} per rank, {}", describe_view(output), reduce_op_name(options.op)),
               [=](ncclComm_t comm, cudaStream_t s) {
                 return ncclReduceScatter(input.data, output.data, output.count, type, op, comm, s);
               });
}

WorkHandle NcclBackend::barrier(const Op& call, const BarrierOptions&) {
  void* scratch = barrier_scratch_.data();
  return issue(call, op_desc("barrier"), "", [=](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm, s);
  });
}

}  // namespace fastrun::nccl
