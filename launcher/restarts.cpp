#include "fastrun/launcher/restarts.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include <fmt/format.h>

#include "fastrun/launcher/supervisor.h"

namespace fastrun::launcher {

std::chrono::milliseconds restart_backoff(int restart) {
  if (restart <= 1) return std::chrono::milliseconds(0);
  const int doublings = std::min(restart - 2, 5);  // 1 s .. 16 s, then capped
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(1 << doublings), kMaxRestartBackoff);
}

std::string restart_notice(int attempt, int restart, int max_restarts, std::chrono::milliseconds delay) {
  return fmt::format("fastrun: starting attempt {} of the job (restart {} of --max-restarts {}) in {} s\n", attempt,
                     restart, max_restarts, static_cast<double>(delay.count()) / 1000);
}

std::string attempt_log_dir(const std::string& run_log_dir, int attempt) {
  if (run_log_dir.empty()) return {};
  return run_log_dir + "/attempt-" + std::to_string(attempt);
}

int wait_before_restart(std::chrono::milliseconds delay, bool signals) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + delay;
  if (!signals) {
    std::this_thread::sleep_until(deadline);
    return 0;
  }
  const sigset_t set = Supervisor::handled_signals();
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
    if (left.count() <= 0) return 0;
    timespec ts{static_cast<time_t>(left.count() / 1000000000), static_cast<long>(left.count() % 1000000000)};
    const int sig = ::sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) return sig;
    if (sig < 0 && errno != EINTR && errno != EAGAIN) return 0;  // cannot wait on signals: the delay is spent
  }
}

}  // namespace fastrun::launcher
