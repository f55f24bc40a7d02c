#pragma once
// Runs a program (the fastrun CLI, or train_mlp self-spawning) as a child in its own process
// group, with stdout+stderr captured to a file, and a deadline: at the deadline the whole group
// is SIGKILLed and reaped. After the child exits, any straggler left in its group is killed
// too, so no test leaves a process behind.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fastrun::test {

struct JobResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved
};

inline JobResult run_job(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/fastrun-ddp-job-XXXXXX";
  const int out_fd = ::mkstemp(tmpl);
  if (out_fd < 0) throw std::runtime_error("run_job: mkstemp failed");
  const std::string out_path = tmpl;
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("run_job: fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(out_fd);
  JobResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // stragglers of the group, if any (ESRCH otherwise)
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  ::unlink(out_path.c_str());
  return r;
}

}  // namespace fastrun::test
