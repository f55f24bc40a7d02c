#include "fastrun/launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
// sys/pidfd.h of glibc 2.36 lacks extern "C": call the syscall directly.
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "fastrun/launcher/child_env.h"
#include "fastrun/launcher/fd_limit.h"
#include "fastrun/launcher/leftovers.h"
#include "fastrun/launcher/output_relay.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/peer_info.h"
#include "fastrun/runtime/log.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// epoll tags: kind in the high half, rank in the low half.
enum Kind : std::uint32_t { kExit = 1, kOut = 2, kErr = 3, kSignal = 4, kSelfDone = 5, kSelfSignal = 6, kRemote = 7 };
std::uint64_t tag(Kind k, int rank) { return (std::uint64_t{k} << 32) | static_cast<std::uint32_t>(rank); }

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  os::UniqueFd pidfd, out, err;
  bool alive = false;
  int status = 0;  // wait status once reaped
  bool sigkilled_by_us = false;
};

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

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

class Loop {
 public:
  explicit Loop(SupervisorOptions& o)
      : o_(o),
        first_rank_(o.first_rank()),
        relay_(RelayOptions{o.job.output, o.job.tag_output, o.job.log_dir, o.self ? o.self->terminal_out : 1,
                            o.self ? o.self->terminal_err : 2, o.job.node.rank_offset}) {}

  JobResult run() {
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) throw_errno("epoll_create1", errno);
    if (o_.handle_signals) {
      const sigset_t set = Supervisor::handled_signals();
      sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
      if (!sigfd_) throw_errno("signalfd", errno);
      watch(sigfd_.get(), tag(kSignal, 0));
    }
    if (o_.nodes) watch(o_.nodes->fd(), tag(kRemote, 0));
    devnull_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    adopting_ = o_.handle_signals && o_.adopt_orphans && become_subreaper();
    const int world = o_.job.world_size;
    ranks_.resize(static_cast<std::size_t>(world));
    for (int r = first_rank_; r < world; ++r) relay_.add_rank(r);  // log files before any rank runs
    if (o_.self) watch_self(*o_.self);
    const std::vector<std::string> base_env = o_.self ? o_.self->base_env : current_environment();
    user_nofile_ = raise_fd_limit_for(world);
    for (int r = first_rank_; r < world && !stopping_; ++r) {
      try {
        start(r, base_env);
      } catch (const std::exception& e) {
        // Could not start rank r (fork failed, out of fds): stop the ones already running.
        log::error("could not start rank {}: {}", r, e.what());
        spawn_error_ = fmt::format("rank {}{}: could not be started: {}", global(r), where(), e.what());
        set_failure_key(spawn_error_);
        publish_to_nodes(1, spawn_error_);
        begin_stop(SIGTERM);
      }
    }
    // Until every child is reaped, and, while no child failed, until rank 0 is done with its output.
    while (live_ > 0 || (self_open_ && !stopping_)) wait_once();
    if (o_.self && o_.self->signals >= 0) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, o_.self->signals, nullptr);
    if (!o_.job.keep_background) stop_what_ranks_left();
    if (self_open_) {
      // The job failed while rank 0 still runs, and the caller is about to end this process. Take
      // what rank 0 wrote, but keep its pipes open: closing them could kill rank 0 with SIGPIPE
      // before the caller has removed the store.
      drain_without_closing(0);
    }
    return finish();
  }

 private:
  void watch(int fd, std::uint64_t t) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = t;
    check_syscall(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl");
  }

  // Rank 0 is this process (launch_self): its exit, its stop signals and, when relayed, its
  // output come through the fds of SelfSpawn.
  void watch_self(const SelfSpawn& self) {
    if (self.signals >= 0) watch(self.signals, tag(kSelfSignal, 0));
    if (self.out >= 0) {
      relay_.add_rank(0);
      Rank& rk = ranks_[0];
      rk.out.reset(self.out);
      rk.err.reset(self.err);
      ::fcntl(rk.out.get(), F_SETFL, O_NONBLOCK);
      ::fcntl(rk.err.get(), F_SETFL, O_NONBLOCK);
      watch(rk.out.get(), tag(kOut, 0));
      watch(rk.err.get(), tag(kErr, 0));
      self_open_ = true;
    }
    watch(self.done, tag(kSelfDone, 0));
  }

  void start(int r, const std::vector<std::string>& base_env) {
    int out[2], err[2];
    check_syscall(::pipe2(out, O_CLOEXEC), "pipe2");
    os::UniqueFd out_r(out[0]), out_w(out[1]);
    check_syscall(::pipe2(err, O_CLOEXEC), "pipe2");
    os::UniqueFd err_r(err[0]), err_w(err[1]);
    SpawnRequest req;
    req.path = o_.exec_path;
    req.argv = o_.argv;
    req.envp = build_child_env(base_env, o_.job, r);
    req.stdin_fd = (r == 0 && o_.rank0_stdin >= 0) ? o_.rank0_stdin : devnull_.get();
    req.stdout_fd = out_w.get();
    req.stderr_fd = err_w.get();
    req.nofile = user_nofile_;
    if (!o_.job.binding.ranks.empty()) req.binding = child_binding(o_.job.binding.ranks.at(static_cast<std::size_t>(r)));
    Rank& rk = ranks_[static_cast<std::size_t>(r)];
    rk.rank = r;
    rk.pid = spawn_rank(req);
    rank_of_pid_[rk.pid] = r;
    if (o_.janitor) o_.janitor->watch(rk.pid);
    rk.alive = true;
    ++live_;
    out_w.reset();
    err_w.reset();
    ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
    rk.out = std::move(out_r);
    rk.err = std::move(err_r);
    rk.pidfd = os::open_pidfd(rk.pid);
    if (!rk.pidfd) throw_errno(fmt::format("pidfd_open for rank {} (pid {})", r, rk.pid), errno);
    watch(rk.pidfd.get(), tag(kExit, r));
    watch(rk.out.get(), tag(kOut, r));
    watch(rk.err.get(), tag(kErr, r));
  }

  void wait_once() {
    int timeout_ms = -1;
    if (kill_deadline_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_deadline_ - Clock::now());
      timeout_ms = static_cast<int>(std::max<long>(0, left.count() + 1));
    }
    epoll_event events[64];
    const int n = ::epoll_wait(epoll_.get(), events, 64, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) return;
      throw_errno("epoll_wait", errno);
    }
    for (int i = 0; i < n; ++i) {
      const auto kind = static_cast<Kind>(events[i].data.u64 >> 32);
      const int r = static_cast<int>(events[i].data.u64 & 0xffffffffu);
      switch (kind) {
        case kExit: reap(r); break;
        case kOut: read_stream(r, Stream::out, false); break;
        case kErr: read_stream(r, Stream::err, false); break;
        case kSignal: on_signal(); break;
        case kSelfSignal: on_self_signal(); break;
        case kSelfDone: on_self_done(); break;
        case kRemote: on_remote(); break;
      }
    }
    if (kill_deadline_ && Clock::now() >= *kill_deadline_) {
      kill_deadline_.reset();
      for (Rank& rk : ranks_) {
        if (!rk.alive) continue;
        rk.sigkilled_by_us = true;
        ::killpg(rk.pid, SIGKILL);
      }
    }
  }

  // Reads what is there. until_empty: drain to EAGAIN/EOF (the rank is gone) and close.
  void read_stream(int r, Stream s, bool until_empty) {
    Rank& rk = ranks_[static_cast<std::size_t>(r)];
    os::UniqueFd& fd = s == Stream::out ? rk.out : rk.err;
    if (!fd) return;
    // One read per event keeps ranks fair; level-triggered epoll calls again while data is left.
    for (int reads = 0; until_empty || reads < 4; ++reads) {
      const ssize_t n = ::read(fd.get(), buf_, sizeof buf_);
      if (n > 0) {
        relay_.feed(r, s, buf_, static_cast<std::size_t>(n));
        if (relay_.console_closed() && !stopping_) on_console_closed();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN && !until_empty) return;
      // EOF, an error, or (until_empty) nothing left: the stream is done.
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
      fd.reset();
      relay_.close_stream(r, s);
      return;
    }
  }

  // Rank 0 (this process) is exiting normally with the status it wrote (+1).
  void on_self_done() {
    std::uint64_t value = 0;
    if (::read(o_.self->done, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, o_.self->done, nullptr);
    if (self_open_) {
      read_stream(0, Stream::out, true);
      read_stream(0, Stream::err, true);
      self_open_ = false;
    }
    const int status = static_cast<int>((value & (SelfSpawn::kPeerFailure - 1)) - 1) & 0xffff;
    // Rank 0 failing because a peer died is the peer's failure: see that death first.
    if (failed(status) && !stopping_)
      reap_gone_ranks((value & SelfSpawn::kPeerFailure) ? SelfSpawn::kPeerGraceMs : 0);
    if (failed(status) && !stopping_) {
      Rank& self = ranks_[0];
      self.pid = ::getpid();
      self.status = status;
      first_failure_ = 0;
      set_failure_key(fmt::format("rank 0: {}", describe_status(self.status)));
      begin_stop(SIGTERM);
    } else if (!stopping_) {
      check_joined(0, status);
    }
  }

  // Reaps every child rank that has ended, waiting up to timeout_ms for the first one when none
  // has; a failed one becomes the job's first failure (reap()).
  void reap_gone_ranks(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (const Rank& rk : ranks_) {
      if (!rk.alive || !rk.pidfd) continue;
      fds.push_back(pollfd{rk.pidfd.get(), POLLIN, 0});
      which.push_back(rk.rank);
    }
    if (fds.empty()) return;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    int n = 0;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(0, left.count())));
      if (n >= 0 || errno != EINTR) break;
    }
    for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) reap(which[i]);
    }
  }

  void drain_without_closing(int r) {
    Rank& rk = ranks_[static_cast<std::size_t>(r)];
    for (auto [fd, s] : {std::pair{&rk.out, Stream::out}, std::pair{&rk.err, Stream::err}}) {
      if (!*fd) continue;
      ssize_t n;
      while ((n = ::read(fd->get(), buf_, sizeof buf_)) > 0) relay_.feed(r, s, buf_, static_cast<std::size_t>(n));
      relay_.close_stream(r, s);
      (void)fd->release();  // deliberately left open until the process ends
    }
  }

  void reap(int r) {
    Rank& rk = ranks_[static_cast<std::size_t>(r)];
    if (!rk.alive) return;
    int status = 0;
    const pid_t got = ::waitpid(rk.pid, &status, WNOHANG);
    if (got == 0) return;  // spurious
    if (got < 0) status = W_EXITCODE(255, 0);  // someone else reaped it: count as a failure
    rk.alive = false;
    rk.status = status;
    --live_;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, rk.pidfd.get(), nullptr);
    rk.pidfd.reset();
    // Everything the rank wrote is in its pipes now: take it all, then deliver partial lines.
    read_stream(r, Stream::out, true);
    read_stream(r, Stream::err, true);
    if (failed(status) && !stopping_) {
      first_failure_ = r;
      const std::string why = fmt::format("rank {}: {}", global(r), describe_status(status));
      set_failure_key(why);
      publish_to_nodes(status_exit_code(status),
                       fmt::format("rank {} (pid {}){} {}", global(r), rk.pid, where(), describe_status(status)));
      begin_stop(SIGTERM);
    } else if (!stopping_) {
      check_joined(r, status);
    }
  }

  // A rank that ended cleanly without having joined would leave the others waiting in join()
  // for the whole FASTRUN_TIMEOUT: record it under the failure key, which join() watches, so
  // they fail at once naming it. (join() publishes peer_key before anything else, so a rank
  // that joined and then left is never taken for one that did not. Ranks that never join do
  // not read the key.)
  void check_joined(int r, int status) {
    if (!o_.failure_store) return;
    try {
      if (o_.failure_store->check({peer_key(r)})) return;
    } catch (const std::exception& e) {
      log::warn("could not read {} in the job's store: {}", peer_key(r), e.what());
      return;
    }
    left_unjoined_.push_back(r);
    set_failure_key(fmt::format("rank {}: {} before it joined", r, describe_status(status)));
  }

  // The first failure recorded wins (a rank's own report_failure() may have come first).
  void set_failure_key(const std::string& why) {
    if (!o_.failure_store) return;
    try {
      record_failure(*o_.failure_store, why);
    } catch (const std::exception& e) {
      log::warn("could not set {} in the job's store: {}", kFailureKey, e.what());
    }
  }

  // The job's failure record (kFailureKey), "" when none or unreadable.
  std::string recorded_failure() const {
    if (!o_.failure_store) return {};
    try {
      if (o_.failure_store->check({kFailureKey}))
        return to_string(o_.failure_store->get(kFailureKey, std::chrono::seconds(1)));
    } catch (const std::exception& e) {
      log::warn("could not read {} in the job's store: {}", kFailureKey, e.what());
    }
    return {};
  }

  // Global rank of local rank r, and " on node K (host H)" in a multi-node job.
  int global(int r) const { return o_.job.node.rank_offset + r; }
  std::string where() const {
    if (!o_.nodes) return {};
    return fmt::format(" on node {} (host {})", o_.job.node.node_rank, o_.job.node.host);
  }

  void publish_to_nodes(int code, const std::string& why) {
    if (!o_.nodes) return;
    if (auto first = o_.nodes->publish(code, why)) remote_ = first;  // another node failed first
  }

  // Another node failed (or node 0 is gone): stop this node's ranks and exit with its code.
  void on_remote() {
    std::uint64_t value = 0;
    (void)::read(o_.nodes->fd(), &value, sizeof value);
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, o_.nodes->fd(), nullptr);
    if (stopping_) return;
    remote_ = o_.nodes->remote();
    // Not when node 0's store is the thing lost: a set would wait out the whole store timeout
    // (FASTRUN_TIMEOUT) with this node's ranks still running, e.g. after a network partition.
    if (remote_ && !remote_->store_lost) set_failure_key(remote_->why);
    begin_stop(SIGTERM);
  }

  void begin_stop(int sig) {
    stopping_ = true;
    for (Rank& rk : ranks_) {
      if (rk.alive) ::killpg(rk.pid, sig);
    }
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(o_.job.kill_timeout));
  }

  // Whoever read the launcher's output went away (`fastrun ... | head -1`): stop the job as
  // SIGPIPE stops a shell pipeline, with the usual SIGTERM/SIGKILL escalation, instead of relaying
  // into the void for ever. Until the ranks are gone their output is still read, and filed with
  // --log-dir.
  void on_console_closed() {
    launcher_signal_ = SIGPIPE;
    begin_stop(SIGTERM);
  }

  void on_signal() {
    signalfd_siginfo info{};
    while (::read(sigfd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo == SIGCHLD) {
        reap_children();
      } else {
        stop_or_forward(static_cast<int>(info.ssi_signo));
      }
    }
  }

  // SIGCHLD (CLI, a subreaper): reap every exited child. A rank goes through reap() as its pidfd
  // would have it; an adopted orphan of a rank is only reaped, so that none stays a zombie.
  void reap_children() {
    for (;;) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      const auto it = rank_of_pid_.find(info.si_pid);
      if (it != rank_of_pid_.end() && ranks_[static_cast<std::size_t>(it->second)].alive) {
        reap(it->second);
      } else {
        ::waitpid(info.si_pid, nullptr, WNOHANG);
      }
    }
  }

  // Every rank has ended: stop what they left running (leftovers.h).
  void stop_what_ranks_left() {
    Leftovers scope;
    scope.adopted = adopting_;
    scope.spare = o_.janitor ? o_.janitor->pid() : -1;
    for (int r = first_rank_; r < o_.job.world_size; ++r) {
      const Rank& rk = ranks_[static_cast<std::size_t>(r)];
      if (rk.pid > 0 && !rk.alive) scope.groups.push_back(rk.pid);
    }
    stopped_leftovers_ = stop_leftovers(scope, std::chrono::duration<double>(o_.job.kill_timeout));
  }

  void on_self_signal() {
    unsigned char sig = 0;
    while (::read(o_.self->signals, &sig, 1) == 1) stop_or_forward(sig);
  }

  void stop_or_forward(int sig) {
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      for (Rank& rk : ranks_) {
        if (rk.alive) ::killpg(rk.pid, sig);
      }
      return;
    }
    if (!stopping_) {
      launcher_signal_ = sig;
      publish_to_nodes(128 + sig, fmt::format("the launcher{} got {}", where(), signal_name(sig)));
      begin_stop(sig);
    } else {
      kill_deadline_ = Clock::now();  // a second request: stop waiting
      second_signal_ = sig;
    }
  }

  JobResult finish() {
    JobResult result;
    std::string text;
    const int world = o_.job.world_size;
    std::vector<int> killed;
    for (const Rank& rk : ranks_) {
      if (rk.sigkilled_by_us && rk.pid > 0) killed.push_back(rk.rank);
    }
    if (launcher_signal_) {
      result.exit_code = 128 + launcher_signal_;
      result.stop_signal = launcher_signal_;
      const std::string why = launcher_signal_ == SIGPIPE ? std::string("the output was closed (SIGPIPE)")
                                                           : "got " + signal_name(launcher_signal_);
      text += fmt::format("fastrun: {}; stopped {} rank{}\n", why, world - first_rank_,
                          world - first_rank_ == 1 ? "" : "s");
    } else if (first_failure_) {
      const Rank& rk = ranks_[static_cast<std::size_t>(*first_failure_)];
      result.exit_code = status_exit_code(rk.status);
      result.failed_rank = rk.rank;
      std::string hint;
      if (WIFSIGNALED(rk.status) && WTERMSIG(rk.status) == SIGKILL) hint = " (out of memory? the OOM killer sends SIGKILL)";
      text += fmt::format("fastrun: rank {} (pid {}){} {}{}; stopped the other ranks\n", global(rk.rank), rk.pid,
                          where(), describe_status(rk.status), hint);
      // A rank's own account of the failure (e.g. an op timeout naming the rank that did not
      // arrive) when one was recorded before the launcher's generic one.
      const std::string recorded = recorded_failure();
      if (!recorded.empty() && recorded != fmt::format("rank {}: {}", global(rk.rank), describe_status(rk.status)))
        text += fmt::format("fastrun: the job's first recorded failure: {}\n", recorded);
      const std::string dir = relay_.rank_log_dir(rk.rank);
      text += dir.empty() ? std::string("fastrun: its output was not filed (use --log-dir DIR to keep it)\n")
                          : fmt::format("fastrun: logs: {}/stdout.log, {}/stderr.log\n", dir, dir);
      const auto tail = relay_.stderr_tail(rk.rank);
      if (!tail.empty()) {
        text += fmt::format("fastrun: last lines of rank {}'s stderr:\n", global(rk.rank));
        for (const std::string& line : tail) text += "  | " + line + "\n";
      }
    } else if (!spawn_error_.empty()) {
      result.exit_code = 1;
      text += "fastrun: " + spawn_error_ + "\n";
    }
    if (remote_) {
      // The job's first failure was on another node (or node 0 is gone): every node exits with it.
      result.exit_code = remote_->exit_code;
      result.stop_signal = 0;
      text = fmt::format("fastrun: the job failed on node {}: {}; stopped this node's {} rank{}\n", remote_->node,
                         remote_->why, world - first_rank_, world - first_rank_ == 1 ? "" : "s") +
             text;
    }
    if (first_failure_) {
      for (int r : left_unjoined_)
        text += fmt::format("fastrun: rank {} had ended cleanly before it joined, so the ranks joining failed\n", r);
    }
    if (!killed.empty() && !text.empty()) {
      std::string list;
      for (int r : killed) list += (list.empty() ? "" : ", ") + std::to_string(global(r));
      if (second_signal_) {
        text += fmt::format("fastrun: {} while stopping the job: rank{} {} got SIGKILL at once\n",
                            signal_name(second_signal_), killed.size() == 1 ? "" : "s", list);
      } else {
        text += fmt::format("fastrun: rank{} {} did not stop within --kill-timeout {} s and got SIGKILL\n",
                            killed.size() == 1 ? "" : "s", list, o_.job.kill_timeout);
      }
    }
    if (stopped_leftovers_) {
      text += "fastrun: stopped the processes the ranks left running (--keep-background keeps them)\n";
    }
    if (!text.empty()) os::write_all(o_.self ? o_.self->terminal_err : 2, text.data(), text.size());
    return result;
  }

  SupervisorOptions& o_;
  const int first_rank_;  // 1 when rank 0 is this process (launch_self), else 0
  OutputRelay relay_;
  os::UniqueFd epoll_, sigfd_, devnull_;
  std::vector<Rank> ranks_;
  int live_ = 0;
  bool self_open_ = false;  // rank 0's own pipes are still being relayed
  bool stopping_ = false;
  std::optional<int> first_failure_;
  std::optional<NodeFailure> remote_;
  std::vector<int> left_unjoined_;  // ranks that exited 0 without having joined
  int launcher_signal_ = 0;
  int second_signal_ = 0;            // a stop request while already stopping: SIGKILL without the grace
  bool adopting_ = false;            // this process is a child subreaper (CLI)
  bool stopped_leftovers_ = false;   // the ranks left processes running, and they were stopped
  std::unordered_map<pid_t, int> rank_of_pid_;  // for SIGCHLD: which children are ranks
  std::string spawn_error_;
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<rlimit> user_nofile_;  // the fd limit the ranks get back, when it was raised
  char buf_[65536];
};

}  // namespace

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

JobResult Supervisor::run() {
  auto loop = std::make_unique<Loop>(options_);
  return loop->run();
}

sigset_t Supervisor::handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGCHLD);  // only the CLI reads it (adopted orphans, leftovers.h)
  // An inherited SIG_IGN for SIGHUP (nohup) is respected: the job keeps ignoring hang-ups.
  struct sigaction old{};
  if (::sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace fastrun::launcher
