#include "fastrun/launcher/stall_watch.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "fastrun/launcher/stall_scan.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/process_group/stall_board.h"

namespace fastrun::launcher {

std::chrono::milliseconds StallWatch::poll_interval(int threshold_s) {
  return std::min(std::chrono::milliseconds(1000), std::chrono::milliseconds(threshold_s * 500));
}

StallWatch::StallWatch(const JobConfig& job, int fd)
    : threshold_s_(job.stall_report_s),
      fd_(fd),
      node_(job.node.nnodes > 1 ? fmt::format(" on node {}", job.node.node_rank) : std::string()) {
  // The board serves the failure record too (last_collective), which is written with --log-dir.
  if (threshold_s_ <= 0 && job.log_dir.empty()) return;
  const std::string name = stall::segment_name(job.run_id, job.node.node_rank);
  try {
    // One left by a launcher of the same run id that was SIGKILLed (its janitor removes it too,
    // but may still be waiting for that job's ranks): this attempt's ranks must find a new one.
    ::shm_unlink(name.c_str());
    board_ = shm::Segment::create(name, stall::segment_bytes(job.world_size));
    stall::init_board(board_.data(), job.world_size);
  } catch (const std::exception& e) {
    log::warn("no stall report for this job (--stall-report), no last collective in its failure record: {}",
              e.what());
    return;
  }
  if (threshold_s_ > 0) thread_ = std::thread([this] { run(); });
}

std::optional<LastCollective> StallWatch::last_collective(int local_rank) const {
  if (!board_.data()) return std::nullopt;
  return launcher::last_collective(stall::read_rank_slots(board_.data(), board_.size(), local_rank));
}

StallWatch::~StallWatch() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // board_ removes the segment's name and mapping.
}

void StallWatch::run() {
  StallLog log(node_);
  const auto interval = poll_interval(threshold_s_);
  const auto scan = [&](double threshold_s) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const std::string text = log.update(stall::read_board(board_.data(), board_.size()),
                                        std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), threshold_s);
    // One write per scan: whole lines, never spliced with the relay's (which writes whole lines too).
    if (!text.empty()) os::write_all(fd_, text.data(), text.size());
  };
  std::unique_lock lock(mutex_);
  while (!cv_.wait_for(lock, interval, [&] { return stop_; })) scan(threshold_s_);
  // The ranks are gone: a stall whose late ranks arrived and whose groups were left since the
  // last poll (a job that ends right after it) is over; no new stall is reported now.
  scan(std::numeric_limits<double>::infinity());
}

}  // namespace fastrun::launcher
