#include "fastrun/runtime/os/poll_until.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace fastrun::os {

using Clock = std::chrono::steady_clock;

BackoffSleeper::BackoffSleeper(const Backoff& policy)
    : policy_(policy), delay_(policy.first) {}

void BackoffSleeper::sleep(Clock::time_point deadline) {
  Clock::duration d = delay_;
  if (policy_.jitter) {
    // Seeded at the first sleep, not when made: a wait that is ready at once (the common case)
    // costs no clock read, and a sleeper without jitter never seeds.
    if (!seeded_) {
      jitter_.seed(static_cast<unsigned>(Clock::now().time_since_epoch().count()) ^ static_cast<unsigned>(::getpid()));
      seeded_ = true;
    }
    std::uniform_real_distribution<double> factor(0.5, 1.5);
    d = std::chrono::duration_cast<Clock::duration>(delay_ * factor(jitter_));
  }
  if (deadline != Clock::time_point::max())
    d = std::min(d, std::max(Clock::duration::zero(), deadline - Clock::now()));
  std::this_thread::sleep_for(d);
  delay_ = std::min(delay_ * 2, policy_.max);
}

}  // namespace fastrun::os
