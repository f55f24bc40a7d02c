#pragma once
// launch_self with restarts (SelfLaunchOptions::max_restarts or FASTRUN_MAX_RESTARTS > 0;
// docs/launching.md, "In-process spawn"). Rank 0 is normally the calling process, which no
// launcher can start again; so with restarts allowed the calling process becomes the job's
// launcher instead, as `fastrun --max-restarts N` is: it starts every rank, rank 0 included,
// from /proc/self/exe with the same argv (each returns its rank from launch_self), and runs the
// supervisor's attempts (supervisor.h): the same back-off, a new store and segments per attempt,
// FASTRUN_RESTART_COUNT, per-attempt log folders and summaries, and the last attempt's code.
#include "fastrun/launcher/job_config.h"
#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/supervisor.h"

namespace fastrun::launcher {

// Runs every attempt of `job` (whose store and log folder `resources` holds) and returns how the
// last one ended, once every rank is reaped. Call it from the main thread before any other thread
// exists: the launcher's signals are blocked in it (the supervisor reads them from a signalfd),
// as in the fastrun CLI, and stay blocked; the caller then ends the process. Throws Error when
// set-up fails before any rank started, with the signal mask given back.
JobResult run_self_job_with_restarts(const JobConfig& job, JobResources& resources, int argc, char** argv);

}  // namespace fastrun::launcher
