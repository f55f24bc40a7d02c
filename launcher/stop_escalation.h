#pragma once
// Stopping the ranks as a policy (docs/launching.md, "Failure"): a signal to every live rank's
// process group, then SIGKILL to those still alive after --kill-timeout; a second stop request
// while stopping brings the SIGKILL forward to now.
// Threading: the supervisor's thread only.
#include <chrono>
#include <optional>
#include <vector>

#include "fastrun/launcher/rank_process.h"

namespace fastrun::launcher {

class StopEscalation {
 public:
  explicit StopEscalation(double kill_timeout_s) : kill_timeout_s_(kill_timeout_s) {}

  bool stopping() const { return stopping_; }

  // Sends sig to every live rank and starts the kill timeout.
  void begin(std::vector<RankProcess>& ranks, int sig);

  // A stop request (sig) while already stopping: no more grace.
  void hurry(int sig);
  // The signal of that request, or 0.
  int second_signal() const { return second_signal_; }

  // How long the supervisor may wait for events before the SIGKILL is due; -1: none is pending.
  int wait_ms() const;

  // Once the kill timeout has passed: SIGKILL to every live rank (marked sigkilled_by_us).
  void kill_if_due(std::vector<RankProcess>& ranks);

 private:
  using Clock = std::chrono::steady_clock;
  const double kill_timeout_s_;
  bool stopping_ = false;
  int second_signal_ = 0;
  std::optional<Clock::time_point> kill_deadline_;
};

}  // namespace fastrun::launcher
