#pragma once
// Work handles for backends that run collectives on a communication thread.
//   AsyncWork: completed by the comm thread (complete()/fail()); wait() sleeps in short slices,
//              checking the job's failure key between slices, so a dead peer turns into a
//              PeerFailure within ~kPollInterval even while the comm thread is still blocked.
//   CompletedWork: an already finished operation (local no-ops, world of one, NO_SYNC).
// Threading: complete/fail from one thread, wait/completed from any number of others.
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun {

class CompletedWork final : public Work {
 public:
  explicit CompletedWork(std::exception_ptr error = nullptr) : error_(std::move(error)) {}
  void wait(Duration = Duration::zero()) override {
    if (error_) std::rethrow_exception(error_);
  }
  bool completed() override { return true; }

 private:
  std::exception_ptr error_;
};

inline WorkHandle completed_work() { return std::make_shared<CompletedWork>(); }

class AsyncWork final : public Work {
 public:
  // `what` names the operation for messages: "rank 1: all_reduce #7 on group 'world' (gloo)".
  // `on_abort` runs (once) when wait() gives up on a failure or a timeout, so the backend can
  // mark its group unusable.
  AsyncWork(std::string what, Duration default_timeout, std::shared_ptr<FailureWatch> watch,
            std::function<void(const std::string& reason)> on_abort);

  void complete();
  void fail(std::exception_ptr error);

  void wait(Duration timeout = Duration::zero()) override;
  bool completed() override;

 private:
  std::string what_;
  Duration default_timeout_;
  std::shared_ptr<FailureWatch> watch_;
  std::function<void(const std::string&)> on_abort_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace fastrun
