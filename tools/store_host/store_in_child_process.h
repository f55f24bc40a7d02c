#pragma once
// A store hosted by a forked child process, for the tree's programs that fork clients of it
// (fastrun-bench store, the store tests' real-process cases). Hosted in the forking process, a
// tcp:// server's thread would be running at every fork, and GCC 12's ASan allocator is not
// fork-safe: a child forked while that thread held an allocator lock hangs at its first
// allocation (a CI run's bench.store never printed its tcp row). In a child of its own the
// server is where a launcher's is, in another process than its clients. Build-tree only.
//
// The child runs `host`, reports the address and token through a pipe and keeps the store until
// this object is destroyed (or this process dies: PR_SET_PDEATHSIG); the destructor reaps it.
// Fork it while this process has no other thread. Threading: one thread uses this object.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::tools {

class StoreInChildProcess final : public HostedStore {
 public:
  // `host` runs in the child; `client_timeout` is what connect()'s handles wait.
  StoreInChildProcess(const std::function<std::unique_ptr<HostedStore>()>& host, Duration client_timeout) {
    client_.timeout = client_timeout;
    int ready[2], stop[2];
    if (::pipe(ready) != 0) throw_errno("pipe", errno);
    if (::pipe(stop) != 0) {
      const int err = errno;
      ::close(ready[0]);
      ::close(ready[1]);
      throw_errno("pipe", err);
    }
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) {
      const int err = errno;
      for (int fd : {ready[0], ready[1], stop[0], stop[1]}) ::close(fd);
      throw_errno("fork", err);
    }
    if (pid_ == 0) serve(host, ready, stop);
    ::close(ready[1]);
    ::close(stop[0]);
    stop_ = stop[1];
    std::string report;
    const bool ended = read_report(ready[0], report);
    ::close(ready[0]);
    const auto nl = report.find('\n');
    if (!ended || nl == std::string::npos || report.front() == '!') {
      stop_child();
      if (!ended)
        throw StoreError(fmt::format("the store's host process did not report its address within {} s", kReportSeconds));
      if (!report.empty() && report.front() == '!') throw StoreError(report.substr(1));  // what hosting threw
      throw StoreError("the store's host process ended without reporting its address");
    }
    address_ = report.substr(0, nl);
    client_.token = report.substr(nl + 1);
  }
  ~StoreInChildProcess() override { stop_child(); }
  StoreInChildProcess(const StoreInChildProcess&) = delete;
  StoreInChildProcess& operator=(const StoreInChildProcess&) = delete;

  std::string address() const override { return address_; }
  std::string token() const override { return client_.token; }
  std::unique_ptr<Store> connect() override { return connect_store(address_, client_); }
  // The hosting process (tests stop it to play a host that no longer answers).
  pid_t pid() const { return pid_; }

 private:
  static constexpr int kReportSeconds = 60;  // hosting binds a port: far less, even under a sanitizer

  // Reads the child's report until it closes its end (true), or gives up after kReportSeconds.
  static bool read_report(int fd, std::string& report) {
    const Deadline deadline{std::chrono::seconds(kReportSeconds)};
    while (!deadline.passed()) {
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(deadline.left().count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
      char buf[512];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n == 0) return true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      report.append(buf, static_cast<std::size_t>(n));
    }
    return false;
  }

  // The child: host, report "address\ntoken" (or "!why"), hold the store until `stop` closes.
  [[noreturn]] static void serve(const std::function<std::unique_ptr<HostedStore>()>& host, int ready[2],
                                 int stop[2]) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(ready[0]);
    ::close(stop[1]);
    std::string report;
    std::unique_ptr<HostedStore> hosted;
    try {
      hosted = host();
      report = hosted->address() + "\n" + hosted->token();
    } catch (const std::exception& e) {
      report = std::string("!") + e.what();
    }
    const bool sent = ::write(ready[1], report.data(), report.size()) == static_cast<ssize_t>(report.size());
    ::close(ready[1]);
    char byte;  // until EOF: the parent closed its end (or exited)
    for (ssize_t n; sent && hosted && (n = ::read(stop[0], &byte, 1)) != 0;)
      if (n < 0 && errno != EINTR) break;
    hosted.reset();  // removes what the store made
    ::_exit(0);
  }

  // Closing the pipe ends the child; one that does not end within 10 s (stopped, wedged) is
  // SIGKILLed, so the destructor never hangs.
  void stop_child() {
    if (stop_ >= 0) ::close(stop_);
    stop_ = -1;
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);  // a test may have stopped it
    bool reaped = false;
    for (int i = 0; i < 1000 && !reaped; ++i) {
      reaped = ::waitpid(pid_, nullptr, WNOHANG) != 0;  // its pid, or -1: nothing left to wait for
      if (!reaped) ::usleep(10'000);
    }
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

  StoreOptions client_;
  std::string address_;
  pid_t pid_ = -1;
  int stop_ = -1;
};

}  // namespace fastrun::tools
