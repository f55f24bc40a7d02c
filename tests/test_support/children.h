#pragma once
// Real child processes for multi-process tests: fork (no exec), the child runs a function and
// leaves with _exit (no atexit handlers, no double-flushed stdio). Every child is reaped:
// wait_all() has a deadline after which stragglers are SIGKILLed, and the destructor SIGKILLs
// and reaps whatever is left, so no test leaves a process behind.
//   test::Children kids;
//   kids.spawn([&] { ...; return 0; });       // the child's exit code
//   CHECK(kids.reap(10s) == 0);                // how many did not exit 0 (stragglers included)
// A body that throws exits kThrew; its message goes to stderr, or with capture_messages to a
// pipe read by the parent into ChildStatus::message (the rank runners report it per rank).
// Fork only from a single-threaded test process (no live contexts with comm threads).
// Threading: one Children object is used by one thread.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fastrun::test {

// How one child ended.
struct ChildStatus {
  bool exited = false;     // exited normally (else killed by a signal)
  int code = -1;           // exit code when exited, else -1
  int signal = 0;          // the signal that ended it, else 0
  bool timed_out = false;  // still running at the deadline: SIGKILLed by wait_all
  std::string message;     // with capture_messages: what the body threw
  bool ok() const { return exited && code == 0 && !timed_out; }
  // The code, 128+signal, or -1 when it had to be killed at the deadline.
  int shell_code() const { return timed_out ? -1 : exited ? code : signal ? 128 + signal : -1; }
};

// What wait_all does besides waiting.
struct WaitPlan {
  int kill_index = -1;                      // SIGKILL this child (spawn order) ...
  std::chrono::milliseconds kill_after{0};  // ... this long into the wait, and reap it only after
                                            // all others: peers must read a zombie as dead
};

class Children {
 public:
  static constexpr int kThrew = 99;  // exit code of a body that threw

  explicit Children(bool capture_messages = false) : capture_(capture_messages) {}
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (auto& c : kids_) {
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
      if (c.read_fd >= 0) ::close(c.read_fd);
    }
  }

  // The child runs `body` and exits with its result. Throws when pipe or fork fails.
  pid_t spawn(const std::function<int()>& body) {
    int fds[2] = {-1, -1};
    if (capture_ && ::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("Children::spawn: pipe2 failed");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      if (capture_) {
        ::close(fds[0]);
        ::close(fds[1]);
      }
      throw std::runtime_error("Children::spawn: fork failed");
    }
    if (pid == 0) {
      if (capture_) ::close(fds[0]);
      int rc = kThrew;
      std::string message;
      try {
        rc = body();
      } catch (const std::exception& e) {
        message = e.what();
      } catch (...) {
        message = "a non-std exception (Catch's REQUIRE in a child? use RANK_REQUIRE there)";
      }
      if (!message.empty()) {
        if (capture_) write_all(fds[1], message);
        else std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), message.c_str());
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    Kid kid{pid, -1, {}};
    if (capture_) {
      ::close(fds[1]);
      ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
      kid.read_fd = fds[0];
    }
    kids_.push_back(std::move(kid));
    return pid;
  }

  // Sends `sig` to every child not reaped yet.
  void kill_all(int sig) {
    for (const auto& c : kids_)
      if (c.pid > 0) ::kill(c.pid, sig);
  }

  // SIGKILLs and reaps one child and forgets it (wait_all will not report it).
  void kill_and_reap(pid_t pid) {
    for (auto it = kids_.begin(); it != kids_.end(); ++it)
      if (it->pid == pid && pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        if (it->read_fd >= 0) ::close(it->read_fd);
        kids_.erase(it);
        return;
      }
  }

  // Waits for every child until `timeout`, then SIGKILLs and reaps the rest (timed_out). Returns
  // each child's status in spawn order and forgets them all.
  std::vector<ChildStatus> wait_all(std::chrono::milliseconds timeout, const WaitPlan& plan = {}) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    const auto held = static_cast<std::size_t>(plan.kill_index);  // only meaningful when >= 0
    bool killed = plan.kill_index < 0 || held >= kids_.size();
    auto delay = std::chrono::microseconds(200);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (!killed && now - start >= plan.kill_after) {
        if (kids_[held].pid > 0) ::kill(kids_[held].pid, SIGKILL);
        killed = true;
      }
      std::size_t left = 0;
      for (const auto& c : kids_) left += c.pid > 0;
      for (std::size_t i = 0; i < kids_.size(); ++i) {
        auto& c = kids_[i];
        drain(c);
        if (c.pid <= 0) continue;
        if (plan.kill_index >= 0 && i == held && killed && left > 1) continue;  // a zombie for now
        int status = 0;
        const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
        if (r == c.pid || r < 0) {  // r < 0: not ours to wait for any more (reads as code -1)
          if (r == c.pid) record(c, status);
          c.pid = 0;
          --left;
        }
      }
      if (left == 0) break;
      if (now >= deadline) {
        for (auto& c : kids_) {
          if (c.pid <= 0) continue;
          ::kill(c.pid, SIGKILL);
          int status = 0;
          ::waitpid(c.pid, &status, 0);
          record(c, status);
          c.status.timed_out = true;
        }
        break;
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::microseconds(5000));
    }
    std::vector<ChildStatus> out;
    for (auto& c : kids_) {
      drain(c);
      if (c.read_fd >= 0) ::close(c.read_fd);
      out.push_back(std::move(c.status));
    }
    kids_.clear();
    return out;
  }

  // wait_all() that returns how many children did not exit 0 (killed stragglers included).
  int reap(std::chrono::milliseconds timeout) {
    int failed = 0;
    for (const auto& s : wait_all(timeout)) failed += !s.ok();
    return failed;
  }

  std::size_t size() const { return kids_.size(); }

 private:
  struct Kid {
    pid_t pid;    // 0 once reaped
    int read_fd;  // the message pipe (capture_messages), else -1
    ChildStatus status;
  };

  static void record(Kid& c, int status) {
    c.status.exited = WIFEXITED(status);
    c.status.code = c.status.exited ? WEXITSTATUS(status) : -1;
    c.status.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    c.pid = 0;
  }

  static void drain(Kid& c) {
    if (c.read_fd < 0) return;
    char buf[4096];
    ssize_t r;
    while ((r = ::read(c.read_fd, buf, sizeof buf)) > 0) c.status.message.append(buf, static_cast<std::size_t>(r));
  }

  static void write_all(int fd, const std::string& s) {
    const char* p = s.data();
    std::size_t left = s.size();
    while (left > 0) {
      const ssize_t w = ::write(fd, p, left);
      if (w <= 0) return;
      p += w;
      left -= static_cast<std::size_t>(w);
    }
  }

  bool capture_;
  std::vector<Kid> kids_;
};

}  // namespace fastrun::test
