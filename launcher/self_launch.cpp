// In-process spawn (self_launch.h). Rank 0 is the calling process; a supervisor thread starts and
// watches ranks 1..N-1; an atexit handler makes rank 0's exit wait for them.
#include "fastrun/launcher/self_launch.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxxabi.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "fastrun/launcher/binding/apply_binding.h"
#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/child_env.h"
#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/self_launch_restarts.h"
#include "fastrun/launcher/supervisor.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/env_sources.h"
#include "fastrun/runtime/os/fd_control.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun {
namespace {

using launcher::JobConfig;
using launcher::JobResources;

// The job of this process when it is rank 0. Created once, never destroyed: it must outlive
// main() and every static destructor that might still print.
struct SelfJob {
  JobConfig job;
  std::unique_ptr<JobResources> resources;
  std::thread supervisor;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  int exit_code = 0;
  // Rank 0's own output relayed through pipes: the terminal fds saved, and the eventfd that tells
  // the supervisor rank 0 is done writing.
  int saved_out = -1;
  int saved_err = -1;
  int self_done = -1;
};

SelfJob* g_job = nullptr;

// Rank 0's SIGINT/SIGTERM/SIGHUP while children run: the handler only passes the signal number
// to the supervisor (async-signal-safe write), which stops the children, removes the store and
// then re-raises the signal on rank 0 with its default action.
int g_signal_pipe[2] = {-1, -1};
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_stop_signal(int sig) {
  const int saved = errno;
  const unsigned char c = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

// Installs on_stop_signal where the disposition is still SIG_DFL (a program that ignores SIGHUP,
// or handles SIGINT itself, keeps doing so).
void install_stop_handlers() {
  for (int sig : kStopSignals) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Back to SIG_DFL where our handler is still installed; a signal that arrived meanwhile is
// re-raised so that it is not lost.
void remove_stop_handlers() {
  for (int sig : kStopSignals) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != on_stop_signal) continue;
    ::signal(sig, SIG_DFL);
  }
  unsigned char c = 0;
  if (g_signal_pipe[0] >= 0 && ::read(g_signal_pipe[0], &c, 1) == 1) ::kill(::getpid(), c);
}

// Ends rank 0 as if `sig` had killed it (the shell sees the signal), after the job is cleaned up.
[[noreturn]] void die_by(int sig) {
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

// Rank 0's end is told to the supervisor once (launcher::SelfSpawn::done): by the exit hook or by
// the terminate hook, whichever comes first; the other then leaves the process to its fate.
std::atomic<bool> g_self_reported{false};
thread_local bool t_supervisor = false;  // this thread is the supervisor (it must never wait for itself)

// Tells the supervisor how rank 0 ends (a wait status); false when that was told already.
bool report_self_end(SelfJob& j, int wait_status, bool peer_failure) {
  if (g_self_reported.exchange(true)) return false;
  std::fflush(stdout);
  std::fflush(stderr);
  if (j.saved_out >= 0) {
    // Put the terminal back (this closes our ends of the relay pipes) before telling the supervisor.
    // Called from exit and terminate hooks, where nothing may throw: should a dup2 fail, 1 and 2
    // stay on the relay pipes, whose reads the supervisor then drains before closing them.
    try {
      os::checked_dup2(j.saved_out, 1, "rank 0's stdout, back to the terminal");
      os::checked_dup2(j.saved_err, 2, "rank 0's stderr, back to the terminal");
    } catch (const std::exception&) {
    }
  }
  const std::uint64_t value = (static_cast<std::uint64_t>(wait_status & 0xffff) + 1) |
                              (peer_failure ? launcher::SelfSpawn::kPeerFailure : 0);
  (void)!::write(j.self_done, &value, sizeof value);
  return true;
}

// Rank 0 is exiting normally (return from main, or exit()) with `status`: wait for the other
// ranks. A non-zero status is rank 0's failure: the supervisor stops the others first. When any
// rank fails, the supervisor thread ends the process with that status before this returns.
// (on_exit rather than atexit: it is the only exit hook that sees the status.)
void wait_for_ranks_at_exit(int status, void*) {
  SelfJob& j = *g_job;
  if (!report_self_end(j, W_EXITCODE(status & 0xff, 0), false)) return;  // after std::terminate: its business
  int code = 0;
  {
    std::unique_lock lock(j.mutex);
    j.cv.wait(lock, [&] { return j.done; });
    code = j.exit_code;
  }
  if (j.supervisor.joinable()) j.supervisor.join();
  j.resources->release();
  if (code != 0) ::_exit(code);
}

// Rank 0 ending through std::terminate: an exception nobody caught, typically the PeerFailure a
// collective throws after a peer died, in a program without try/catch. The default handler's
// abort() would take the supervisor thread down with the process before it stops the other
// ranks, prints the summary and removes the store, and the shell would see 134 (SIGABRT) instead
// of the dead peer's status (docs/launching.md, "In-process spawn"). So rank 0 says what it caught,
// reports itself killed by SIGABRT (a PeerFailure also asks the supervisor to wait briefly for
// the peer's exit), and waits: the supervisor ends the process with the first failing rank's
// status, or, when rank 0 failed first, by SIGABRT after the clean-up (the core dump is kept).
std::terminate_handler g_previous_terminate = nullptr;
std::atomic<bool> g_terminated{false};  // rank 0 reported itself through on_terminate

[[noreturn]] void fall_back_to_abort() {
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

// What the default handler prints, to rank 0's stderr (filed and relayed when that is set up);
// returns whether it was a fastrun::PeerFailure.
bool say_what_was_uncaught() {
  const std::exception_ptr current = std::current_exception();
  if (!current) {
    std::fprintf(stderr, "fastrun: rank 0: std::terminate called without an exception\n");
    return false;
  }
  const std::type_info* type = abi::__cxa_current_exception_type();
  int demangled_ok = -1;
  char* name = type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &demangled_ok) : nullptr;
  const char* shown = demangled_ok == 0 ? name : type ? type->name() : "?";
  bool peer = false;
  try {
    std::rethrow_exception(current);
  } catch (const PeerFailure& e) {
    peer = true;
    std::fprintf(stderr, "fastrun: rank 0: uncaught %s: %s\n", shown, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fastrun: rank 0: uncaught %s: %s\n", shown, e.what());
  } catch (...) {
    std::fprintf(stderr, "fastrun: rank 0: uncaught %s\n", shown);
  }
  std::free(name);
  return peer;
}

[[noreturn]] void on_terminate() {
  SelfJob* j = g_job;
  // Not from the supervisor itself, and only while it still watches rank 0 (once every other rank
  // has succeeded it is gone, and rank 0's failure is its own: abort as usual).
  bool watched = j && !t_supervisor;
  if (watched) {
    std::lock_guard lock(j->mutex);
    watched = !j->done;
  }
  if (!watched) fall_back_to_abort();
  const bool peer = say_what_was_uncaught();
  g_terminated = true;
  if (!report_self_end(*j, SIGABRT, peer)) std::abort();  // already said above: no second account
  // The supervisor ends the process: after the peer grace, --kill-timeout's SIGTERM/SIGKILL
  // escalation and the stop of what the ranks left running. Bounded all the same.
  const auto bound = std::chrono::duration<double>(2 * j->job.kill_timeout + 10);
  std::unique_lock lock(j->mutex);
  if (!j->cv.wait_for(lock, bound, [&] { return j->done; }))
    std::fprintf(stderr, "fastrun: rank 0: the supervisor did not end the job within %.0f s\n", bound.count());
  lock.unlock();
  std::abort();  // done without acting on rank 0's report: its failure is its own
}

void supervise(SelfJob* j, launcher::SupervisorOptions options) {
  t_supervisor = true;
  int code = 1;
  int stop_signal = 0;
  std::optional<int> failed_rank;
  try {
    const auto result = launcher::Supervisor(std::move(options)).run();
    code = result.exit_code;
    stop_signal = result.stop_signal;
    failed_rank = result.failed_rank;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fastrun: supervisor failed: %s\n", e.what());
  }
  if (stop_signal != 0) {
    j->resources->release();
    die_by(stop_signal);
  }
  if (code != 0) {
    // A rank failed and the others are stopped: remove the store, end rank 0 with that status.
    j->resources->release();
    // Rank 0 itself failed first through std::terminate: end as abort() would have.
    if (failed_rank == 0 && code == 128 + SIGABRT && g_terminated.load()) die_by(SIGABRT);
    ::_exit(code);
  }
  if (g_signal_pipe[0] >= 0) remove_stop_handlers();
  std::lock_guard lock(j->mutex);
  j->done = true;
  j->exit_code = code;
  j->cv.notify_all();
}

}  // namespace

int launch_self(int argc, char** argv, const SelfLaunchOptions& options) {
  // Already a rank of a world: a child of ours, a rank under the CLI, torchrun, srun or mpirun
  // (every source join() reads). Starting ranks here would split the job into private worlds;
  // start nothing, and join() joins that world.
  const join_detail::Layout world = join_detail::detect_layout();
  if (world.source != "none") return world.rank;
  if (g_job) throw ConfigError("fastrun::launch_self was called twice in one process; call it once, first in main");

  // 1. Check everything before anything starts.
  launcher::JobOptions jo;
  jo.nproc = options.nproc;
  if (!options.devices.empty()) jo.devices = options.devices;
  jo.log_dir = options.log_dir;
  jo.output = launcher::parse_output_mode(options.output);
  jo.tag_output = options.tag_output;
  jo.kill_timeout = options.kill_timeout;
  jo.stall_report = options.stall_report;
  jo.run_id = options.run_id;
  jo.keep_background = options.keep_background;
  if (!options.bind.empty()) jo.bind = launcher::parse_bind_mode(options.bind, "SelfLaunchOptions::bind");
  jo.report_bindings = options.report_bindings;
  if (options.max_restarts && *options.max_restarts < 0)
    throw ConfigError(fmt::format("SelfLaunchOptions::max_restarts {}: give a number of restarts of 0 or more "
                                  "(0: one attempt)",
                                  *options.max_restarts));
  jo.max_restarts = options.max_restarts;  // nullopt: FASTRUN_MAX_RESTARTS, whose bad value prepare_job names
  auto j = std::make_unique<SelfJob>();
  j->job = launcher::prepare_job(jo);

  // 2. Log directory and store; then the children's environment (a copy, taken before rank 0's
  //    own variables change), then rank 0's variables, CUDA_VISIBLE_DEVICES included.
  j->resources = std::make_unique<JobResources>(j->job);
  if (j->job.max_restarts > 0) {
    // Rank 0 must be restartable too: this process becomes the job's launcher, every rank a
    // child (self_launch_restarts.h), and it ends as the job ends, never returning.
    const launcher::JobResult result = launcher::run_self_job_with_restarts(j->job, *j->resources, argc, argv);
    j->resources->release();
    std::fflush(nullptr);
    if (result.stop_signal != 0) die_by(result.stop_signal);
    ::_exit(result.exit_code);
  }
  launcher::SupervisorOptions so;
  so.job = j->job;
  so.exec_path = "/proc/self/exe";
  so.argv.assign(argv, argv + argc);
  so.failure_store = j->resources->store();
  so.janitor = j->resources->janitor();
  launcher::SelfSpawn& self = so.self.emplace();
  self.base_env = launcher::current_environment();
  launcher::apply_to_self(j->job, 0);
  if (j->job.binding.report)
    std::fputs(launcher::binding_report(j->job.binding, 0, launcher::own_affinity()).c_str(), stderr);
  if (!j->job.binding.ranks.empty()) launcher::bind_calling_thread(j->job.binding.ranks[0]);

  // 3. Rank 0's own output through the relay when it must be filed or tagged.
  j->self_done = check_syscall(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  self.done = j->self_done;
  if (!j->job.log_dir.empty() || j->job.tag_output) {
    int out[2], err[2];
    check_syscall(::pipe2(out, O_CLOEXEC), "pipe2");
    check_syscall(::pipe2(err, O_CLOEXEC), "pipe2");
    // The write ends live on as 1 and 2 once dup2'd; these close the originals, on a throw too.
    const os::UniqueFd out_write(out[1]), err_write(err[1]);
    std::fflush(stdout);
    std::fflush(stderr);
    j->saved_out = os::checked_fcntl(1, F_DUPFD_CLOEXEC, 3, "rank 0's stdout, kept for the relay");
    j->saved_err = os::checked_fcntl(2, F_DUPFD_CLOEXEC, 3, "rank 0's stderr, kept for the relay");
    os::checked_dup2(out[1], 1, "rank 0's stdout, onto its relay pipe");  // dup2 clears O_CLOEXEC on 1 and 2
    os::checked_dup2(err[1], 2, "rank 0's stderr, onto its relay pipe");
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a pipe now: keep it line-buffered like a terminal
    self.out = out[0];
    self.err = err[0];
    self.terminal_out = j->saved_out;
    self.terminal_err = j->saved_err;
  }

  // 4. Rank 0's stop signals go to the supervisor while there are children to stop.
  if (j->job.world_size > 1) {
    check_syscall(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK), "pipe2");
    self.signals = g_signal_pipe[0];
    install_stop_handlers();
    g_previous_terminate = std::set_terminate(on_terminate);
  }

  // 5. The supervisor thread, with every signal blocked (signals are rank 0's business); it
  //    lives as long as the children, as their parent-death signal requires.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  SelfJob* raw = j.get();
  j->supervisor = std::thread(supervise, raw, std::move(so));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g_job = j.release();
  ::on_exit(wait_for_ranks_at_exit, nullptr);
  return 0;
}

}  // namespace fastrun
