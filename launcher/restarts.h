#pragma once
// What the supervisor does between two attempts of a job (docs/launching.md, "Restarts"): how
// long it waits, where the next attempt's logs go, and the wait itself, during which a signal to
// the launcher still ends the job.
#include <chrono>
#include <string>

namespace fastrun::launcher {

// The wait before restart n (1 = the first restart): 0 s, then 1, 2, 4, 8, 16 s, then 30 s for
// every later one. A one-off failure (a lost GPU, a flipped bit) costs no time; one that comes
// back at once (a bad input, a full disk) does not spin the machine or flood the logs.
std::chrono::milliseconds restart_backoff(int restart);
inline constexpr std::chrono::seconds kMaxRestartBackoff{30};

// "fastrun: starting attempt <a> of the job (restart <r> of --max-restarts <max>) in <s> s\n":
// what every launcher prints before the back-off of restart r (one node and several alike). The
// attempt is the restart's number unless attempts after a change of nodes came between
// (--nnodes MIN:MAX, node_attempts.h), which do not count against --max-restarts.
std::string restart_notice(int attempt, int restart, int max_restarts, std::chrono::milliseconds delay);

// DIR/<run-id>/attempt-<n>: where attempt n files its ranks' logs when restarts are allowed
// (`run_log_dir` is DIR/<run-id>; "" stays "": nothing is filed).
std::string attempt_log_dir(const std::string& run_log_dir, int attempt);

// Waits `delay`. With `signals` (the CLI, which blocked Supervisor::handled_signals()), a
// SIGINT, SIGTERM or SIGHUP that comes meanwhile ends the wait and is returned; SIGUSR1/SIGUSR2
// (no rank to forward them to) and SIGCHLD (the next attempt reaps) are passed over. Returns 0
// when the whole delay passed.
int wait_before_restart(std::chrono::milliseconds delay, bool signals);

}  // namespace fastrun::launcher
