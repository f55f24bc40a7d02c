#pragma once
// One communication thread per process group with a FIFO of tasks: collectives run in the order
// they were issued (every rank issues the same order), off the caller's thread, so DDP can
// overlap communication with computation. Destruction drains the queue and joins, unless
// abandon() was called (the thread is blocked on a dead peer): then the thread is detached and
// keeps its own references alive until it returns.
//
// A thread that is about to wait for a task may run it itself (runner()) when it is the next one
// and no task is running: an op issued and waited at once (a metric all-reduce after a barrier,
// the OSU benchmarks' pattern) then costs no hand-off, two futex wake-ups of sleeping threads,
// and runs on the thread whose CPU its peers last saw (docs/benchmarks.md, "Single calls").
// Order is kept: whoever runs a task holds the queue's run lock.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace fastrun {

class CommThread {
 public:
  explicit CommThread(std::string name);
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Runs `task` after every earlier task. Tasks must not throw (they report through their Work).
  // Returns the task's ticket, for runner().
  std::uint64_t post(std::function<void()> task);
  // A function that runs task `ticket` on the calling thread if it is next and nothing runs now,
  // and returns whether it did (false: it runs, ran, or waits behind another on the thread).
  // Safe to call from any thread, also after the CommThread is gone (then it does nothing).
  std::function<bool()> runner(std::uint64_t ticket) const;
  // Do not wait for the thread at destruction (it may be stuck in a collective with a dead peer).
  void abandon();

 private:
  struct Task {
    std::uint64_t ticket;
    std::function<void()> run;
  };
  struct Queue {
    std::mutex run_mutex;  // held while a task runs, by the thread or a waiter (runner())
    std::mutex mutex;      // the rest
    std::condition_variable cv;
    std::deque<Task> tasks;
    std::uint64_t next_ticket = 0;
    bool stop = false;
  };
  static void run(std::shared_ptr<Queue> queue);

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace fastrun
