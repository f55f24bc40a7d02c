#include "fastrun/launcher/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "fastrun/launcher/job_attempt.h"
#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/restarts.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/os/full_io.h"

namespace fastrun::launcher {
namespace {

// A failure another attempt may fix: not a stop the user (or the closed output) asked for.
bool restartable(const JobResult& r) { return r.exit_code != 0 && r.stop_signal == 0; }

}  // namespace

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

void Supervisor::use_attempt_log_dir(const std::string& run_log_dir, int attempt) {
  if (run_log_dir.empty()) return;
  options_.job.log_dir = attempt_log_dir(run_log_dir, attempt);
  make_directories(options_.job.log_dir);
}

JobResult Supervisor::run() {
  const std::string run_log_dir = options_.job.log_dir;
  if (options_.restarts_by_caller) {
    const int attempt = options_.job.attempt;
    use_attempt_log_dir(run_log_dir, attempt);
    JobResult result = run_job_attempt(options_);
    result.attempt = attempt;
    return result;
  }
  const int max_restarts = options_.renew_store ? options_.job.max_restarts : 0;
  const int err = options_.self ? options_.self->terminal_err : 2;
  for (int attempt = 0;; ++attempt) {
    // 1. The attempt: its number in the ranks' environment, its own log folder.
    options_.job.attempt = attempt;
    if (max_restarts > 0) use_attempt_log_dir(run_log_dir, attempt);
    JobResult result = run_job_attempt(options_);
    result.attempt = attempt;
    if (attempt >= max_restarts || !restartable(result)) return result;
    // 2. Between attempts: the back-off (a signal to the launcher ends the job here too), then
    //    an empty store; the ranks' segments go with the old one.
    const auto delay = restart_backoff(attempt + 1);
    const std::string next = restart_notice(attempt + 1, attempt + 1, max_restarts, delay);
    os::write_all(err, next.data(), next.size());
    if (const int sig = wait_before_restart(delay, options_.handle_signals)) {
      const std::string stopped =
          fmt::format("fastrun: got {} before attempt {} started; no rank was running\n", signal_name(sig), attempt + 1);
      os::write_all(err, stopped.data(), stopped.size());
      return JobResult{128 + sig, std::nullopt, sig, attempt};
    }
    options_.failure_store = options_.renew_store();
  }
}

sigset_t Supervisor::handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGCHLD);  // only the CLI reads it (adopted orphans, leftovers.h)
  // An inherited SIG_IGN for SIGHUP (nohup) is respected: the job keeps ignoring hang-ups.
  struct sigaction old{};
  if (::sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace fastrun::launcher
