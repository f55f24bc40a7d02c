#pragma once
// One communication thread per process group with a FIFO of tasks: collectives run in the order
// they were issued (every rank issues the same order), off the caller's thread, so DDP can
// overlap communication with computation. Destruction drains the queue and joins, unless
// abandon() was called (the thread is blocked on a dead peer): then the thread is detached and
// keeps its own references alive until it returns.
#include <atomic>
#include <condition_variable>
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
  void post(std::function<void()> task);
  // Do not wait for the thread at destruction (it may be stuck in a collective with a dead peer).
  void abandon();

 private:
  struct Queue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<void()>> tasks;
    bool stop = false;
  };
  static void run(std::shared_ptr<Queue> queue);

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace fastrun
