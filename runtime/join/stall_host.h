#pragma once
// The stall report of a job without a fastrun launcher (torchrun, srun, mpirun): the fastrun
// launcher makes each node's stall board and reads it (launcher/stall_watch.h); here local rank 0
// of each node does both, so that a rank that stopped (SIGSTOP, a debugger, a stuck kernel) is
// named after FASTRUN_STALL_REPORT seconds (default 30; 0: off) on local rank 0's stderr, not
// after the op timeout. Local rank 0 makes the board (stall_board.h's HostedBoard: a memfd,
// nothing named in /dev/shm) and leaves its address in the job store under
// "fastrun/stall_board/<generation>/<node>"; the node's other ranks open it from there. Called
// by join() before the world group is made (its slot is claimed then).
//
// A rank that cannot take part (no /proc, a board that cannot be made) joins all the same, with a
// debug line: the report is a help, never a reason to fail a job. Local rank 0 itself stopped is
// the one stall this cannot report (its scanner stops with it); fastrun's launcher can.
#include <memory>
#include <string>

#include "fastrun/runtime/duration.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::join_detail {

struct StallHostPlace {
  std::string source;  // the layout's source: nothing is hosted under "fastrun" or "none"
  int world_size = 1;
  int local_rank = 0, local_world_size = 1, node_rank = 0;
  int generation = 0;
  Duration timeout{};  // how long the others wait for local rank 0's address
};

// What keeps this rank's board (and, on local rank 0, its scanner) alive: held by the Context.
// nullptr when there is nothing to host or join.
std::shared_ptr<void> host_stall_report(Store& store, const StallHostPlace& place);

}  // namespace fastrun::join_detail
