#include "fastrun/runtime/store/tcp/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/poll_until.h"

namespace fastrun::tcp_store {
namespace {

// Milliseconds poll() may wait before `deadline` (-1: no deadline, capped per call so a
// saturated deadline never overflows an int).
int poll_ms(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>(left + 1, 60'000));
}

// Waits until fd is ready for `events`; false when the deadline passed first.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = poll_ms(deadline);
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the following syscall report the error
    if (r == 0 && Clock::now() >= deadline) return false;
  }
}

// One non-blocking connect attempt bounded by `deadline`; returns the fd or -1 with errno set.
int try_connect(const addrinfo* ai, Clock::time_point deadline) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return -1;
  Socket owner(fd);
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return -1;
    if (!wait_ready(fd, POLLOUT, deadline)) {
      errno = ETIMEDOUT;
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    if (err != 0) {
      errno = err;
      return -1;
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return owner.release();
}

}  // namespace

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const auto now = Clock::now();
  if (timeout.count() < 0) return now;
  if (timeout >= std::chrono::hours(24 * 365 * 100)) return Clock::time_point::max();
  return now + timeout;
}

bool Socket::wait_readable(Clock::time_point deadline) const { return wait_ready(fd(), POLLIN, deadline); }

Socket::Io Socket::send_all(const void* data, std::size_t size, Clock::time_point deadline, std::string& error) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd(), p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd(), POLLOUT, deadline)) return Io::timeout;
      continue;
    }
    error = std::strerror(errno);
    return Io::closed;
  }
  return Io::done;
}

Socket::Io Socket::recv_exact(void* data, std::size_t size, Clock::time_point deadline, std::string& error) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd(), p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      error = "the server closed the connection";
      return Io::closed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd(), POLLIN, deadline)) return Io::timeout;
      continue;
    }
    error = std::strerror(errno);
    return Io::closed;
  }
  return Io::done;
}

Socket connect_with_retry(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                          const std::string& address) {
  const auto start = Clock::now();
  // 10 ms doubling to 1 s, jittered so that hundreds of ranks started together do not retry in
  // lock-step (pytorch#129261).
  constexpr os::Backoff kBackoff{std::chrono::milliseconds(10), std::chrono::milliseconds(1000), true};
  std::string last_error = "no attempt made";
  int attempts = 0;
  Socket connected;
  const bool ok = os::poll_until(deadline, kBackoff, [&] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    ++attempts;
    if (rc == 0) {
      for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        const int fd = try_connect(ai, deadline);
        if (fd >= 0) {
          ::freeaddrinfo(list);
          connected = Socket(fd);
          return true;
        }
        last_error = fmt::format("{} (errno {})", std::strerror(errno), errno);
      }
      ::freeaddrinfo(list);
    } else if (rc == EAI_AGAIN) {
      last_error = ::gai_strerror(rc);  // the resolver may come up later: keep trying
    } else {
      throw ConfigError(fmt::format("{}: host '{}' does not resolve ({}); the accepted form is tcp://HOST:PORT "
                                    "with an IP address or a resolvable host name",
                                    address, host, ::gai_strerror(rc)));
    }
    return false;
  });
  if (ok) return connected;
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  throw StoreError(fmt::format("{}: could not connect within {:.3g} s ({} attempts): {}; is the store host "
                               "running and is the port right? (connect timeout: FASTRUN_TIMEOUT)",
                               address, waited, attempts, last_error));
}

}  // namespace fastrun::tcp_store
