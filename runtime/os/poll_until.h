#pragma once
// The one "poll until ready or the deadline" loop, for waits with nothing to sleep on (a file
// that appears, a lock, a port that starts listening, a process that goes away). The caller's
// check runs first, at once, so a wait for something already there costs no sleep; then the
// sleeps grow from `first` to `max` (doubling), never past the deadline. On false the caller
// throws its own timeout error, naming who or what did not arrive.
#include <chrono>
#include <random>

namespace fastrun::os {

struct Backoff {
  std::chrono::microseconds first;  // the first sleep
  std::chrono::microseconds max;    // sleeps double up to this; first == max polls at a fixed interval
  // Each sleep is scaled by a random factor in [0.5, 1.5), so that hundreds of processes started
  // together do not retry in lock-step (pytorch#129261).
  bool jitter = false;
};

// The sleeping half of poll_until, for a loop that cannot be written as one predicate.
class BackoffSleeper {
 public:
  explicit BackoffSleeper(const Backoff& policy);
  // Sleeps for the current delay (at most until `deadline`), then doubles it up to the maximum.
  void sleep(std::chrono::steady_clock::time_point deadline);

 private:
  Backoff policy_;
  std::chrono::microseconds delay_;
  std::minstd_rand jitter_;
  bool seeded_ = false;
};

// Calls `ready()` until it returns true (then true) or, after a false, the deadline has passed
// (then false). `ready` may throw to end the wait with an error of its own.
template <typename Ready>
bool poll_until(std::chrono::steady_clock::time_point deadline, const Backoff& backoff, Ready&& ready) {
  BackoffSleeper sleeper(backoff);
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    sleeper.sleep(deadline);
  }
}

}  // namespace fastrun::os
