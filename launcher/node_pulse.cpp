#include "fastrun/launcher/node_pulse.h"

#include <chrono>
#include <cstdint>

#include "fastrun/launcher/node_watch.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher {

NodePulse::NodePulse(const std::string& address, const std::string& token, int node_rank) : me_(node_rank) {
  StoreOptions so;
  so.timeout = std::chrono::seconds(5);
  so.token = token;
  client_ = connect_store(address, so);
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      lock.unlock();
      try {
        client_->add(launcher_keys::pulse(me_), 1);
      } catch (const std::exception&) {
        return;  // node 0's store is gone: the launcher's own waits report it
      }
      lock.lock();
      wake_.wait_for(lock, NodeWatch::kInterval, [this] { return stop_; });
    }
  });
}

NodePulse::~NodePulse() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<int> lost_among(Store& store, const std::vector<int>& nodes) {
  using Clock = std::chrono::steady_clock;
  if (nodes.empty()) return {};
  const auto since = Clock::now();
  std::vector<std::int64_t> first;
  for (int k : nodes) first.push_back(store.add(launcher_keys::pulse(k), 0));
  std::vector<bool> moved(nodes.size(), false);
  for (;;) {
    std::this_thread::sleep_for(NodeWatch::kInterval);
    bool open = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!moved[i]) moved[i] = store.add(launcher_keys::pulse(nodes[i]), 0) != first[i];
      open = open || !moved[i];
    }
    if (!open || Clock::now() - since >= NodeWatch::kLostAfter) break;
  }
  std::vector<int> lost;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!moved[i]) lost.push_back(nodes[i]);
  return lost;
}

}  // namespace fastrun::launcher
