#pragma once
// Room for a job's file descriptors. The launcher holds about kFdsPerRank per rank (a pidfd, two
// output pipes, two log files); at the usual soft RLIMIT_NOFILE of 1,024 that capped a job at a
// few hundred ranks although the hard limit allows far more. Like systemd, the launcher raises
// its own soft limit and gives the ranks the user's limit back (SpawnRequest::nofile), so that a
// rank using select() still sees the limit it would have had.
#include <sys/resource.h>

#include <optional>

namespace fastrun::launcher {

inline constexpr rlim_t kFdsPerRank = 5;

// Raises the soft RLIMIT_NOFILE (never above the hard one) when it is below what `ranks` ranks
// need. Returns the limits as they were when it changed them, nullopt when it did not.
std::optional<rlimit> raise_fd_limit_for(int ranks) noexcept;

}  // namespace fastrun::launcher
