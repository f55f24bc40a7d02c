#include "fastrun/launcher/self_launch_restarts.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/job_binding.h"

namespace fastrun::launcher {

JobResult run_self_job_with_restarts(const JobConfig& job, JobResources& resources, int argc, char** argv) {
  // The signals the supervisor handles (a stop ends the job, a signal between attempts too),
  // blocked here in the only thread, before any rank starts, as the CLI does.
  const sigset_t handled = Supervisor::handled_signals();
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &handled, &old);
  ::signal(SIGPIPE, SIG_IGN);  // a closed console is the relay's EPIPE; every rank starts with defaults (spawn.h)
  SupervisorOptions so;
  so.job = job;
  so.exec_path = "/proc/self/exe";
  so.argv.assign(argv, argv + argc);
  so.handle_signals = true;
  so.adopt_orphans = true;
  so.rank0_stdin = ::isatty(0) ? -1 : 0;  // a terminal would stop a background rank (SIGTTIN)
  so.failure_store = resources.store();
  so.janitor = resources.janitor();
  so.renew_store = [&resources] { return resources.renew_store(); };
  if (job.binding.report) std::fputs(binding_report(job.binding, 0, own_affinity()).c_str(), stderr);
  try {
    return Supervisor(std::move(so)).run();
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
}

}  // namespace fastrun::launcher
