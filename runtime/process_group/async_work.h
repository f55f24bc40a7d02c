#pragma once
// Work handles for backends that run collectives on a communication thread.
//   AsyncWork: completed by the comm thread (complete()/fail()); wait() sleeps in short slices,
//              checking the job's failure key between slices, so a dead peer turns into a
//              PeerFailure within ~kPollInterval even while the comm thread is still blocked.
//   CompletedWork: an already finished operation (local no-ops, world of one, NO_SYNC).
// Threading: complete/fail from one thread, wait/completed from any number of others.
//
// The caller's memory: once a wait() gave up (timeout, peer failure) the caller may free its
// buffers, so the comm thread touches them only inside touch_caller_memory() / complete(write
// back), which run under the Work's lock and are skipped once a wait gave up: that is the
// happens-before edge between the thread's last access and the caller's free. A backend that
// cannot cancel an op (gloo) therefore runs it on op-owned copies (group_runtime.h, staging); one
// that can (shm) touches the caller's buffers directly and gets `release_grace`: a wait that
// gives up first cancels the op (on_abort) and then waits up to that long for the thread to let go.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "fastrun/runtime/process_group/failure_watch.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/process_group/in_flight.h"

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

// The handle of an op that finished without error where it was called. Every call returns the
// same object, through a handle that owns nothing (the aliasing constructor over an empty one):
// copying and dropping it touch no reference count, where a counted handle costs a locked
// increment and decrement per op (and make_shared an allocation), on ops that take 0.1 µs.
// The object lives until the process ends (never freed, so a handle held anywhere stays valid).
// Such a handle's use_count() is 0 and a weak_ptr made from it is expired at once: nothing
// watches a finished op's handle (the flight record attaches only ops still running,
// Group::forward).
inline WorkHandle completed_work() {
  static Work* const done = new CompletedWork();
  return WorkHandle(WorkHandle(), done);
}

// In its group runtime's registry of ops in flight (in_flight.h) from the moment it is queued.
class AsyncWork final : public Work, public InFlightOp {
 public:
  // `label` and `op` name the operation for messages: "rank 1 in group 'world' (gloo)" and
  // "all_reduce #7". `watch` (may be null) is polled between wait slices. `on_abort` runs (once) when wait()
  // gives up on a failure or a timeout, so the backend can mark its group unusable and cancel
  // the op; wait() then waits up to `release_grace` for the op to end.
  // `on_stall` (may be empty) runs on the waiting thread, without the lock, once a wait has
  // lasted StalledOpCheck::kFirstCheck, then after twice as long each time (at most
  // kMaxInterval apart), and before a wait gives up on a peer's failure: the backend's check
  // for ranks that issued different ops (stalled_op_check.h), which fails the op from outside
  // when it finds them.
  AsyncWork(const std::string& label, std::string op, Duration default_timeout, std::shared_ptr<FailureWatch> watch,
            std::function<void(const std::string& reason)> on_abort, Duration release_grace = Duration::zero(),
            std::function<void()> on_stall = {});

  void complete();
  // Runs `write_back` (copies into the caller's buffers) and completes, atomically with respect
  // to a wait() giving up: if one already did, the write-back is skipped.
  void complete(const std::function<void()>& write_back);
  void fail(std::exception_ptr error);
  // Fails the op from outside the thread that runs it (GroupRuntime::in_flight_failer); the
  // first outcome stands. An op that may be working on the caller's buffers (release_grace > 0)
  // is then treated like a wait that gave up: a wait returns `error` once the op let go of them
  // (at most release_grace); any other op's waits return it at once.
  void fail_from_outside(std::exception_ptr error) override;
  bool ended() override { return ended_.load(std::memory_order_acquire); }
  // Runs `touch` unless a wait() gave up on this op; false when skipped.
  bool touch_caller_memory(const std::function<void()>& touch);
  // An op on the caller's buffers (release_grace > 0) that does not work on them from its start
  // (it waits behind others on the comm thread, or runs a prelude first: group_runtime.h): until
  // enter_caller_memory() it holds none of them, so a wait that gives up, or a failure from
  // outside, returns at once instead of waiting up to release_grace. Call before the Work is
  // handed out.
  void enters_caller_memory_later() { holding_ = false; }
  // The op is about to work on the caller's buffers: false, and it must not, once its wait gave
  // up or it failed.
  bool enter_caller_memory();

  // `run_here` (CommThread::runner) runs the op on the waiting thread if it has not started yet
  // and is next; wait() calls it first unless it gives up sooner than the op's own timeout (it
  // could not leave an op it runs itself). Set once, before the Work is handed out.
  void set_runner(std::function<bool()> run_here) { runner_ = std::move(run_here); }

  void wait(Duration timeout = Duration::zero()) override;
  bool completed() override;

 private:
  [[noreturn]] void give_up(std::unique_lock<std::mutex>& lock, std::exception_ptr error, const std::string& reason);
  void fail_locked(std::exception_ptr error);  // fail()'s work, under the lock

  std::string label_;
  std::string op_;
  std::string what_;  // "label: op"
  Duration default_timeout_;
  std::shared_ptr<FailureWatch> watch_;
  std::function<void(const std::string&)> on_abort_;
  Duration release_grace_;
  std::function<void()> on_stall_;
  std::function<bool()> runner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> ended_{false};  // done_, readable without the lock (ended())
  bool abandoned_ = false;  // a wait() gave up: the caller's buffers are no longer ours
  bool holding_ = true;     // the op may be working on the caller's buffers (enters_caller_memory_later)
  std::exception_ptr error_;
  std::exception_ptr outside_error_;  // fail_from_outside on an op that holds the caller's buffers
  std::string outside_reason_;        // its text, for on_abort
};

}  // namespace fastrun
