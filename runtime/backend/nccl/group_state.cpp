#include "fastrun/runtime/backend/nccl/group_state.h"

#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"

namespace fastrun::nccl {

ErrorPolicy error_policy_from_env() {
  return env::get_string(env::kNcclOnError) == "raise" ? ErrorPolicy::raise : ErrorPolicy::exit;
}

WorkRecord::WorkRecord(std::string op_, Clock::time_point start_, Clock::time_point deadline_)
    : op(std::move(op_)), start(start_), deadline(deadline_) {
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
}

WorkRecord::~WorkRecord() {
  if (event) (void)cudaEventDestroy(event);
}

bool WorkRecord::finish(Status to, std::exception_ptr e) {
  int expected = pending;
  if (to == failed) {
    // Claim the record first so `error` is written by exactly one thread, then publish it.
    if (!status.compare_exchange_strong(expected, -1)) return false;
    error = std::move(e);
    status.store(failed);
    return true;
  }
  return status.compare_exchange_strong(expected, to);
}

void GroupState::fail(std::exception_ptr error, const std::string& reason, Origin origin) noexcept {
  try {
    bool first = false;
    {
      // Under `mutex`, so that the watchdog (which reads failed() holding it) never sees the
      // failure without its time.
      std::lock_guard lock(mutex);
      first = health->fail(error, reason);
      if (first) failed_at = Clock::now();
    }
    if (!first) {
      log::debug("{}: also failed after the first failure: {}", label, reason);
      return;
    }
    log::error("{}", reason);

    // The first rank to fail keeps the key (the runtime's record, first writer wins).
    if (origin == Origin::self) health->publish(reason);

    {
      std::lock_guard comm_lock(comm_mutex);
      comm.abort();  // kernels of ours end before any waiter is released to reuse its buffers
    }
    // Every operation enqueued so far (enqueue registers under comm_mutex, after the usable check
    // that the failure recorded above refuses from now on).
    in_flight->fail_all(error);
    {
      std::lock_guard lock(mutex);
      wake.notify_all();
    }
  } catch (...) {
    // Only allocation or logging can throw here; the group is marked failed regardless.
  }
}

void GroupState::throw_if_failed() {
  if (!health->failed()) return;
  if (auto e = health->first_error()) std::rethrow_exception(e);
}

void GroupState::check_usable(const std::string& op) { health->check_usable(op); }

int GroupState::poll(WorkRecord& record) {
  const int status = record.status.load();
  if (status != WorkRecord::pending) return status == -1 ? WorkRecord::pending : status;
  const cudaError_t q = cudaEventQuery(record.event);
  if (q == cudaSuccess && failed()) {
    // fail() records the failure before it aborts the communicator, and an abort lets the
    // stream move on past an operation it cut short: an end seen after the failure may be
    // that, so the operation fails with the group's first error rather than read as done.
    auto error = health->first_error();
    record.finish(WorkRecord::failed, error ? error : std::make_exception_ptr(health->unusable(record.op)));
  } else if (q == cudaSuccess) {
    record.finish(WorkRecord::done);
  } else if (q == cudaErrorCudartUnloading) {
    // The process is exiting (a group destroyed by a static destructor): not a job failure,
    // so nothing is published; the operation just cannot be waited for any more.
    record.finish(WorkRecord::failed, std::make_exception_ptr(BackendError(
                                          fmt::format("{}: {}: CUDA is shutting down (process exit)", label, record.op))));
  } else if (q != cudaErrorNotReady) {
    (void)cudaGetLastError();
    const std::string reason =
        fmt::format("{}: {} failed on the device: CUDA error {}; the communicator was aborted", label, record.op,
                    cuda_error_text(q));
    fail(std::make_exception_ptr(BackendError(reason)), reason, Origin::self);
    record.finish(WorkRecord::failed, std::make_exception_ptr(BackendError(reason)));
  }
  const int now = record.status.load();
  return now == -1 ? WorkRecord::pending : now;
}

}  // namespace fastrun::nccl
