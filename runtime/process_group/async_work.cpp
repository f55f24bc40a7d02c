#include "fastrun/runtime/process_group/async_work.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/op_timeout.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"

namespace fastrun {

AsyncWork::AsyncWork(const std::string& label, std::string op, Duration default_timeout,
                     std::shared_ptr<FailureWatch> watch, std::function<void(const std::string&)> on_abort,
                     Duration release_grace, std::function<void()> on_stall)
    : label_(label),
      op_(std::move(op)),
      what_(fmt::format("{}: {}", label_, op_)),
      default_timeout_(default_timeout),
      watch_(std::move(watch)),
      on_abort_(std::move(on_abort)),
      release_grace_(release_grace),
      on_stall_(std::move(on_stall)) {}

void AsyncWork::complete() {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;  // failed from outside already (GroupRuntime::in_flight_failer)
    done_ = true;
    ended_.store(true, std::memory_order_release);
    error_ = outside_error_;  // the first outcome stands
  }
  cv_.notify_all();
}

void AsyncWork::complete(const std::function<void()>& write_back) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;  // failed from outside already: the caller's memory is no longer ours
    if (!abandoned_) write_back();
    done_ = true;
    ended_.store(true, std::memory_order_release);
    error_ = outside_error_;  // the first outcome stands
  }
  cv_.notify_all();
}

void AsyncWork::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    fail_locked(std::move(error));
  }
  cv_.notify_all();
}

void AsyncWork::fail_locked(std::exception_ptr error) {
  if (done_) return;  // the first outcome stands
  done_ = true;
  ended_.store(true, std::memory_order_release);
  // A waiter may now return and free its buffers: the comm thread must leave them alone, as
  // after a wait that gave up (touch_caller_memory, enter_caller_memory and complete(write_back)
  // check this).
  abandoned_ = true;
  error_ = outside_error_ ? outside_error_ : std::move(error);
}

void AsyncWork::fail_from_outside(std::exception_ptr error) {
  if (release_grace_ <= Duration::zero()) return fail(std::move(error));
  std::string reason;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = what_ + ": failed";
  }
  {
    std::lock_guard lock(mutex_);
    if (done_ || outside_error_) return;
    if (!holding_) {
      fail_locked(std::move(error));  // not on the caller's buffers: it never will be, ends now
    } else {
      outside_error_ = std::move(error);
      outside_reason_ = std::move(reason);
    }
  }
  cv_.notify_all();  // a waiter returns, or gives up on the op (give_up), which waits for it to let go
}

bool AsyncWork::enter_caller_memory() {
  std::lock_guard lock(mutex_);
  if (abandoned_) return false;
  holding_ = true;
  return true;
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
  const bool holding = holding_;  // else it never enters them now (enter_caller_memory)
  lock.unlock();
  if (on_abort_) on_abort_(reason);
  if (release_grace_ > Duration::zero() && holding) {
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
  if (runner_ && timeout >= default_timeout_) runner_();  // ends done_ (or failed) when it ran the op
  const auto deadline = clock::now() + timeout;
  const Duration slice = FailureWatch::kPollInterval / 2;
  StallSchedule stall(clock::now());
  std::unique_lock lock(mutex_);
  while (!done_) {
    if (outside_error_) give_up(lock, outside_error_, outside_reason_);
    const auto now = clock::now();
    if (now >= deadline) {
      const std::string reason = op_timeout_message({label_, op_, timeout, {}, {}});
      give_up(lock, std::make_exception_ptr(TimeoutError(reason)), reason);
    }
    cv_.wait_for(lock, std::min<Duration>(slice, Duration(deadline - now)));
    if (on_stall_ && !done_ && stall.due(clock::now())) {
      lock.unlock();
      on_stall_();  // may fail this op from outside: the loop's next round sees it
      lock.lock();
      continue;
    }
    if (done_ || !watch_) continue;
    lock.unlock();
    auto failure = watch_->poll();
    lock.lock();
    if (failure && !done_ && on_stall_) {
      // A peer that failed may have found the ranks out of step: that names the root cause.
      lock.unlock();
      on_stall_();
      lock.lock();
      if (done_ || outside_error_) continue;
    }
    if (failure && !done_) {
      const std::string reason = fmt::format("{}: aborted because a peer failed: {}", what_, *failure);
      give_up(lock, std::make_exception_ptr(PeerFailure(reason)), reason);
    }
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace fastrun
