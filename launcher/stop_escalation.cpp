#include "fastrun/launcher/stop_escalation.h"

#include <signal.h>

#include <algorithm>

namespace fastrun::launcher {

void StopEscalation::begin(std::vector<RankProcess>& ranks, int sig) {
  stopping_ = true;
  signal_live_ranks(ranks, sig);
  kill_deadline_ =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kill_timeout_s_));
}

void StopEscalation::hurry(int sig) {
  kill_deadline_ = Clock::now();
  second_signal_ = sig;
}

int StopEscalation::wait_ms() const {
  if (!kill_deadline_) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_deadline_ - Clock::now());
  return static_cast<int>(std::max<long>(0, left.count() + 1));
}

void StopEscalation::kill_if_due(std::vector<RankProcess>& ranks) {
  if (!kill_deadline_ || Clock::now() < *kill_deadline_) return;
  kill_deadline_.reset();
  for (RankProcess& rk : ranks) {
    if (!rk.alive) continue;
    rk.sigkilled_by_us = true;
    ::killpg(rk.pid, SIGKILL);
  }
}

}  // namespace fastrun::launcher
