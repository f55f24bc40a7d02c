#include "fastrun/launcher/supervisor.h"

#include <signal.h>

#include "fastrun/launcher/job_attempt.h"

namespace fastrun::launcher {

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

JobResult Supervisor::run() { return run_job_attempt(options_); }

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
