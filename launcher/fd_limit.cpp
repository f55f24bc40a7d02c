#include "fastrun/launcher/fd_limit.h"

#include <algorithm>

namespace fastrun::launcher {

std::optional<rlimit> raise_fd_limit_for(int ranks) noexcept {
  rlimit old{};
  if (::getrlimit(RLIMIT_NOFILE, &old) != 0) return std::nullopt;
  // Headroom for the store, the epoll and signal fds, stdio and what a caller (rank 0) holds.
  const rlim_t needed = static_cast<rlim_t>(std::max(ranks, 0)) * kFdsPerRank + 256;
  if (old.rlim_cur == RLIM_INFINITY || old.rlim_cur >= needed) return std::nullopt;
  rlimit raised = old;
  raised.rlim_cur = old.rlim_max == RLIM_INFINITY ? needed : std::min(needed, old.rlim_max);
  if (raised.rlim_cur <= old.rlim_cur || ::setrlimit(RLIMIT_NOFILE, &raised) != 0) return std::nullopt;
  return old;
}

}  // namespace fastrun::launcher
