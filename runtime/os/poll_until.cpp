#include "fastrun/runtime/os/poll_until.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace fastrun::os {

using Clock = std::chrono::steady_clock;

BackoffSleeper::BackoffSleeper(const Backoff& policy)
    : policy_(policy),
      delay_(policy.first),
      jitter_(static_cast<unsigned>(Clock::now().time_since_epoch().count()) ^ static_cast<unsigned>(::getpid())) {}

void BackoffSleeper::sleep(Clock::time_point deadline) {
  Clock::duration d = delay_;
  if (policy_.jitter) {
    std::uniform_real_distribution<double> factor(0.5, 1.5);
    d = std::chrono::duration_cast<Clock::duration>(delay_ * factor(jitter_));
  }
  const auto now = Clock::now();
  if (deadline != Clock::time_point::max()) d = std::min(d, std::max(Clock::duration::zero(), deadline - now));
  std::this_thread::sleep_for(d);
  delay_ = std::min(delay_ * 2, policy_.max);
}

}  // namespace fastrun::os
