#pragma once
// Test helper: runs a program (the fastrun CLI, the sparring partner) as a real child process with
// its stdout/stderr in files, extra environment entries, and a deadline. Every child is reaped:
// the destructor SIGKILLs and reaps one that is still running.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_support/temp_dir.h"  // TempDir

namespace fastrun::test {

struct RunResult {
  int status = -1;    // raw wait status
  int exit_code = -1; // WEXITSTATUS, or 128+signal
  std::string out, err;
  double seconds = 0;
};

// The signal state a child starts with, when a test sets one: every signal at its default
// disposition, then `ignored` at SIG_IGN and `blocked` as its mask (a shell's background job
// starts with SIGINT and SIGQUIT ignored; nohup adds SIGHUP).
struct SignalState {
  std::vector<int> ignored;
  std::vector<int> blocked;
};

class Process {
 public:
  // env: entries to set ("NAME" -> value) or remove (nullopt) on top of this process's environ.
  // signals: nullopt leaves the child this process's dispositions and an empty mask.
  Process(std::vector<std::string> argv, std::map<std::string, std::optional<std::string>> env,
          const std::filesystem::path& io_dir, const std::optional<SignalState>& signals = std::nullopt);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Where the child's stderr goes, readable while it runs.
  const std::string& err_path() const { return err_path_; }
  void signal(int sig) const;
  // Waits up to `timeout`; nullopt on timeout (the process is left running).
  std::optional<RunResult> wait(std::chrono::milliseconds timeout);
  // wait() that fails the test (and kills the process) on timeout.
  RunResult finish(std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::string out_path_, err_path_;
  std::chrono::steady_clock::time_point start_;
};

RunResult run(std::vector<std::string> argv, std::map<std::string, std::optional<std::string>> env = {},
              std::chrono::milliseconds timeout = std::chrono::seconds(20));

std::string read_file(const std::filesystem::path& p);
// True when pid is gone or a zombie (a dead process not yet reaped by its new parent).
bool process_gone(pid_t pid);
// The pids ranks first..last-1 wrote to DIR/pid-<rank> (sparring partner --pidfile DIR/pid-%r),
// each file waited for up to 20 s (scaled to the build: time_limits.h); a test failure after that.
std::vector<pid_t> read_rank_pids(const std::filesystem::path& dir, int first, int last);
// Waits until every pid is gone (exited, or a zombie) or `timeout` has passed.
void wait_until_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);
// Waits up to `timeout` for file p to hold exactly `expected`; returns what it holds at the end.
std::string wait_for_content(const std::filesystem::path& p, const std::string& expected,
                             std::chrono::milliseconds timeout);
// Entries of /dev/shm whose name starts with `prefix`.
std::vector<std::string> shm_entries(const std::string& prefix);

// The sparring partner's --dump file: argv entries and environment entries.
struct Dump {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};
Dump read_dump(const std::filesystem::path& p);

// The binaries under test (paths compiled in by tests/launcher/CMakeLists.txt) and the small
// helpers every launcher test file uses.
inline const std::string kFastrun = FASTRUN_BIN;
inline const std::string kPartner = SPARRING_BIN;

// fastrun LAUNCHER_ARGS sparring_partner PARTNER_ARGS
inline std::vector<std::string> cmd(std::vector<std::string> launcher_args, std::vector<std::string> partner_args) {
  std::vector<std::string> v{kFastrun};
  v.insert(v.end(), launcher_args.begin(), launcher_args.end());
  v.push_back(kPartner);
  v.insert(v.end(), partner_args.begin(), partner_args.end());
  return v;
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace fastrun::test
