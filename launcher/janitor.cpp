#include "fastrun/launcher/janitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/shm/segment_names.h"

namespace fastrun::launcher {
namespace {

// What the child needs, prepared before fork (the child allocates nothing).
struct Plan {
  std::string store;   // "fastrun-<run-id>"
  std::string prefix;  // "fastrun-<run-id>@"
  std::vector<pid_t> ranks;
};

long now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Waits until every rank has exited (a pidfd of an exited process is readable), or the deadline.
void wait_for_ranks(const pid_t* ranks, std::size_t n, long deadline) {
  for (std::size_t i = 0; i < n; ++i) {
    const os::UniqueFd fd = os::open_pidfd(ranks[i]);
    if (!fd) continue;  // already gone (and reaped)
    pollfd p{fd.get(), POLLIN, 0};
    const long left = deadline - now_ms();
    if (left > 0) ::poll(&p, 1, static_cast<int>(left));
  }
}

// Unlinks the job's store and segments: getdents64 on /dev/shm, no allocation.
void sweep(const Plan& plan) {
  const os::UniqueFd dir_fd(::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return;
  const int dir = dir_fd.get();
  alignas(8) char buf[8192];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + off);  // the kernel's record layout
      const char* name = e->d_name;
      if (std::strcmp(name, plan.store.c_str()) == 0 ||
          std::strncmp(name, plan.prefix.c_str(), plan.prefix.size()) == 0) {
        ::unlinkat(dir, name, 0);
      }
      off += e->d_reclen;
    }
  }
}

[[noreturn]] void janitor_main(int in, Plan& plan) {
  // 1. Detach from what the launcher shares with the terminal: the stop signals (a Ctrl-C goes
  //    to the whole foreground group), stdio (a pipeline must see EOF when the launcher exits)
  //    and every other fd.
  ::prctl(PR_SET_NAME, "fastrun-janitor");  // what ps/top show for it (comm, 15 characters)
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) ::signal(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) {
    if (null >= 0 && fd != in) ::dup2(null, fd);
  }
  const int keep = in > 2 ? in : ::fcntl(in, F_DUPFD, 3);
  ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
  // 2. Collect rank pids until dismissed (a 0) or the launcher is gone (end of file).
  std::size_t n = 0;
  for (;;) {
    pid_t pid = 0;
    const ssize_t got = ::read(keep, &pid, sizeof pid);
    if (got < 0 && errno == EINTR) continue;
    if (got == static_cast<ssize_t>(sizeof pid) && pid == 0) ::_exit(0);
    if (got == static_cast<ssize_t>(sizeof pid)) {
      // A ring: with restarts (docs/launching.md, "Restarts") the last world_size pids are the
      // running attempt's; those of an attempt before it are all reaped already.
      if (!plan.ranks.empty()) plan.ranks[n++ % plan.ranks.size()] = pid;
      continue;
    }
    break;  // end of file or an error: the launcher died without dismissing us
  }
  // 3. The launcher is gone: wait for its ranks, then remove what the job left.
  wait_for_ranks(plan.ranks.data(), n < plan.ranks.size() ? n : plan.ranks.size(), now_ms() + Janitor::kRanksGoneTimeoutMs);
  sweep(plan);
  ::_exit(0);
}

}  // namespace

Janitor::Janitor(const std::string& run_id, int world_size) {
  Plan plan{shm_store::job_store_segment(run_id), shm_store::job_segment_prefix(run_id),
            std::vector<pid_t>(static_cast<std::size_t>(world_size > 0 ? world_size : 0))};
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    log::warn("no janitor for run {} (pipe: {}): after a SIGKILL of the launcher, run fastrun --cleanup", run_id,
              std::strerror(errno));
    return;
  }
  os::UniqueFd read_end(p[0]), write_end(p[1]);
  const pid_t pid = ::fork();
  if (pid == 0) {
    write_end.reset();
    janitor_main(read_end.get(), plan);
  }
  read_end.reset();
  if (pid < 0) {
    log::warn("no janitor for run {} (fork: {}): after a SIGKILL of the launcher, run fastrun --cleanup", run_id,
              std::strerror(errno));
    return;
  }
  fd_ = std::move(write_end);
  pid_ = pid;
  // Opened now, while `pid` is surely our unreaped child (never a reused pid); close-on-exec.
  pidfd_ = os::open_pidfd(pid);
}

Janitor::~Janitor() { dismiss(); }

void Janitor::watch(pid_t rank_pid) noexcept {
  // 4 bytes: atomic in a pipe. A full pipe (the janitor stopped reading) only loses a pid.
  if (fd_ && rank_pid > 0) (void)!::write(fd_.get(), &rank_pid, sizeof rank_pid);
}

void Janitor::dismiss() noexcept {
  if (!fd_) return;
  const pid_t done = 0;
  (void)!::write(fd_.get(), &done, sizeof done);
  fd_.reset();
  // It exits at once on reading the 0: wait for exactly that (a pidfd, no polling loop: this is
  // on every job's exit path), boundedly, so that it is no zombie.
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) ::kill(pid_, SIGKILL);
    pidfd_.reset();
  }
  ::waitpid(pid_, nullptr, 0);  // returns at once: it has exited (or was reaped by a SIGCHLD handler)
  pid_ = -1;
}

}  // namespace fastrun::launcher
