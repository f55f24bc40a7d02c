#include "fastrun/runtime/process_group/async_work.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun {

AsyncWork::AsyncWork(std::string what, Duration default_timeout, std::shared_ptr<FailureWatch> watch,
                     std::function<void(const std::string&)> on_abort, Duration release_grace)
    : what_(std::move(what)),
      default_timeout_(default_timeout),
      watch_(std::move(watch)),
      on_abort_(std::move(on_abort)),
      release_grace_(release_grace) {}

void AsyncWork::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void AsyncWork::complete(const std::function<void()>& write_back) {
  {
    std::lock_guard lock(mutex_);
    if (!abandoned_) write_back();
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

bool AsyncWork::touch_caller_memory(const std::function<void()>& touch) {
  std::lock_guard lock(mutex_);
  if (abandoned_) return false;
  touch();
  return true;
}

bool AsyncWork::completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void AsyncWork::give_up(std::unique_lock<std::mutex>& lock, std::exception_ptr error, const std::string& reason) {
  abandoned_ = true;  // from here on the thread leaves the caller's buffers alone
  lock.unlock();
  if (on_abort_) on_abort_(reason);
  if (release_grace_ > Duration::zero()) {
    // The op was cancelled: let it leave the caller's memory before the caller may free it.
    lock.lock();
    cv_.wait_for(lock, release_grace_, [&] { return done_; });
    lock.unlock();
  }
  std::rethrow_exception(error);
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
      give_up(lock, std::make_exception_ptr(TimeoutError(reason)), reason);
    }
    cv_.wait_for(lock, std::min<Duration>(slice, Duration(deadline - now)));
    if (done_ || !watch_) continue;
    lock.unlock();
    auto failure = watch_->poll();
    lock.lock();
    if (failure && !done_) {
      const std::string reason = fmt::format("{}: aborted because a peer failed: {}", what_, *failure);
      give_up(lock, std::make_exception_ptr(PeerFailure(reason)), reason);
    }
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace fastrun
