#pragma once
// Real child processes for store tests (fork; the child runs a function and _exits). Every
// child is reaped: wait_all() has a deadline after which stragglers are SIGKILLed, and the
// destructor kills and reaps whatever is left, so no test leaves a process behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace fastrun::test {

class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    kill_all(SIGKILL);
    wait_all(std::chrono::seconds(10));
  }

  // The child runs `body` and exits with its result (an exception: message on stderr, exit 99).
  pid_t spawn(const std::function<int()>& body) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 99;
      try {
        rc = body();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
      } catch (...) {
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    if (pid > 0) pids_.push_back(pid);
    return pid;
  }

  void kill_all(int sig) {
    for (pid_t p : pids_)
      if (p > 0) ::kill(p, sig);
  }

  // Exit code per child in spawn order: the code, 128+signal, or -1 when it had to be killed
  // at the deadline. Reaps everyone.
  std::vector<int> wait_all(std::chrono::milliseconds timeout) {
    std::vector<int> codes(pids_.size(), -1);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t left = 0;
    for (pid_t p : pids_) left += p > 0;
    auto delay = std::chrono::microseconds(200);
    while (left > 0) {
      const bool late = std::chrono::steady_clock::now() >= deadline;
      for (std::size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] <= 0) continue;
        if (late) ::kill(pids_[i], SIGKILL);
        int status = 0;
        const pid_t r = ::waitpid(pids_[i], &status, late ? 0 : WNOHANG);
        if (r == pids_[i]) {
          if (late) codes[i] = -1;
          else codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pids_[i] = 0;
          --left;
        } else if (r < 0) {
          pids_[i] = 0;
          --left;
        }
      }
      if (left > 0 && !late) {
        std::this_thread::sleep_for(delay);
        delay = std::min(delay * 2, std::chrono::microseconds(5000));
      }
    }
    pids_.clear();
    return codes;
  }

  std::size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace fastrun::test
