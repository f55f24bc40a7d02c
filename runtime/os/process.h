#pragma once
// Is a process alive, asked one way everywhere. A pidfd (Linux >= 5.3) names one process for
// good and becomes readable when it exits, so it is preferred; kill(pid, 0) is the fallback for
// kernels without pidfds, and /proc/PID/stat tells a zombie (killed but not yet reaped) from a
// running process and gives its start time (a pid alone may have been reused).
#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::os {

// pidfd_open(pid). Empty with errno set on failure: ESRCH when `pid` is gone, ENOSYS when the
// kernel (or the headers this was built with) has no pidfds.
UniqueFd open_pidfd(pid_t pid);

// kill(pid, 0): true while `pid` exists (EPERM: it exists but belongs to another user).
// A zombie still exists.
bool pid_exists(pid_t pid);

struct ProcStat {
  char state = 0;               // field 3 ('R', 'S', 'Z', ...); 0 when the line is malformed
  std::uint64_t start_time = 0;  // field 22, clock ticks since boot; 0 when malformed
};
// /proc/PID/stat, or nullopt when the process is gone (or /proc is unreadable).
std::optional<ProcStat> proc_stat(std::int64_t pid);

}  // namespace fastrun::os
