#pragma once
// The lines the launcher prints when a job attempt ends (docs/launching.md, "Failure"), and the
// code it exits with, from what the supervisor saw. A pure function: no store, no relay.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/node_watch.h"
#include "fastrun/runtime/process_group/stall_scan.h"
#include "fastrun/launcher/supervisor.h"

namespace fastrun::launcher {

struct AttemptOutcome {
  int world_size = 1;
  int first_rank = 0;   // 1 when rank 0 is the launcher's own process (launch_self)
  int rank_offset = 0;  // this node's first global rank
  std::string where;    // " on node K (host H)" in a multi-node job, else ""
  double kill_timeout = 0;
  int launcher_signal = 0;  // what stopped the job from outside (SIGPIPE: the output was closed)
  int second_signal = 0;    // a stop request while already stopping
  struct Failure {
    int rank = 0;  // local
    pid_t pid = -1;
    int status = 0;                        // its wait status
    std::string recorded;                  // the job's failure record, "" when none
    std::string log_dir;                   // its --log-dir folder, "" when not filed
    std::vector<std::string> stderr_tail;  // its last stderr lines
    std::string record;                    // its failure.json (failure_record.h), "" when none
    std::optional<stall::LastCollective> last_collective;  // from the stall board; nullopt: none or no board
  };
  // The first rank of this node to fail; recorded, log_dir and stderr_tail are read only when no
  // launcher_signal stopped the job (they are printed only then).
  std::optional<Failure> first_failure;
  std::string spawn_error;            // a rank that could not be started
  std::optional<NodeFailure> remote;  // the job's first failure was on another node
  std::vector<int> left_unjoined;     // local ranks that exited 0 without having joined
  std::vector<int> sigkilled;         // local ranks that got SIGKILL from the launcher
  bool stopped_leftovers = false;     // the ranks left processes running, and they were stopped
  int attempt = 0;                    // FASTRUN_RESTART_COUNT of this attempt
  int max_restarts = 0;               // 0: the job has one attempt, and the summary names none
  int resized_attempts = 0;           // JobConfig::resized_attempts: not counted against max_restarts
};

struct JobSummary {
  JobResult result;
  std::string text;  // "" when the job succeeded
};

JobSummary summarize(const AttemptOutcome& outcome);

}  // namespace fastrun::launcher
