#pragma once
// Helpers for the tcp:// store tests: forked children that are always reaped (with a deadline,
// SIGKILL after it), and a raw socket for sending garbage / half frames to the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace fastrun::test {

// Children run `body` and _exit with its result (2 when it threw, message on stderr). The
// destructor SIGKILLs and reaps whatever is left, so no test leaves a process behind.
class TcpChildren {
 public:
  TcpChildren() = default;
  TcpChildren(const TcpChildren&) = delete;
  TcpChildren& operator=(const TcpChildren&) = delete;
  ~TcpChildren() {
    for (pid_t p : live_) ::kill(p, SIGKILL);
    for (pid_t p : live_) ::waitpid(p, nullptr, 0);
  }

  template <typename Body>
  pid_t spawn(Body body) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = body();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
        rc = 2;
      } catch (...) {
        rc = 3;
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    if (pid > 0) live_.push_back(pid);
    return pid;
  }

  // Reaps every child within `timeout`; kills the rest. Returns how many did not exit 0
  // (killed stragglers included).
  int reap(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int failed = 0;
    while (!live_.empty() && std::chrono::steady_clock::now() < deadline) {
      bool any = false;
      for (std::size_t i = 0; i < live_.size();) {
        int status = 0;
        if (::waitpid(live_[i], &status, WNOHANG) == live_[i]) {
          any = true;
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
          live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    failed += static_cast<int>(live_.size());
    for (pid_t p : live_) ::kill(p, SIGKILL);
    for (pid_t p : live_) ::waitpid(p, nullptr, 0);
    live_.clear();
    return failed;
  }

  void kill_and_reap(pid_t pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    forget(pid);
  }

 private:
  void forget(pid_t p) {
    for (auto it = live_.begin(); it != live_.end(); ++it)
      if (*it == p) {
        live_.erase(it);
        return;
      }
  }
  std::vector<pid_t> live_;
};

// A plain blocking TCP connection to 127.0.0.1:port for sending hand-made bytes.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool ok() const { return ok_; }
  bool send(const void* data, std::size_t n) { return ::send(fd_, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n); }
  // Reads until EOF or error or `timeout`; true when the server closed the connection.
  bool wait_closed(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  // Closes with a RST (SO_LINGER 0): the most abrupt disconnect a peer can make.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace fastrun::test
