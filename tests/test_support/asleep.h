#pragma once
// Proof that a waiter is blocked before the test wakes it: a wake-up test that only sleeps a
// while before setting the key may set it before the waiter waits, and then measures nothing.
// The kernel's scheduler state of the thread (/proc/<pid>/task/<tid>/stat, field 3) says it:
// 'S' is an interruptible sleep (futex, nanosleep, recv, epoll_wait).
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <string>
#include <thread>

namespace fastrun::test {

// The state letter of thread `tid` of process `pid` ('R', 'S', 'D', 'Z', ...), or 0 when gone.
inline char thread_state(pid_t pid, pid_t tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  const auto close = line.rfind(')');  // the name in parentheses may hold spaces
  return close == std::string::npos || close + 2 >= line.size() ? 0 : line[close + 2];
}

// Waits up to `timeout` until the thread has been seen asleep twice, 10 ms apart (one sighting
// can be a lock taken on the way into the call); false when it never was.
inline bool wait_until_asleep(pid_t pid, pid_t tid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    seen = thread_state(pid, tid) == 'S' ? seen + 1 : 0;
    if (seen == 2) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The wake-up bound the stores promise: a waiter sleeps on the very word or socket a writer
// signals (the file store polls every 10 ms at most), so it returns within scheduling delay.
// Without the wake-up it would sleep out its whole timeout, kWaiterTimeout.
inline constexpr std::chrono::milliseconds kWakeBound{500};
inline constexpr std::chrono::seconds kWaiterTimeout{3};

struct WakeResult {
  bool asleep = false;  // the waiter was seen asleep before wake() ran
  std::string error;    // what the waiter threw, if anything
  std::chrono::steady_clock::duration latency{};  // from wake() starting to the waiter returning
};

// Runs wait() on a new thread, waits until that thread sleeps, then runs wake() here.
template <typename Wait, typename Wake>
WakeResult measure_wake(Wait&& wait, Wake&& wake) {
  WakeResult r;
  std::atomic<pid_t> tid{0};
  std::chrono::steady_clock::time_point woke;
  std::thread waiter([&] {
    tid = ::gettid();
    try {
      wait();
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    woke = std::chrono::steady_clock::now();
  });
  while (tid == 0) std::this_thread::yield();
  r.asleep = wait_until_asleep(::getpid(), tid, std::chrono::seconds(5));
  const auto t0 = std::chrono::steady_clock::now();
  wake();
  waiter.join();
  r.latency = woke - t0;
  return r;
}

}  // namespace fastrun::test
