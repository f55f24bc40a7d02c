#include "fastrun/launcher/stall_watch.h"

#include <sys/mman.h>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/stall_board.h"

namespace fastrun::launcher {

StallWatch::StallWatch(const JobConfig& job, int fd) {
  const int threshold_s = job.stall_report_s;
  // The board serves the failure record too (last_collective), which is written with --log-dir.
  if (threshold_s <= 0 && job.log_dir.empty()) return;
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
  if (threshold_s > 0)
    scanner_.emplace(board_.data(), board_.size(), threshold_s, fd,
                     job.node.nnodes > 1 ? std::optional<int>(job.node.node_rank) : std::nullopt,
                     stall::StallScanner::Drive::by_owner);
}

std::optional<stall::LastCollective> StallWatch::last_collective(int local_rank) const {
  if (!board_.data()) return std::nullopt;
  return stall::last_collective(stall::read_rank_slots(board_.data(), board_.size(), local_rank));
}

}  // namespace fastrun::launcher
