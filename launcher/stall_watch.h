#pragma once
// The launcher's stall report (docs/errors.md, "Stall report"): while an attempt runs, a thread
// reads this node's stall board (runtime/process_group/stall_board.h) every poll interval and
// prints, once per stall, a line per group naming the ranks that have not arrived at a collective
// the others have waited in for `threshold` seconds, and a line when the stall is over
// (stall_scan.h). It stops nothing: the op timeout stays what fails a job.
//
// Across nodes each node's launcher reports from its own board, i.e. for its own ranks: the node
// of a late rank names it; a node whose ranks only wait says how many of the group are elsewhere.
// Construct before the first rank starts (the ranks find the board when they make a group) and
// destroy after the last is reaped: the destructor stops the thread (within one interval) and
// removes the board. With threshold 0 there is no thread, and no board either unless the job
// files its logs: the board also gives the failure record its last collective (last_collective).
// Never throws: a board that cannot be made is a warning, and the job runs without the report.
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fastrun/launcher/job_config.h"
#include "fastrun/launcher/stall_scan.h"
#include "fastrun/runtime/backend/shm/segment.h"

namespace fastrun::launcher {

class StallWatch {
 public:
  // Prints to `fd` (the launcher's stderr); job.stall_report_s is the threshold.
  StallWatch(const JobConfig& job, int fd);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // How often the board is read for a threshold: a second, or half the threshold when shorter,
  // so a report comes at most one interval after the threshold.
  static std::chrono::milliseconds poll_interval(int threshold_s);

  // The collective local rank `local_rank` began last (stall_scan.h), read from the board now:
  // call it once that rank has ended, before the destructor removes the board. nullopt: it
  // began none, or there is no board.
  std::optional<LastCollective> last_collective(int local_rank) const;

 private:
  void run();
  const int threshold_s_;
  const int fd_;
  const std::string node_;
  shm::Segment board_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: started when everything above is ready
};

}  // namespace fastrun::launcher
