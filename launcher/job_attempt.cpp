#include "fastrun/launcher/job_attempt.h"

// One attempt of the job (JobAttempt, below): spawn every rank, supervise them from one event
// loop until each is reaped, stop what they left running, print the summary. The parts each
// have their file: the event set (event_set.h), starting a rank (rank_process.h), its output
// (rank_output.h), the stop escalation (stop_escalation.h), the job's failure record
// (failure_key.h) and the summary (job_summary.h); this file decides what each event means.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "fastrun/launcher/child_env.h"
#include "fastrun/launcher/event_set.h"
#include "fastrun/launcher/exit_status.h"
#include "fastrun/launcher/failure_key.h"
#include "fastrun/launcher/failure_record.h"
#include "fastrun/launcher/fd_limit.h"
#include "fastrun/launcher/job_summary.h"
#include "fastrun/launcher/leftovers.h"
#include "fastrun/launcher/output_relay.h"
#include "fastrun/launcher/rank_output.h"
#include "fastrun/launcher/rank_process.h"
#include "fastrun/launcher/stall_watch.h"
#include "fastrun/launcher/stop_escalation.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/fd_control.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {
namespace {

using Kind = EventSet::Kind;

// poll(2) on `fds` until one is ready or timeout_ms passed (0: just look), again after EINTR;
// poll's result.
int poll_within(pollfd* fds, std::size_t count, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int n = ::poll(fds, count, static_cast<int>(std::max<long>(0, left.count())));
    if (n >= 0 || errno != EINTR) return n;
  }
}

class JobAttempt {
 public:
  explicit JobAttempt(SupervisorOptions& o)
      : o_(o),
        first_rank_(o.first_rank()),
        relay_(RelayOptions{o.job.output, o.job.tag_output, o.job.log_dir, o.self ? o.self->terminal_out : 1,
                            o.self ? o.self->terminal_err : 2, o.job.node.rank_offset}),
        failure_key_(o.failure_store),
        stop_(o.job.kill_timeout) {}

  JobResult run() {
    // 1. What the loop waits on besides the ranks: the launcher's signals, other nodes, rank 0
    //    of an in-process job; and every rank's log files, before any rank runs.
    if (o_.handle_signals) {
      const sigset_t set = Supervisor::handled_signals();
      sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
      if (!sigfd_) throw_errno("signalfd", errno);
      events_.watch(sigfd_.get(), Kind::signal);
    }
    if (o_.nodes) events_.watch(o_.nodes->fd(), Kind::remote);
    devnull_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    adopting_ = o_.handle_signals && o_.adopt_orphans && become_subreaper();
    const int world = o_.job.world_size;
    ranks_.resize(static_cast<std::size_t>(world));
    for (int r = first_rank_; r < world; ++r) relay_.add_rank(r);
    if (o_.self) watch_self(*o_.self);

    // 2. Spawn the ranks; one that cannot start stops the ones already running. The stall
    //    report's board comes first: a rank looks for it when it makes a group.
    std::optional<StallWatch> stall_watch(std::in_place, o_.job, o_.self ? o_.self->terminal_err : 2);
    stall_watch_ = &*stall_watch;
    spawn_all();

    // 3. Supervise: until every child is reaped, and, while no child failed, until rank 0 is
    //    done with its output.
    while (live_ > 0 || (self_open_ && !stop_.stopping())) wait_once();
    if (o_.self && o_.self->signals >= 0) events_.unwatch(o_.self->signals);

    // 4. Stop what the ranks left running.
    if (!o_.job.keep_background) stop_what_ranks_left();
    if (self_open_) {
      // The job failed while rank 0 still runs, and the caller is about to end this process. Take
      // what rank 0 wrote, but keep its pipes open: closing them could kill rank 0 with SIGPIPE
      // before the caller has removed the store.
      output_.drain_without_closing(ranks_[0]);
    }

    // The failing rank's last collective, read from the board before the board goes with the
    // watch; then the watch's last lines (the summary is the last thing printed).
    if (first_failure_) failed_last_collective_ = stall_watch->last_collective(*first_failure_);
    stall_watch_ = nullptr;
    stall_watch.reset();

    // 5. The failing rank's record, when its logs are filed; then the summary.
    AttemptOutcome out = outcome();
    if (out.first_failure && !out.first_failure->log_dir.empty())
      out.first_failure->record = write_failure_record(out.first_failure->log_dir, failure_record(*out.first_failure));
    const JobSummary summary = summarize(out);
    if (!summary.text.empty())
      os::write_all(o_.self ? o_.self->terminal_err : 2, summary.text.data(), summary.text.size());
    return summary.result;
  }

 private:
  // Rank 0 is this process (launch_self): its exit, its stop signals and, when relayed, its
  // output come through the fds of SelfSpawn.
  void watch_self(const SelfSpawn& self) {
    if (self.signals >= 0) events_.watch(self.signals, Kind::self_signal);
    if (self.out >= 0) {
      relay_.add_rank(0);
      RankProcess& rk = ranks_[0];
      rk.out.reset(self.out);
      rk.err.reset(self.err);
      os::set_nonblocking(rk.out.get(), "rank 0's stdout pipe");
      os::set_nonblocking(rk.err.get(), "rank 0's stderr pipe");
      events_.watch(rk.out.get(), Kind::rank_out, 0);
      events_.watch(rk.err.get(), Kind::rank_err, 0);
      self_open_ = true;
    }
    events_.watch(self.done, Kind::self_done);
  }

  void spawn_all() {
    const std::vector<std::string> base_env = o_.self ? o_.self->base_env : current_environment();
    user_nofile_ = raise_fd_limit_for(o_.job.world_size);
    for (int r = first_rank_; r < o_.job.world_size && !stop_.stopping(); ++r) {
      try {
        start(r, base_env);
      } catch (const std::exception& e) {
        // Could not start rank r (fork failed, out of fds): stop the ones already running.
        log::error("could not start rank {}: {}", r, e.what());
        spawn_error_ = fmt::format("rank {}{}: could not be started: {}", global(r), where(), e.what());
        failure_key_.set(spawn_error_);
        publish_to_nodes(1, spawn_error_);
        stop_.begin(ranks_, SIGTERM);
      }
    }
  }

  void start(int r, const std::vector<std::string>& base_env) {
    SpawnRequest req;
    req.path = o_.exec_path;
    req.argv = o_.argv;
    req.envp = build_child_env(base_env, o_.job, r);
    req.stdin_fd = (r == 0 && o_.rank0_stdin >= 0) ? o_.rank0_stdin : devnull_.get();
    req.nofile = user_nofile_;
    if (!o_.job.binding.ranks.empty()) req.binding = child_binding(o_.job.binding.ranks.at(static_cast<std::size_t>(r)));
    RankProcess& rk = ranks_[static_cast<std::size_t>(r)];
    rk = spawn_with_pipes(r, std::move(req));
    // Recorded at once: from here on a failure below still stops and reaps this rank.
    rank_of_pid_[rk.pid] = r;
    if (o_.janitor) o_.janitor->watch(rk.pid);
    ++live_;
    rk.pidfd = os::open_pidfd(rk.pid);
    if (!rk.pidfd) throw_errno(fmt::format("pidfd_open for rank {} (pid {})", r, rk.pid), errno);
    events_.watch(rk.pidfd.get(), Kind::rank_exit, r);
    events_.watch(rk.out.get(), Kind::rank_out, r);
    events_.watch(rk.err.get(), Kind::rank_err, r);
  }

  void wait_once() {
    EventSet::Event ready[EventSet::kMaxEvents];
    // Until an event, the kill deadline of a stop or the stall report's next scan (-1: none).
    const int stop_ms = stop_.wait_ms();
    const int scan_ms = stall_watch_ ? stall_watch_->poll_ms() : -1;
    const int n = events_.wait(ready, stop_ms < 0 ? scan_ms : scan_ms < 0 ? stop_ms : std::min(stop_ms, scan_ms));
    for (int i = 0; i < n; ++i) {
      const int r = ready[i].rank;
      switch (ready[i].kind) {
        case Kind::rank_exit: reap(r); break;
        case Kind::rank_out: read_stream(r, Stream::out, false); break;
        case Kind::rank_err: read_stream(r, Stream::err, false); break;
        case Kind::signal: on_signal(); break;
        case Kind::self_signal: on_self_signal(); break;
        case Kind::self_done: on_self_done(); break;
        case Kind::remote: on_remote(); break;
      }
    }
    stop_.kill_if_due(ranks_);
  }

  // A rank's output into the relay (rank_output.h); a console that went away stops the job.
  void read_stream(int r, Stream s, bool until_empty) {
    output_.read(ranks_[static_cast<std::size_t>(r)], s, until_empty);
    if (relay_.console_closed() && !stop_.stopping()) on_console_closed();
  }

  // Rank 0 (this process) is exiting normally with the status it wrote (+1).
  void on_self_done() {
    std::uint64_t value = 0;
    if (::read(o_.self->done, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return;
    events_.unwatch(o_.self->done);
    if (self_open_) {
      read_stream(0, Stream::out, true);
      read_stream(0, Stream::err, true);
      self_open_ = false;
    }
    const int status = static_cast<int>((value & (SelfSpawn::kPeerFailure - 1)) - 1) & 0xffff;
    // Rank 0 failing because a peer died is the peer's failure: see that death first.
    if (status_failed(status) && !stop_.stopping())
      reap_gone_ranks((value & SelfSpawn::kPeerFailure) ? SelfSpawn::kPeerGraceMs : 0);
    if (status_failed(status) && !stop_.stopping()) {
      RankProcess& self = ranks_[0];
      self.pid = ::getpid();
      self.status = status;
      first_failure_ = 0;
      failure_key_.set(fmt::format("rank 0: {}", describe_status(self.status)));
      stop_.begin(ranks_, SIGTERM);
    } else if (!stop_.stopping()) {
      check_joined(0, status);
    }
  }

  // Reaps every child rank that has ended (or only rank `only`), waiting up to timeout_ms for the
  // first one when none has; a failed one becomes the job's first failure (reap()).
  void reap_gone_ranks(int timeout_ms, std::optional<int> only = std::nullopt) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (const RankProcess& rk : ranks_) {
      if (!rk.alive || !rk.pidfd || (only && rk.rank != *only)) continue;
      fds.push_back(pollfd{rk.pidfd.get(), POLLIN, 0});
      which.push_back(rk.rank);
    }
    if (fds.empty()) return;
    const int n = poll_within(fds.data(), fds.size(), timeout_ms);
    for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) reap(which[i]);
    }
  }

  void reap(int r) {
    RankProcess& rk = ranks_[static_cast<std::size_t>(r)];
    if (!rk.alive) return;
    int status = 0;
    const pid_t got = ::waitpid(rk.pid, &status, WNOHANG);
    if (got == 0) return;  // spurious
    if (got < 0) status = W_EXITCODE(255, 0);  // someone else reaped it: count as a failure
    rk.alive = false;
    rk.status = status;
    --live_;
    events_.unwatch(rk.pidfd.get());
    rk.pidfd.reset();
    // Everything the rank wrote is in its pipes now: take it all, then deliver partial lines.
    read_stream(r, Stream::out, true);
    read_stream(r, Stream::err, true);
    if (status_failed(status) && !stop_.stopping()) await_blamed_rank(r);
    if (status_failed(status) && !stop_.stopping()) {
      first_failure_ = r;
      failure_key_.set(fmt::format("rank {}: {}", global(r), describe_status(status)));
      publish_to_nodes(status_exit_code(status),
                       fmt::format("rank {} (pid {}){} {}", global(r), rk.pid, where(), describe_status(status)));
      stop_.begin(ranks_, SIGTERM);
    } else if (!stop_.stopping()) {
      check_joined(r, status);
    }
  }

  // Rank r failed with the job's failure record already blaming another rank, e.g. "rank 0:
  // process gone" from a survivor whose connection to rank 0 broke: the dying rank closes its
  // sockets before its exit shows (the kernel closes a process's files before it tells the
  // parent), so the survivor may exit first. Waits up to SelfSpawn::kPeerGraceMs for the blamed
  // rank's end and reaps it first, so that the root cause is the job's first failure, as
  // on_self_done does for rank 0. A blamed rank of another node is that node's launcher's to
  // reap: the wait is for its report to reach this node (on_remote), before this node publishes
  // its own.
  void await_blamed_rank(int r) {
    if (WIFSIGNALED(ranks_[static_cast<std::size_t>(r)].status)) return;  // a signal is its own cause
    const auto blamed = FailureKey::blamed_rank(failure_key_.recorded());
    if (!blamed) return;
    const int b = *blamed - o_.job.node.rank_offset;
    if (b == r) return;
    if (b >= 0 && b < static_cast<int>(ranks_.size())) {
      reap_gone_ranks(SelfSpawn::kPeerGraceMs, b);
    } else if (o_.nodes && *blamed >= 0 && *blamed < o_.job.world_size) {
      pollfd fd{o_.nodes->fd(), POLLIN, 0};
      if (poll_within(&fd, 1, SelfSpawn::kPeerGraceMs) > 0) on_remote();
    }
  }

  // A rank that ended cleanly without having joined would leave the others waiting in join()
  // for the whole FASTRUN_TIMEOUT: record it under the failure key, which join() watches, so
  // they fail at once naming it. (join() publishes peer_key before anything else, so a rank
  // that joined and then left is never taken for one that did not. Ranks that never join do
  // not read the key.)
  void check_joined(int r, int status) {
    if (!failure_key_.known_unjoined(r)) return;
    left_unjoined_.push_back(r);
    failure_key_.set(fmt::format("rank {}: {} before it joined", r, describe_status(status)));
  }

  // Global rank of local rank r, and " on node K (host H)" in a multi-node job.
  int global(int r) const { return o_.job.node.rank_offset + r; }
  std::string where() const {
    if (!o_.nodes) return {};
    return fmt::format(" on node {} (host {})", o_.job.node.node_rank, o_.job.node.host);
  }

  void publish_to_nodes(int code, const std::string& why, bool final = false) {
    if (!o_.nodes) return;
    if (auto first = o_.nodes->publish(code, why, final)) remote_ = first;  // another node failed first
  }

  // Another node failed (or node 0 is gone): stop this node's ranks and exit with its code.
  void on_remote() {
    std::uint64_t value = 0;
    (void)::read(o_.nodes->fd(), &value, sizeof value);
    events_.unwatch(o_.nodes->fd());
    if (stop_.stopping()) return;
    remote_ = o_.nodes->remote();
    // Not when node 0's store is the thing lost: a set would wait out the whole store timeout
    // (FASTRUN_TIMEOUT) with this node's ranks still running, e.g. after a network partition.
    if (remote_ && !remote_->store_lost) failure_key_.set(remote_->why);
    stop_.begin(ranks_, SIGTERM);
  }

  // Whoever read the launcher's output went away (`fastrun ... | head -1`): stop the job as
  // SIGPIPE stops a shell pipeline, with the usual SIGTERM/SIGKILL escalation, instead of relaying
  // into the void for ever. Until the ranks are gone their output is still read, and filed with
  // --log-dir.
  void on_console_closed() {
    launcher_signal_ = SIGPIPE;
    stop_.begin(ranks_, SIGTERM);
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
      const RankProcess& rk = ranks_[static_cast<std::size_t>(r)];
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
      signal_live_ranks(ranks_, sig);
      return;
    }
    if (!stop_.stopping()) {
      launcher_signal_ = sig;
      publish_to_nodes(128 + sig, fmt::format("the launcher{} got {}", where(), signal_name(sig)), /*final=*/true);
      stop_.begin(ranks_, sig);
    } else {
      stop_.hurry(sig);
    }
  }

  FailureRecord failure_record(const AttemptOutcome::Failure& f) const {
    FailureRecord r;
    r.run_id = o_.job.run_id;
    r.attempt = o_.job.attempt;
    r.rank = global(f.rank);
    r.local_rank = f.rank;
    r.node_rank = o_.job.node.node_rank;
    r.host = o_.job.node.host;
    r.pid = f.pid;
    r.status = f.status;
    r.recorded = f.recorded;
    r.stderr_tail = f.stderr_tail;
    r.last_collective = f.last_collective;
    return r;
  }

  // What the summary is made from; reads the store and the relay only when the summary names
  // a failed rank of this node.
  AttemptOutcome outcome() const {
    AttemptOutcome out;
    out.world_size = o_.job.world_size;
    out.first_rank = first_rank_;
    out.rank_offset = o_.job.node.rank_offset;
    out.where = where();
    out.kill_timeout = o_.job.kill_timeout;
    out.launcher_signal = launcher_signal_;
    out.second_signal = stop_.second_signal();
    if (first_failure_) {
      const RankProcess& rk = ranks_[static_cast<std::size_t>(*first_failure_)];
      AttemptOutcome::Failure& f = out.first_failure.emplace();
      f.rank = rk.rank;
      f.pid = rk.pid;
      f.status = rk.status;
      if (!launcher_signal_) {
        f.recorded = failure_key_.recorded();
        f.log_dir = relay_.rank_log_dir(rk.rank);
        f.stderr_tail = relay_.stderr_tail(rk.rank);
        f.last_collective = failed_last_collective_;
      }
    }
    out.spawn_error = spawn_error_;
    out.remote = remote_;
    out.left_unjoined = left_unjoined_;
    for (const RankProcess& rk : ranks_) {
      if (rk.sigkilled_by_us && rk.pid > 0) out.sigkilled.push_back(rk.rank);
    }
    out.stopped_leftovers = stopped_leftovers_;
    out.attempt = o_.job.attempt;
    out.resized_attempts = o_.job.resized_attempts;
    out.max_restarts = (o_.renew_store || o_.restarts_by_caller) ? o_.job.max_restarts : 0;
    return out;
  }

  SupervisorOptions& o_;
  const int first_rank_;  // 1 when rank 0 is this process (launch_self), else 0
  OutputRelay relay_;
  const FailureKey failure_key_;
  StopEscalation stop_;
  StallWatch* stall_watch_ = nullptr;  // run()'s, while the ranks run: wait_once() drives its scans
  EventSet events_;
  RankOutput output_{relay_, events_};
  os::UniqueFd sigfd_, devnull_;
  std::vector<RankProcess> ranks_;
  int live_ = 0;
  bool self_open_ = false;  // rank 0's own pipes are still being relayed
  std::optional<int> first_failure_;
  std::optional<stall::LastCollective> failed_last_collective_;  // first_failure_'s, from the stall board
  std::optional<NodeFailure> remote_;
  std::vector<int> left_unjoined_;  // ranks that exited 0 without having joined
  int launcher_signal_ = 0;
  bool adopting_ = false;            // this process is a child subreaper (CLI)
  bool stopped_leftovers_ = false;   // the ranks left processes running, and they were stopped
  std::unordered_map<pid_t, int> rank_of_pid_;  // for SIGCHLD: which children are ranks
  std::string spawn_error_;
  std::optional<rlimit> user_nofile_;  // the fd limit the ranks get back, when it was raised
};

}  // namespace

JobResult run_job_attempt(SupervisorOptions& options) {
  auto attempt = std::make_unique<JobAttempt>(options);  // its read buffer (RankOutput) is large for a stack
  return attempt->run();
}

}  // namespace fastrun::launcher
