#pragma once
// One attempt of the job, the unit a supervisor runs (supervisor.h): spawn the ranks, supervise
// them until every one is reaped (applying the failure and signal rules), stop what they left
// running, print the summary. An attempt starts from nothing and leaves nothing behind, so
// running another after it is safe.
// Threading: as Supervisor::run (the calling thread must live until it returns).
#include "fastrun/launcher/supervisor.h"

namespace fastrun::launcher {

// Throws Error only when set-up fails before any rank started (log files, epoll).
JobResult run_job_attempt(SupervisorOptions& options);

}  // namespace fastrun::launcher
