#include "fastrun/launcher/leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The adopted children in scope: every child but the spare one.
std::vector<pid_t> adopted(const Leftovers& scope) {
  std::vector<pid_t> pids = child_pids();
  std::erase(pids, scope.spare);
  return pids;
}

// Signals everything in scope; true when anything received it.
bool signal_scope(const Leftovers& scope, int sig) {
  bool any = false;
  for (pid_t group : scope.groups) any = ::killpg(group, sig) == 0 || any;
  if (scope.adopted) {
    for (pid_t pid : adopted(scope)) any = ::kill(pid, sig) == 0 || any;
  }
  return any;
}

// True while anything in scope still exists (after reaping the adopted ones that exited). A
// group whose members are all zombies of a dead parent empties as their new parent reaps them.
bool anything_left(const Leftovers& scope) {
  if (scope.adopted) {
    // One look at the children (the end of every job comes here): a child that waitpid does not
    // reap is still running.
    bool running = false;
    for (pid_t pid : adopted(scope)) running = ::waitpid(pid, nullptr, WNOHANG) == 0 || running;
    if (running) return true;
  }
  for (pid_t group : scope.groups) {
    if (::killpg(group, 0) == 0) return true;
  }
  return false;
}

// Polls (every 2 ms: only leftovers are awaited, and nothing else is happening) until nothing
// in scope is left or `deadline`.
bool wait_gone(const Leftovers& scope, Clock::time_point deadline) {
  constexpr os::Backoff kEvery2ms{std::chrono::milliseconds(2), std::chrono::milliseconds(2)};
  return os::poll_until(deadline, kEvery2ms, [&] { return !anything_left(scope); });
}

}  // namespace

bool become_subreaper() noexcept { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

std::vector<pid_t> child_pids() {
  std::vector<pid_t> pids;
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return pids;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    // A few pids separated by spaces, read whole into a buffer that doubles while it fills.
    const os::UniqueFd fd(::open((std::string("/proc/self/task/") + e->d_name + "/children").c_str(),
                                 O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    std::string text(4096, '\0');
    std::size_t got = 0;
    for (;;) {
      const ssize_t n = os::read_full(fd.get(), text.data() + got, text.size() - got);
      if (n < 0) break;
      got += static_cast<std::size_t>(n);
      if (got < text.size()) break;  // the end of the file
      text.resize(2 * text.size());
    }
    text.resize(got);
    for (const char* p = text.c_str(); *p;) {
      char* end = nullptr;
      const long pid = std::strtol(p, &end, 10);
      if (end == p) break;
      pids.push_back(static_cast<pid_t>(pid));
      p = end;
    }
  }
  ::closedir(tasks);
  return pids;
}

void reap_adopted(const std::set<pid_t>& ranks) {
  for (pid_t pid : child_pids()) {
    if (!ranks.count(pid)) ::waitpid(pid, nullptr, WNOHANG);
  }
}

bool stop_leftovers(const Leftovers& scope, std::chrono::duration<double> grace) {
  if (!anything_left(scope)) return false;
  signal_scope(scope, SIGTERM);
  // A stopped process (SIGSTOP, a shell's suspended job) acts on SIGTERM only once continued.
  signal_scope(scope, SIGCONT);
  if (wait_gone(scope, Clock::now() + std::chrono::duration_cast<Clock::duration>(grace))) return true;
  signal_scope(scope, SIGKILL);
  wait_gone(scope, Clock::now() + std::chrono::seconds(2));
  return true;
}

}  // namespace fastrun::launcher
