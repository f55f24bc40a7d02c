#pragma once
// Starting one rank: fork + exec with the protections every rank gets (docs/launching.md, "Failure").
// In the child, before exec: its own process group (setpgid), PR_SET_PDEATHSIG(SIGKILL), then a
// check that the parent is still the expected one (it may have died before prctl), the default
// disposition for every signal (except an ignored SIGHUP: nohup), an empty signal mask, and the
// given stdin/stdout/stderr. PR_SET_PDEATHSIG fires when the *thread* that
// forked exits, so call spawn_rank from a thread that lives as long as the job.
#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/binding/apply_binding.h"

namespace fastrun::launcher {

struct SpawnRequest {
  std::string path;               // the executable (already resolved; "/proc/self/exe" for self)
  std::vector<std::string> argv;  // argv[0] included, passed byte for byte
  std::vector<std::string> envp;  // "NAME=value"
  int stdin_fd = -1;              // duplicated onto 0 (-1: leave 0 as it is)
  int stdout_fd = -1;             // duplicated onto 1
  int stderr_fd = -1;             // duplicated onto 2
  std::optional<rlimit> nofile;   // RLIMIT_NOFILE to set before exec (the user's, fd_limit.h)
  std::optional<ChildBinding> binding;  // CPUs and memory node to bind before exec (--bind)
};

// Returns the child's pid (also its process-group id). Throws Error when fork fails. An exec
// failure shows up as the child exiting 127 after writing "fastrun: cannot execute ..." to its
// stderr; a binding the kernel refuses, as exiting 127 after "fastrun: cannot bind the rank".
pid_t spawn_rank(const SpawnRequest& request);

// PROGRAM resolved like a shell: a name containing '/' is used as is; otherwise the first
// executable regular file named so in $PATH (default "/usr/bin:/bin"). ConfigError if none.
std::string resolve_program(const std::string& program);

// "SIGKILL" for 9, "signal 77" for an unknown one.
std::string signal_name(int sig);

}  // namespace fastrun::launcher
