#pragma once
// One rank as the supervisor holds it: its pid (also its process group), the fds it is watched
// through, and how it ended. Starting one with its output piped back, and signalling the live ones.
#include <sys/types.h>

#include <vector>

#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {

struct RankProcess {
  int rank = 0;  // local rank on this node
  pid_t pid = -1;
  os::UniqueFd pidfd, out, err;  // out, err: the read ends of its stdout/stderr pipes
  bool alive = false;
  int status = 0;  // wait status once reaped
  bool sigkilled_by_us = false;
};

// Spawns `request` (spawn.h) with stdout and stderr into fresh pipes and returns it alive, with
// the pipes' read ends (non-blocking, close-on-exec) in out and err and no pidfd yet: the caller
// records the pid before anything else can fail. Throws Error when a pipe or the fork fails.
RankProcess spawn_with_pipes(int rank, SpawnRequest request);

// killpg(sig) to every rank still alive.
void signal_live_ranks(std::vector<RankProcess>& ranks, int sig);

}  // namespace fastrun::launcher
