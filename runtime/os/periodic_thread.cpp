#include "fastrun/runtime/os/periodic_thread.h"

#include <stdexcept>

namespace fastrun::os {
namespace {
// The PeriodicThread whose tick runs on this thread, if any: stop() from inside the tick must not
// join (itself) nor read thread_, which start() may still be assigning on the owner's thread.
thread_local const PeriodicThread* t_ticking = nullptr;
}  // namespace

PeriodicThread::~PeriodicThread() { stop(); }

void PeriodicThread::start(std::chrono::milliseconds interval, Tick tick, First first) {
  if (thread_.joinable() || tick_) throw std::logic_error("os::PeriodicThread::start: already started");
  tick_ = std::move(tick);
  thread_ = std::thread([this, interval, first] { run(interval, first); });
}

void PeriodicThread::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (t_ticking == this) return;  // from the tick itself: the flag ends the loop
  if (thread_.joinable()) thread_.join();
}

void PeriodicThread::run(std::chrono::milliseconds interval, First first) {
  t_ticking = this;
  std::unique_lock lock(mutex_);
  if (first == First::after_interval && wake_.wait_for(lock, interval, [this] { return stop_; })) return;
  while (!stop_) {
    lock.unlock();
    const bool more = tick_();
    lock.lock();
    if (!more) return;
    if (wake_.wait_for(lock, interval, [this] { return stop_; })) return;
  }
}

}  // namespace fastrun::os
