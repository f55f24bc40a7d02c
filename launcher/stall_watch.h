#pragma once
// The launcher's stall report (docs/errors.md, "Stall report"): while an attempt runs, this
// node's stall board (runtime/process_group/stall_board.h) is read by a StallScanner
// (runtime/process_group/stall_scanner.h), which prints who a waiting group lacks. It stops
// nothing: the op timeout stays what fails a job. The supervisor's event loop drives the
// scanner (poll_ms), so the launcher starts no thread for it.
//
// Across nodes each node's launcher reports from its own board, i.e. for its own ranks: the node
// of a late rank names it; a node whose ranks only wait says how many of the group are elsewhere.
// Construct before the first rank starts (the ranks find the board when they make a group) and
// destroy after the last is reaped: the destructor makes the scanner's last scan and removes
// the board. With threshold 0 there is no scanner, and no board either unless the job
// files its logs: the board also gives the failure record its last collective (last_collective).
// Never throws: a board that cannot be made is a warning, and the job runs without the report.
#include <optional>

#include "fastrun/launcher/job_config.h"
#include "fastrun/runtime/backend/shm/common/segment.h"
#include "fastrun/runtime/process_group/stall_scan.h"
#include "fastrun/runtime/process_group/stall_scanner.h"

namespace fastrun::launcher {

class StallWatch {
 public:
  // Prints to `fd` (the launcher's stderr); job.stall_report_s is the threshold.
  StallWatch(const JobConfig& job, int fd);
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // The collective local rank `local_rank` began last (stall_scan.h), read from the board now:
  // call it once that rank has ended, before the destructor removes the board. nullopt: it
  // began none, or there is no board.
  std::optional<stall::LastCollective> last_collective(int local_rank) const;

  // Scans the board when a poll interval has passed; returns the milliseconds until the next
  // scan, -1 without a scanner (no threshold). The event loop's wait must end by then.
  int poll_ms() { return scanner_ ? scanner_->poll() : -1; }

 private:
  shm::Segment board_;
  // After the board it reads, so that it stops first; board_ then removes the segment.
  std::optional<stall::StallScanner> scanner_;
};

}  // namespace fastrun::launcher
