#include "fastrun/runtime/process_group/comm_thread.h"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace fastrun {

CommThread::CommThread(std::string name) : queue_(std::make_shared<Queue>()) {
  thread_ = std::thread(&CommThread::run, queue_);
  name.resize(std::min<std::size_t>(name.size(), 15));  // Linux thread names are at most 15 chars
  pthread_setname_np(thread_.native_handle(), name.c_str());
}

CommThread::~CommThread() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stop = true;
  }
  queue_->cv.notify_all();
  if (abandoned_) thread_.detach();
  else thread_.join();
}

std::uint64_t CommThread::post(std::function<void()> task) {
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(queue_->mutex);
    ticket = queue_->next_ticket++;
    queue_->tasks.push_back(Task{ticket, std::move(task)});
  }
  queue_->cv.notify_one();
  return ticket;
}

std::function<bool()> CommThread::runner(std::uint64_t ticket) const {
  return [weak = std::weak_ptr<Queue>(queue_), ticket] {
    auto queue = weak.lock();
    if (!queue) return false;
    std::unique_lock run(queue->run_mutex, std::try_to_lock);
    if (!run.owns_lock()) return false;  // a task runs on the thread now: ours waits its turn there
    std::function<void()> task;
    {
      std::lock_guard lock(queue->mutex);
      if (queue->tasks.empty() || queue->tasks.front().ticket != ticket) return false;
      task = std::move(queue->tasks.front().run);
      queue->tasks.pop_front();
    }
    task();
    return true;
  };
}

void CommThread::abandon() { abandoned_ = true; }

void CommThread::run(std::shared_ptr<Queue> queue) {
  for (;;) {
    {
      std::unique_lock lock(queue->mutex);
      queue->cv.wait(lock, [&] { return queue->stop || !queue->tasks.empty(); });
      if (queue->tasks.empty()) return;  // stop requested and drained
    }
    // The run lock before taking the task: a waiter running the front one (runner()) finishes
    // it before the next starts here.
    std::lock_guard run(queue->run_mutex);
    std::function<void()> task;
    {
      std::lock_guard lock(queue->mutex);
      if (queue->tasks.empty()) continue;  // a waiter ran it
      task = std::move(queue->tasks.front().run);
      queue->tasks.pop_front();
    }
    task();
  }
}

}  // namespace fastrun
