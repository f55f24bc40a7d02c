#include "fastrun/runtime/os/periodic_thread.h"

#include <stdexcept>

namespace fastrun::os {

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
  // From the tick itself: the flag ends the loop; joining here would wait on this very thread.
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void PeriodicThread::run(std::chrono::milliseconds interval, First first) {
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
