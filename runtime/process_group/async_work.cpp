#include "fastrun/runtime/process_group/async_work.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

AsyncWork::AsyncWork(std::string what, Duration default_timeout, std::shared_ptr<FailureWatch> watch,
                     std::function<void(const std::string&)> on_abort)
    : what_(std::move(what)),
      default_timeout_(default_timeout),
      watch_(std::move(watch)),
      on_abort_(std::move(on_abort)) {}

void AsyncWork::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void AsyncWork::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool AsyncWork::completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void AsyncWork::wait(Duration timeout) {
  using clock = std::chrono::steady_clock;
  if (timeout <= Duration::zero()) timeout = default_timeout_;
  const auto deadline = clock::now() + timeout;
  const Duration slice = FailureWatch::kPollInterval / 2;
  std::unique_lock lock(mutex_);
  while (!done_) {
    const auto now = clock::now();
    if (now >= deadline) {
      const std::string reason =
          fmt::format("{}: not finished after {:.3g} s (the op timeout is FASTRUN_OP_TIMEOUT; a peer may be "
                      "stuck or issuing a different collective)",
                      what_, std::chrono::duration<double>(timeout).count());
      lock.unlock();
      if (on_abort_) on_abort_(reason);
      throw TimeoutError(reason);
    }
    cv_.wait_for(lock, std::min<Duration>(slice, Duration(deadline - now)));
    if (done_ || !watch_) continue;
    lock.unlock();
    auto failure = watch_->poll();
    lock.lock();
    if (failure && !done_) {
      const std::string reason = fmt::format("{}: aborted because a peer failed: {}", what_, *failure);
      lock.unlock();
      if (on_abort_) on_abort_(reason);
      throw PeerFailure(reason);
    }
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace fastrun
