#pragma once
// The supervisor's one wait: an epoll set whose entries say what woke it (a rank's exit or
// output, a signal, rank 0 of an in-process job, another node's failure) and for which rank.
// Level-triggered, so a reader that leaves data behind is called again.
// Threading: one thread (the supervisor's).
#include <cstdint>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {

class EventSet {
 public:
  enum class Kind : std::uint32_t {
    rank_exit = 1,    // a rank's pidfd
    rank_out = 2,     // a rank's stdout pipe
    rank_err = 3,     // a rank's stderr pipe
    signal = 4,       // the launcher's signalfd (CLI)
    self_done = 5,    // rank 0 of launch_self ended (SelfSpawn::done)
    self_signal = 6,  // rank 0 of launch_self got a stop signal (SelfSpawn::signals)
    remote = 7,       // another node failed (NodeWatch::fd)
  };
  struct Event {
    Kind kind;
    int rank;  // 0 where the kind has no rank
  };
  static constexpr int kMaxEvents = 64;

  // Throws Error when epoll_create1 fails.
  EventSet();

  // Throws Error when epoll_ctl fails.
  void watch(int fd, Kind kind, int rank = 0);
  // An fd no longer watched (closed or drained); never fails.
  void unwatch(int fd);

  // Waits up to timeout_ms (-1: no limit) and fills events[0..n) with what is ready; returns n,
  // 0 on a timeout or a signal (EINTR). Throws Error on any other epoll_wait failure.
  int wait(Event (&events)[kMaxEvents], int timeout_ms);

 private:
  os::UniqueFd epoll_;
};

}  // namespace fastrun::launcher
