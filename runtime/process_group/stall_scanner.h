#pragma once
// The scanner of a stall report (docs/errors.md, "Stall report"): reads one node's stall board
// (stall_board.h) every poll interval and prints, once per stall, a line per group naming the
// ranks that have not arrived at a collective the others have waited in for `threshold` seconds,
// and a line when the stall is over (stall_scan.h). It stops nothing: the op timeout stays what
// fails a job. Run by the fastrun launcher of each node (launcher/stall_watch.h), whose event
// loop drives it (Drive::by_owner: no thread to start and join in every job), or, without one,
// by local rank 0 of each node (runtime/join/stall_host.h) on a thread of its own.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "fastrun/runtime/os/periodic_thread.h"
#include "fastrun/runtime/process_group/stall_scan.h"

namespace fastrun::stall {

class StallScanner {
 public:
  // own_thread: a thread scans every interval. by_owner: the owner calls poll() often enough
  // (an event loop, with poll()'s answer as its timeout), on one thread.
  enum class Drive { own_thread, by_owner };

  // Reads `bytes` bytes of board at `board` (which must outlive this object) and writes whole
  // lines to `fd`; `node_rank` is set when the job spans nodes, so that every line says " on node
  // K" (one node: nothing to tell apart). threshold_s > 0.
  StallScanner(const std::byte* board, std::size_t bytes, int threshold_s, int fd, std::optional<int> node_rank,
               Drive drive = Drive::own_thread);
  // Stops the thread (within one interval), then a last scan that reports the ends of stalls
  // (the ranks are gone or done), never a new one.
  ~StallScanner();

  // by_owner: scans when an interval has passed since the last scan (the first one interval after
  // construction); returns the milliseconds until the next is due (>= 1).
  int poll();
  StallScanner(const StallScanner&) = delete;
  StallScanner& operator=(const StallScanner&) = delete;

  // How often the board is read for a threshold: a second, or half the threshold when shorter,
  // so a report comes at most one interval after the threshold.
  static std::chrono::milliseconds poll_interval(int threshold_s);

 private:
  void scan(double threshold_s);
  const std::byte* const board_;
  const std::size_t bytes_;
  const int threshold_s_;
  const int fd_;
  const std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_scan_;  // by_owner
  StallLog log_;  // the scanning thread's, then the destructor's once the thread is joined
  os::PeriodicThread thread_;  // own_thread; last: started when everything above is ready, stopped first
};

}  // namespace fastrun::stall
