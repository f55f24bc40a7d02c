#include "fastrun/runtime/os/process.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/text/number.h"

namespace fastrun::os {

UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  errno = ENOSYS;
  return UniqueFd();
#endif
}

bool pid_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

std::optional<ProcStat> proc_stat(std::int64_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return std::nullopt;
  ProcStat stat;
  std::string text;
  std::getline(in, text);
  // The command name (field 2) is in parentheses and may contain spaces: count after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return stat;
  stat.state = text[close + 2];
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) return ProcStat{stat.state, 0};
  if (const auto start = text::to_integer(field, 0)) stat.start_time = static_cast<unsigned long long>(*start);
  return stat;
}

}  // namespace fastrun::os
