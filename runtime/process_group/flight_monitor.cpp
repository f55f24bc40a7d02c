#include "fastrun/runtime/process_group/flight_monitor.h"

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/flight_answer.h"
#include "fastrun/runtime/process_group/flight_recorder.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun {
namespace {
std::mutex g_current_mutex;
// The monitor of each rank in this process (one, except in tests that run ranks as threads)
// while a group holds it.
std::map<int, std::weak_ptr<FlightMonitor>> g_current;
}  // namespace

std::shared_ptr<FlightMonitor> FlightMonitor::acquire(const std::shared_ptr<Store>& job_store, int global_rank) {
  std::lock_guard lock(g_current_mutex);
  if (auto m = g_current[global_rank].lock()) return m;
  auto m = std::make_shared<FlightMonitor>(job_store->clone(), global_rank);
  g_current[global_rank] = m;
  return m;
}

FlightMonitor::FlightMonitor(std::unique_ptr<Store> store, int global_rank)
    : store_(std::move(store)), global_rank_(global_rank) {
  // A request follows an op timeout, far later than one interval: the first look is one interval in.
  thread_.start(kInterval, [this] { return answer_requests(); }, os::PeriodicThread::First::after_interval);
}

FlightMonitor::~FlightMonitor() { thread_.stop(); }

void FlightMonitor::add(const FlightRecorder* recorder) {
  std::lock_guard lock(mutex_);
  recorders_.push_back(recorder);
  closed_.erase(recorder->name());
}

void FlightMonitor::remove(const FlightRecorder* recorder) {
  Closed last{recorder->last_collective_seq(), recorder->state_line(), std::chrono::steady_clock::now()};
  std::lock_guard lock(mutex_);
  recorders_.erase(std::remove(recorders_.begin(), recorders_.end(), recorder), recorders_.end());
  const bool live = std::any_of(recorders_.begin(), recorders_.end(),
                                [&](const FlightRecorder* r) { return r->name() == recorder->name(); });
  if (live) return;
  closed_[recorder->name()] = std::move(last);
  if (closed_.size() > kMaxClosed)
    closed_.erase(std::min_element(closed_.begin(), closed_.end(),
                                   [](const auto& a, const auto& b) { return a.second.at < b.second.at; }));
}

std::string FlightMonitor::dump() const {
  std::lock_guard lock(mutex_);  // recorders unregister under this lock before they go away
  std::string out;
  for (const FlightRecorder* r : recorders_) {
    out += flight::answer_line(r->name(), r->last_collective_seq(), r->busy(), r->state_line());
  }
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [name, c] : closed_) {
    out += flight::answer_line(name, c.last_seq, false,
                               fmt::format("closed the group {:.1f} s ago; before that: {}",
                                           std::chrono::duration<double>(now - c.at).count(), c.line));
  }
  return out;
}

bool FlightMonitor::answer_requests() {
  try {
    // Non-blocking calls only, so that stopping never waits on a store timeout.
    if (store_->check({kFlightRequestKey})) {
      const std::int64_t n = store_->add(kFlightRequestKey, 0);
      if (n > answered_) {
        // Every request since the last answer: ranks that time out together ask together.
        // (At most kMaxBacklog: older askers have given up already.)
        const Bytes answer = to_bytes(dump());
        for (std::int64_t k = std::max(answered_ + 1, n - kMaxBacklog + 1); k <= n; ++k)
          store_->set(flight_answer_key(k, global_rank_), answer);
        answered_ = n;
      }
    }
  } catch (const std::exception& e) {
    // The store may be gone at the very end of a job; the monitor has nothing to add then.
    if (!logged_) log::debug("flight monitor: cannot read '{}': {}", kFlightRequestKey, e.what());
    logged_ = true;
  }
  return true;
}

}  // namespace fastrun
