#pragma once
// The one "do this every interval until stopped" thread (a heartbeat, a pulse, a board scan, a
// store poll). Stopping is prompt whatever the interval: stop() wakes the sleep and joins, so an
// owner that stops it in its destructor (or declares it last, so it goes first) knows the tick
// no longer touches its members.
//
// Threading: start() and stop() are for the owner's thread(s); the tick runs on the periodic
// thread alone, never two at once, and never under this object's lock (it may take its owner's
// locks, and call stop() on itself: that ends the loop without joining itself).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace fastrun::os {

class PeriodicThread {
 public:
  // When the first tick runs: at start (a heartbeat), or one interval after it (a poll of
  // something that starts out empty).
  enum class First { now, after_interval };
  // One round; returns false to end the thread (nothing more to do; stop() still joins it).
  using Tick = std::function<bool()>;

  PeriodicThread() = default;
  ~PeriodicThread();  // stop()
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Starts the thread. Once per object; throws std::logic_error on a second start.
  void start(std::chrono::milliseconds interval, Tick tick, First first = First::now);
  // Wakes the thread and joins it, after the tick in progress (if any) returns. Idempotent; from
  // inside the tick it only ends the loop (the owner's stop() or destructor joins).
  void stop();

 private:
  void run(std::chrono::milliseconds interval, First first);
  Tick tick_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fastrun::os
