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

void CommThread::post(std::function<void()> task) {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->tasks.push_back(std::move(task));
  }
  queue_->cv.notify_one();
}

void CommThread::abandon() { abandoned_ = true; }

void CommThread::run(std::shared_ptr<Queue> queue) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(queue->mutex);
      queue->cv.wait(lock, [&] { return queue->stop || !queue->tasks.empty(); });
      if (queue->tasks.empty()) return;  // stop requested and drained
      task = std::move(queue->tasks.front());
      queue->tasks.pop_front();
    }
    task();
  }
}

}  // namespace fastrun
