#include "fastrun/runtime/process_group/stall_scanner.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/process_group/stall_board.h"
#include "fastrun/runtime/process_group/stall_scan.h"

namespace fastrun::stall {

std::chrono::milliseconds StallScanner::poll_interval(int threshold_s) {
  return std::min(std::chrono::milliseconds(1000), std::chrono::milliseconds(threshold_s * 500));
}

StallScanner::StallScanner(const std::byte* board, std::size_t bytes, int threshold_s, int fd,
                           std::optional<int> node_rank, Drive drive)
    : board_(board),
      bytes_(bytes),
      threshold_s_(threshold_s),
      fd_(fd),
      interval_(poll_interval(threshold_s)),
      // The first read one interval in: nothing can have waited the threshold (>= 2 intervals) sooner.
      next_scan_(std::chrono::steady_clock::now() + interval_),
      log_(node_rank ? fmt::format(" on node {}", *node_rank) : std::string()) {
  if (drive == Drive::by_owner) return;
  thread_.start(interval_, [this] {
    scan(threshold_s_);
    return true;
  }, os::PeriodicThread::First::after_interval);
}

int StallScanner::poll() {
  auto now = std::chrono::steady_clock::now();
  if (now >= next_scan_) {
    scan(threshold_s_);
    now = std::chrono::steady_clock::now();
    next_scan_ = now + interval_;
  }
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_scan_ - now);
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(1, left.count()));
}

StallScanner::~StallScanner() {
  thread_.stop();
  // The ranks are gone or done: a stall whose late ranks arrived and whose groups were left since
  // the last poll (a job that ends right after it) is over; no new stall is reported now.
  scan(std::numeric_limits<double>::infinity());
}

void StallScanner::scan(double threshold_s) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const std::string text = log_.update(read_board(board_, bytes_),
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), threshold_s);
  // One write per scan: whole lines, never spliced with others' (which write whole lines too).
  if (!text.empty()) os::write_all(fd_, text.data(), text.size());
}

}  // namespace fastrun::stall
