#include "fastrun/launcher/node_pulse.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "fastrun/launcher/node_watch.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher {

NodePulse::NodePulse(const std::string& address, const std::string& token, int node_rank) : me_(node_rank) {
  StoreOptions so;
  so.timeout = std::chrono::seconds(5);
  so.token = token;
  client_ = connect_store(address, so);
  thread_.start(NodeWatch::kInterval, [this] {
    try {
      client_->add(launcher_keys::pulse(me_), 1);
      return true;
    } catch (const std::exception&) {
      return false;  // node 0's store is gone: the launcher's own waits report it
    }
  });
}

NodePulse::~NodePulse() { thread_.stop(); }

std::vector<int> PulseWatch::still(Store& store, const std::vector<int>& nodes, Clock::time_point now) {
  std::vector<int> out;
  for (int k : nodes) {
    const std::int64_t pulse = store.add(launcher_keys::pulse(k), 0);
    const auto it = seen_.find(k);
    if (it == seen_.end()) {
      seen_.emplace(k, Seen{pulse, now, false});
    } else if (it->second.pulse != pulse) {
      it->second = Seen{pulse, now, true};
    } else if (now - it->second.since >= NodeWatch::kLostAfter) {
      out.push_back(k);
    }
  }
  return out;
}

bool PulseWatch::moved(int k) const {
  const auto it = seen_.find(k);
  return it != seen_.end() && it->second.moved;
}

std::vector<int> lost_among(Store& store, const std::vector<int>& nodes) {
  using Clock = PulseWatch::Clock;
  if (nodes.empty()) return {};
  PulseWatch watch;
  const auto deadline = Clock::now() + NodeWatch::kLostAfter;
  watch.still(store, nodes, Clock::now());
  os::BackoffSleeper sleeper({NodeWatch::kInterval, NodeWatch::kInterval});
  for (;;) {
    sleeper.sleep(deadline);
    watch.still(store, nodes, Clock::now());
    const bool all_moved = std::all_of(nodes.begin(), nodes.end(), [&](int k) { return watch.moved(k); });
    if (all_moved || Clock::now() >= deadline) break;
  }
  std::vector<int> lost;
  for (int k : nodes)
    if (!watch.moved(k)) lost.push_back(k);
  return lost;
}

}  // namespace fastrun::launcher
