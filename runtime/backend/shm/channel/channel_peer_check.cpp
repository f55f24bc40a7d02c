// Channel::check_peer (channel.h): the channel's liveness checks, for one peer, without a step.
#include <poll.h>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/channel/channel.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::shm {

void Channel::check_peer(int peer, const std::string& what) {
  RankControl& c = control(peer);
  const pid_t pid = std::atomic_ref<std::int32_t>(c.pid).load(std::memory_order_relaxed);
  if (std::atomic_ref<std::uint32_t>(c.aborted).load(std::memory_order_acquire) != 0)
    throw PeerFailure(fmt::format("{}: {} left the group or failed in an operation of its own; see its error", what,
                                  who(peer)));
  const int fd = pidfds_[static_cast<std::size_t>(peer)].get();
  bool dead = false;
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    dead = ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
  } else if (fd == kGone) {
    dead = true;
  } else if (pid > 0) {
    dead = !os::pid_exists(pid);
  }
  if (dead) throw PeerFailure(fmt::format("{}: {} (pid {}) died", what, who(peer), pid));
  if (watch_)
    if (auto failure = watch_->poll())
      throw PeerFailure(fmt::format("{}: the job recorded a failure ('{}' = \"{}\")", what, kFailureKey, *failure));
}

}  // namespace fastrun::shm
