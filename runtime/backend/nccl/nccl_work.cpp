#include "fastrun/runtime/backend/nccl/nccl_work.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/process_group/op_timeout.h"

namespace fastrun::nccl {

bool NcclWork::completed() { return state_->poll(*record_) != WorkRecord::pending; }

void NcclWork::wait(Duration timeout) {
  const Duration limit = timeout == Duration::zero() ? state_->op_timeout : timeout;
  const auto deadline = Clock::now() + limit;
  os::BackoffSleeper sleeper({std::chrono::microseconds(20), std::chrono::microseconds(1000)});
  for (;;) {
    const int status = state_->poll(*record_);
    if (status == WorkRecord::done) return;
    if (status == WorkRecord::failed) std::rethrow_exception(record_->error);
    if (Clock::now() >= deadline) {
      const std::string reason =
          op_timeout_message({state_->label, record_->op, limit, {}, "the communicator was aborted"});
      auto error = std::make_exception_ptr(TimeoutError(reason));
      state_->fail(error, reason, GroupState::Origin::self);
      // The record was failed by fail() unless it finished meanwhile or was issued after.
      record_->finish(WorkRecord::failed, error);
      continue;  // re-read: done (it finished just now) or failed
    }
    sleeper.sleep(deadline);
  }
}

}  // namespace fastrun::nccl
