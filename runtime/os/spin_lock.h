#pragma once
// A lock for critical sections of a few dozen instructions taken on every op a user issues: one
// atomic exchange to take it and a plain release store to leave it, where a std::mutex costs two
// locked instructions and about 60 more per lock and unlock (callgrind, 2026-12-07). A thread
// that finds it held yields its CPU between looks, so a holder preempted on a busy machine is not
// spun against; a waiter never sleeps, so it is not for long sections or for waiting on events.
#include <sched.h>

#include <atomic>

namespace fastrun {

class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) ::sched_yield();
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace fastrun
