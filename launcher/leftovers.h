#pragma once
// What ranks leave running when they end: `sleep 20 &` in a rank's shell, a helper a rank
// forked and forgot, a daemon that called setsid(). fastrun's rule, like a Slurm step: when the
// last rank has ended, every process the ranks left behind is stopped too — SIGTERM, then
// SIGKILL after --kill-timeout — unless the user opted out (--keep-background).
//
// How they are found: each rank leads its own process group, which its descendants join unless
// they move out; and the CLI launcher is a child subreaper (PR_SET_CHILD_SUBREAPER), so a
// descendant orphaned by its parent's exit becomes the launcher's child, whatever its group or
// session. The in-process spawn cannot be a subreaper (rank 0 is the user's process, whose own
// children are none of fastrun's business): there only the ranks' process groups are stopped.
//
// Threading: the supervisor's thread only.
#include <sys/types.h>

#include <chrono>
#include <set>
#include <vector>

namespace fastrun::launcher {

// Makes this process a child subreaper (CLI only). Returns false where the kernel refuses.
bool become_subreaper() noexcept;

// Every child of this process (all threads'), zombies included, from /proc/self/task/*/children.
std::vector<pid_t> child_pids();

// Reaps exited children that are not in `ranks` (orphans the subreaper adopted), so that they
// do not stay zombies while the job runs. Never waits.
void reap_adopted(const std::set<pid_t>& ranks);

struct Leftovers {
  std::vector<pid_t> groups;  // the ranks' process groups (each rank's pid), ranks all reaped
  bool adopted = false;       // also this process's children: it is a subreaper (CLI)
  pid_t spare = -1;           // a child that is no leftover (the janitor, janitor.h)
};

// Stops what is in `scope`: SIGTERM, then SIGKILL to what is still there after `grace`, and
// reaps adopted children. Returns true when there was anything to stop. Bounded: gives up
// (leaving what a SIGKILL could not end, e.g. a process in D state) 2 s after the SIGKILL.
bool stop_leftovers(const Leftovers& scope, std::chrono::duration<double> grace);

}  // namespace fastrun::launcher
