#pragma once
// Cleans up after a launcher that died without doing it (SIGKILL, the OOM killer): a small
// process forked before the job's store exists, holding the read end of a pipe whose write end
// only the launcher has. The launcher tells it each rank's pid, and dismisses it once it has
// removed the job's segments itself. If the pipe reports end-of-file instead, the launcher is
// gone: the janitor waits (bounded) until the ranks, killed by their parent-death signal, are
// gone too — so none can create a segment after the sweep — then removes the job's store and
// segments (segment_names.h: exactly this run id's) and exits. Nothing is left in /dev/shm, and
// no `fastrun --cleanup` is needed.
//
// The child runs only async-signal-safe code (rank 0 of an in-process spawn may have threads):
// raw syscalls on memory prepared before fork. It ignores the stop signals (a terminal's Ctrl-C
// reaches it too), has no terminal fds, and never outlives the launcher by more than
// kRanksGoneTimeout. Threading: the launcher's thread(s) call watch(); one thread dismisses.
#include <sys/types.h>

#include <memory>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {

class Janitor {
 public:
  static constexpr int kRanksGoneTimeoutMs = 10000;

  // Forks the janitor for `world_size` ranks of job `run_id`. Never throws: when fork fails the
  // job runs without one (a log line says so) and `fastrun --cleanup` stays the way out.
  Janitor(const std::string& run_id, int world_size);
  ~Janitor();  // dismiss()
  Janitor(const Janitor&) = delete;
  Janitor& operator=(const Janitor&) = delete;

  // A rank started (the janitor waits for it before sweeping).
  void watch(pid_t rank_pid) noexcept;
  // The launcher removed everything itself: the janitor exits without sweeping, and is reaped.
  void dismiss() noexcept;
  // The janitor's pid (-1 when there is none): a child of the launcher that is not a leftover.
  pid_t pid() const { return pid_; }

 private:
  os::UniqueFd fd_;  // write end of the pipe
  pid_t pid_ = -1;
  os::UniqueFd pidfd_;  // the janitor's, to wait for its exit in dismiss()
};

}  // namespace fastrun::launcher
