#pragma once
// In-process spawn (docs/launching.md, "In-process spawn"). Call launch_self() first thing
// in main, before any CUDA call and before starting threads:
//
//   int main(int argc, char** argv) {
//     fastrun::SelfLaunchOptions opt;
//     opt.devices = "0,1";                 // or opt.nproc = 4 for CPU ranks
//     int rank = 0;
//     try {
//       rank = fastrun::launch_self(argc, argv, opt);
//     } catch (const fastrun::ConfigError& e) {  // bad options: nothing started
//       std::fprintf(stderr, "%s\n", e.what());
//       return 2;
//     }
//     ...                                  // every rank runs from here, environment contract set
//   }
//
// Without FASTRUN_RANK in the environment the calling process becomes rank 0: it validates the
// options (ConfigError on bad input, nothing started), sets the environment contract and its own
// CUDA_VISIBLE_DEVICES with setenv, creates the job's shm store, starts ranks 1..N-1 by
// re-executing /proc/self/exe with the same argv, starts a supervisor thread and returns 0.
// With restarts allowed (max_restarts, below) it becomes the job's launcher instead, and every
// rank its child: it never returns (self_launch_restarts.h).
// When the environment already describes a world (FASTRUN_RANK: a spawned child or a rank under
// the `fastrun` CLI; RANK: torchrun; SLURM_PROCID: srun; OMPI_COMM_WORLD_RANK: mpirun — the
// sources join() reads, docs/runtime.md) it returns that rank at once and starts nothing: the
// options are ignored and join() joins that world. A malformed value there is a ConfigError.
//
// Supervision in rank 0 follows the CLI's rules: when a child exits non-zero or by a signal,
// the others get SIGTERM (SIGKILL after kill_timeout), a summary goes to stderr, the store is
// removed and rank 0 ends with _exit(child's code, or 128+signal). When rank 0 returns from
// main or calls exit(), an on_exit handler waits for every other rank; if rank 0's status is not
// 0, the others are stopped first (rank 0 failed); if another rank fails, the process exits with
// that rank's status, otherwise with rank 0's own. While children run, rank 0's SIGINT, SIGTERM
// and SIGHUP (where still SIG_DFL) stop them, remove the store, then end rank 0 by that signal.
// An exception that leaves rank 0 uncaught (std::terminate) is handled like a failing exit: a
// terminate handler installed here prints it and hands rank 0's end to the supervisor, so a peer
// that died first is still the job's failure (its summary, its status) and the store is removed;
// when rank 0's own exception is the first failure, the process ends by SIGABRT after that.
// Children start with default signal dispositions (an ignored SIGHUP aside) and an empty mask.
// Not thread-safe: call it once, from the main thread, before starting threads.
#include <optional>
#include <string>

namespace fastrun {

struct SelfLaunchOptions {
  int nproc = 0;               // N CPU ranks (no device pinning); 0 = not given
  std::string devices;         // "0,2,3" or "all", indices into the visible GPUs; "" = not given
  std::string log_dir;         // files DIR/<run-id>/rank-<r>/{stdout,stderr}.log; "" = none
  std::string output = "all";  // all | only_error | ignore: what ranks 1..N-1 show on the terminal
  bool tag_output = false;     // prefix terminal lines with "[rank r] "
  double kill_timeout = 5.0;   // seconds between SIGTERM and SIGKILL when stopping ranks
  // Seconds a collective may wait for missing ranks before they are named on stderr, as
  // --stall-report (docs/errors.md); nullopt = FASTRUN_STALL_REPORT (default 30); 0 = off.
  std::optional<int> stall_report;
  std::string run_id;          // "" = generated (unique even within one millisecond)
  // When the job ends, processes ranks 1..N-1 left running in their process groups (`sleep 20 &`)
  // are stopped (SIGTERM, SIGKILL after kill_timeout); true leaves them running.
  bool keep_background = false;
  // none | numa | core, as `fastrun --bind` (docs/binding.md); "" = FASTRUN_BIND (default none).
  // Rank 0 binds itself in launch_self: call it before starting threads.
  std::string bind;
  bool report_bindings = false;  // print the bindings table to stderr, as --report-bindings
  // Restarts after a failed attempt, as `fastrun --max-restarts N` (docs/launching.md,
  // "Restarts"); nullopt = FASTRUN_MAX_RESTARTS (default 0). Above 0 the calling process does
  // not become rank 0: it becomes the job's launcher, starts every rank (rank 0 included) from
  // /proc/self/exe, and exits with the job's code (or dies by the signal that stopped it)
  // without returning; each rank returns its rank in its own process (`output` then applies to
  // rank 0 too, as under the CLI). Negative: ConfigError.
  std::optional<int> max_restarts;
};

// Returns this process's rank (0 in the process that started the job). With nproc == 0 and
// devices empty the job is a world of one (rank 0 only, store and environment still set up).
// Throws ConfigError for bad options, Error when the store or a spawn fails.
int launch_self(int argc, char** argv, const SelfLaunchOptions& options);

}  // namespace fastrun
