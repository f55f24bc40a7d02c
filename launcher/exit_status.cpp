#include "fastrun/launcher/exit_status.h"

#include <signal.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "fastrun/launcher/spawn.h"

namespace fastrun::launcher {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", signal_name(WTERMSIG(status)));
  return "ended";
}

int status_exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string status_hint(int status) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return "out of memory? the OOM killer sends SIGKILL";
  return {};
}

bool status_failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

}  // namespace fastrun::launcher
