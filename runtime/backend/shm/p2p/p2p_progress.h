#pragma once
// Progress of shm point-to-point messages while a rank is blocked in a collective of any shm group
// of the process (docs/collectives.md, "Progress"). There is no progress thread: every group's
// channel calls progress_all_p2p() between the sleep slices of a slow wait
// (Channel::set_idle_hook), which moves the pending messages of every live engine, the way an
// MPI call progresses every communicator. A rank that isends more than a ring holds and then
// joins a collective (of that group or another) thus still feeds a peer that receives first.
#include <memory>

namespace fastrun::shm {

class P2PEngine;

// Adds `engine` to the engines progress_all_p2p() moves (dropped once it is gone).
void register_for_progress(const std::shared_ptr<P2PEngine>& engine);
// Moves every pending message of every live engine; never throws.
void progress_all_p2p() noexcept;

}  // namespace fastrun::shm
