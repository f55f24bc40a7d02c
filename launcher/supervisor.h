#pragma once
// The supervisor (docs/launching.md, "Failure" and "Output"): starts the ranks and watches them from one
// event loop (epoll over a pidfd per rank, their output pipes, and a signalfd in the CLI). No
// sleep-polling: a rank's exit wakes the loop at once.
//
// Rules: the first rank to exit non-zero or by a signal stops the job — the failure key is set
// in the job's store, every other rank's process group gets SIGTERM, and SIGKILL after the kill
// timeout. SIGINT/SIGTERM/SIGHUP to the launcher (handle_signals) are forwarded to every rank's
// group with the same escalation, a second one kills at once; SIGUSR1/SIGUSR2 are forwarded.
// Threading: run() must be called from a thread that lives until it returns (the children's
// parent-death signal is tied to it); nothing else may be called concurrently.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/janitor.h"
#include "fastrun/launcher/job_config.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::launcher {

// The in-process spawn (self_launch.h): rank 0 is the calling process, so the supervisor starts
// only ranks 1.. and learns about rank 0 through these fds instead of a pidfd and pipes of its
// own. Only launch_self fills this in; the CLI's event loop never sees any of it.
struct SelfSpawn {
  // An eventfd rank 0 writes when it ends: its wait status + 1 (an exit status when it exits
  // normally, SIGABRT when it ends through std::terminate), with kPeerFailure added when what
  // ended it was a PeerFailure. A failed status is rank 0's failure, unless another rank is seen
  // to have failed first: every rank already gone is reaped first, and with kPeerFailure the
  // supervisor waits up to kPeerGrace for one (rank 0 may have learned of a death, e.g. from a
  // broken connection, a moment before the peer's exit shows). The other ranks are then stopped
  // as for any failing rank.
  int done = -1;
  static constexpr std::uint64_t kPeerFailure = std::uint64_t{1} << 32;
  static constexpr int kPeerGraceMs = 1000;
  // With rank 0's own output relayed (--log-dir or --tag-output): the read ends of rank 0's
  // stdout/stderr pipes (owned by the supervisor from then on); rank 0 puts its own fds back
  // before writing `done`, and its pipes are then drained and closed. -1: not relayed.
  int out = -1;
  int err = -1;
  // Read end of the pipe rank 0's SIGINT/SIGTERM/SIGHUP handler writes the signal number to (one
  // byte); treated like a signal to the CLI launcher. -1: a world of one has nothing to stop.
  int signals = -1;
  // Where the relay writes: the terminal fds rank 0 saved before pointing 1 and 2 at the pipes.
  int terminal_out = 1;
  int terminal_err = 2;
  // The environment the children's is built from: a copy taken before rank 0 changed its own.
  std::vector<std::string> base_env;
};

struct SupervisorOptions {
  JobConfig job;
  std::string exec_path;           // resolved PROGRAM, or "/proc/self/exe"
  std::vector<std::string> argv;   // every rank's argv, argv[0] included
  bool handle_signals = false;     // CLI: the caller blocked kHandledSignals in every thread
  // CLI: become a child subreaper, so that what the ranks leave running is found and stopped
  // when the job ends (leftovers.h), and reap such orphans (SIGCHLD) while it runs.
  bool adopt_orphans = false;
  int rank0_stdin = -1;            // stdin of rank 0 (-1: /dev/null); other ranks get /dev/null
  Store* failure_store = nullptr;  // where the failure key is set (may be null)
  Janitor* janitor = nullptr;      // told each rank's pid (may be null; janitor.h)
  // Multi-node (node_watch.h): this node's first failure (a rank's, or a signal to the launcher)
  // is recorded there for every node, and another node's stops this node's ranks. Null: one node.
  NodeWatch* nodes = nullptr;
  // Set only by launch_self: rank 0 is the caller (the spawned ranks are 1..world_size-1).
  std::optional<SelfSpawn> self;
  // Restarts (CLI, one node; docs/launching.md, "Restarts"): called between two attempts, once
  // every rank of the failed one is reaped, to give the next attempt an empty store; returns the
  // new failure_store. Null: the job has one attempt, whatever job.max_restarts says.
  std::function<Store*()> renew_store;
  // Multi-node restarts (node_attempts.h): run() runs the one attempt job.attempt, filed under
  // its attempt's log folder, and returns; the caller decides with the
  // other nodes whether another follows. The summary counts job.max_restarts.
  bool restarts_by_caller = false;

  int first_rank() const { return self ? 1 : 0; }
};

// How a job ended.
struct JobResult {
  int exit_code = 0;               // what the launcher exits with
  std::optional<int> failed_rank;  // the first rank to fail, if any
  int stop_signal = 0;             // the signal that stopped the job (launcher or rank 0), or 0
  int attempt = 0;                 // the attempt that ended the job (FASTRUN_RESTART_COUNT)
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  // Spawns ranks first_rank()..world_size-1, relays their output, applies the failure rules, and
  // returns once every one of them has been reaped, with the summary already printed. A failed
  // attempt (not one a signal to the launcher stopped) is followed by another, up to
  // job.max_restarts times when renew_store is set, after restart_backoff() (restarts.h).
  // Throws Error only when set-up fails before any rank started (log files, epoll).
  JobResult run();

  // Signals handle_signals covers; the CLI blocks them (pthread_sigmask) before any thread starts.
  static sigset_t handled_signals();

 private:
  // Points the attempt's ranks at DIR/<run-id>/attempt-<n> (restarts.h), made; "" stays "".
  void use_attempt_log_dir(const std::string& run_log_dir, int attempt);

  SupervisorOptions options_;
};

}  // namespace fastrun::launcher
