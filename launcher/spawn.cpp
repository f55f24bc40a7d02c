#include "fastrun/launcher/spawn.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::launcher {
namespace {

std::vector<char*> c_array(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Only async-signal-safe calls from here to exec: the parent may have other threads.
[[noreturn]] void child_exec(const SpawnRequest& r, pid_t parent, char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  // Default dispositions before the mask opens, so that a pending signal meets the default
  // action, never a handler of the parent's. A shell starts background jobs with SIGINT and SIGQUIT
  // ignored, and an exec keeps SIG_IGN: inherited, the ranks would shrug off the SIGINT the
  // launcher forwards and last until --kill-timeout's SIGKILL. Only nohup's SIGHUP stays ignored
  // (the user asked for the whole job to outlive the terminal). Slurm's tasks start the same way.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction old{};
    if (sig == SIGHUP && ::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &dfl, nullptr);  // EINVAL for the C library's reserved real-time signals: harmless
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (r.nofile) ::setrlimit(RLIMIT_NOFILE, &*r.nofile);  // a plain syscall (prlimit64)
  if (r.stdin_fd >= 0 && r.stdin_fd != 0) ::dup2(r.stdin_fd, 0);
  if (r.stdout_fd >= 0 && r.stdout_fd != 1) ::dup2(r.stdout_fd, 1);
  if (r.stderr_fd >= 0 && r.stderr_fd != 2) ::dup2(r.stderr_fd, 2);
  // Bound before exec: the program's first instruction and every thread it starts run there.
  const char* failed = nullptr;
  if (const int bind_err = r.binding ? apply_child_binding(*r.binding, &failed) : 0) {
    static const char bind_msg[] = "fastrun: cannot bind the rank (--bind): ";
    (void)!::write(2, bind_msg, sizeof bind_msg - 1);
    (void)!::write(2, failed, ::strlen(failed));
    if (const char* why = ::strerrordesc_np(bind_err)) {
      (void)!::write(2, ": ", 2);
      (void)!::write(2, why, ::strlen(why));
    }
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  ::execve(r.path.c_str(), argv, envp);
  const int err = errno;
  static const char msg[] = "fastrun: cannot execute ";
  (void)!::write(2, msg, sizeof msg - 1);
  (void)!::write(2, r.path.c_str(), r.path.size());
  const char* why = ::strerrordesc_np(err);
  if (why) {
    (void)!::write(2, ": ", 2);
    (void)!::write(2, why, ::strlen(why));
  }
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

}  // namespace

pid_t spawn_rank(const SpawnRequest& request) {
  std::vector<char*> argv = c_array(request.argv);
  std::vector<char*> envp = c_array(request.envp);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) child_exec(request, parent, argv.data(), envp.data());
  // Also from the parent, so that a killpg() right after spawn_rank() cannot miss the child.
  // EACCES (the child already exec'd) and ESRCH are fine: the child did it itself.
  ::setpgid(pid, pid);
  return pid;
}

std::string resolve_program(const std::string& program) {
  if (program.empty()) throw ConfigError("PROGRAM is empty; usage: fastrun [options] [--] PROGRAM [ARGS...]");
  auto executable = [](const std::string& path) {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (!executable(program)) {
      throw ConfigError(fmt::format("PROGRAM '{}' is not an executable file", program));
    }
    return program;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    // Built with append: GCC 12 warns (-Wrestrict, a known false positive) on "dir + '/' + ...".
    std::string candidate = colon == start ? std::string(".") : path.substr(start, colon - start);
    candidate.append(1, '/').append(program);
    if (executable(candidate)) return candidate;
    start = colon + 1;
  }
  throw ConfigError(fmt::format("PROGRAM '{}' was not found on PATH ({})", program, path));
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return fmt::format("SIG{}", abbrev);
  return fmt::format("signal {}", sig);
}

}  // namespace fastrun::launcher
