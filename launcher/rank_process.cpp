#include "fastrun/launcher/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <utility>

#include "fastrun/runtime/os/fd_control.h"
#include "fastrun/runtime/error.h"

namespace fastrun::launcher {

RankProcess spawn_with_pipes(int rank, SpawnRequest request) {
  int out[2], err[2];
  check_syscall(::pipe2(out, O_CLOEXEC), "pipe2");
  os::UniqueFd out_r(out[0]), out_w(out[1]);
  check_syscall(::pipe2(err, O_CLOEXEC), "pipe2");
  os::UniqueFd err_r(err[0]), err_w(err[1]);
  // Only the read ends: the rank writes to a blocking pipe, as it would to a terminal. Set before
  // the fork, so that nothing can fail between the fork and the caller recording the pid.
  os::set_nonblocking(out_r.get(), "a rank's stdout pipe");
  os::set_nonblocking(err_r.get(), "a rank's stderr pipe");
  request.stdout_fd = out_w.get();
  request.stderr_fd = err_w.get();
  RankProcess rk;
  rk.rank = rank;
  rk.pid = spawn_rank(request);
  rk.alive = true;
  rk.out = std::move(out_r);
  rk.err = std::move(err_r);
  return rk;  // out_w and err_w close here: the rank holds the only write ends
}

void signal_live_ranks(std::vector<RankProcess>& ranks, int sig) {
  for (RankProcess& rk : ranks) {
    if (rk.alive) ::killpg(rk.pid, sig);
  }
}

}  // namespace fastrun::launcher
