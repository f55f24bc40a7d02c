#pragma once
// The failing rank's own record (docs/errors.md, "The failure record"): written by the launcher,
// without the program doing anything, as DIR/<run-id>[/attempt-<n>]/rank-<r>/failure.json next
// to that rank's logs, when the job files its output (--log-dir). torchrun writes one only for
// a program that uses the Python @record decorator.
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "fastrun/runtime/process_group/stall_scan.h"

namespace fastrun::launcher {

struct FailureRecord {
  std::string run_id;
  int attempt = 0;    // FASTRUN_RESTART_COUNT
  int rank = 0;       // global
  int local_rank = 0;
  int node_rank = 0;
  std::string host;   // "" on one node
  pid_t pid = -1;
  int status = 0;     // its wait status
  std::string recorded;                  // the job's first recorded failure (may be another rank's)
  std::vector<std::string> stderr_tail;  // its last stderr lines
  std::optional<stall::LastCollective> last_collective;  // from the stall board (stall_watch.h); nullopt: none
};

// The record as JSON text (one object, fields documented in docs/errors.md).
std::string failure_record_json(const FailureRecord& record);

// Writes failure_record_json to `rank_log_dir`/failure.json; returns the path, or "" when it
// could not be written (a warning says why: the job's exit code and summary do not depend on it).
std::string write_failure_record(const std::string& rank_log_dir, const FailureRecord& record);

}  // namespace fastrun::launcher
