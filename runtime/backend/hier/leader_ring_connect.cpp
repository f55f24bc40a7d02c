#include "fastrun/runtime/backend/hier/leader_ring_connect.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/bound_port.h"
#include "fastrun/runtime/os/fd_control.h"
#include "fastrun/runtime/store/tcp/hosted.h"
#include "fastrun/runtime/store/tcp/socket.h"

namespace fastrun::hier {

std::string RingPeers::name(int leader) const {
  const int global = global_rank.at(static_cast<std::size_t>(leader));
  if (rail == 0) return fmt::format("rank {} (node {}'s leader)", global, leader);
  return fmt::format("rank {} (node {}'s local rank {})", global, leader, rail);
}

namespace {

using Clock = std::chrono::steady_clock;

// What a connecting leader sends first: the token the accepting leader published, and its index.
struct Hello {
  char token[64];
  std::int32_t index;
};

std::string ring_key(int index) { return fmt::format("ring/{}", index); }

// A socket listening on `host`, any free port; returns it and the port.
os::UniqueFd listen_on(const std::string& host, std::uint16_t& port, const std::string& label) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* list = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &list); rc != 0)
    throw ConfigError(fmt::format("{}: the leaders' ring cannot listen on '{}': {}", label, host, ::gai_strerror(rc)));
  os::UniqueFd fd(::socket(list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int error = !fd                                                                         ? errno
                    : ::bind(fd.get(), list->ai_addr, list->ai_addrlen) != 0                    ? errno
                    : ::listen(fd.get(), 8) != 0                                                ? errno
                                                                                                : 0;
  ::freeaddrinfo(list);
  if (error != 0) throw_errno(fmt::format("{}: the leaders' ring cannot listen on {}", label, host), error);
  port = os::bound_port(fd.get(), fmt::format("{}: the leaders' ring listener", label));
  return fd;
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a latency hint: failure is harmless
}

// Connects to the next leader and introduces this one.
os::UniqueFd connect_next(Store& store, const RingPeers& peers, Clock::time_point deadline, Duration timeout) {
  const int next = peers.next();
  std::string value;
  try {
    value = to_string(store.get(ring_key(next), timeout));
  } catch (const TimeoutError& e) {
    throw TimeoutError(
        fmt::format("{}: setting up the leaders' ring: {} did not publish its address within {:.3g} s ({})",
                    peers.label, peers.name(next), std::chrono::duration<double>(timeout).count(), e.what()));
  }
  // host, port and token, one per line
  const auto first = value.find('\n'), second = value.find('\n', first + 1);
  if (first == std::string::npos || second == std::string::npos || value.size() - second - 1 != sizeof(Hello::token))
    throw BackendError(fmt::format("{}: the leaders' ring: {} published a malformed address '{}'", peers.label,
                                   peers.name(next), value));
  const std::string host = value.substr(0, first);
  const auto port = static_cast<std::uint16_t>(std::stoul(value.substr(first + 1, second - first - 1)));
  tcp_store::Socket socket;
  const std::string address = fmt::format("{}'s ring port {}:{}", peers.name(next), host, port);
  try {
    socket = tcp_store::connect_with_retry(host, port, deadline, address);
  } catch (const StoreError& e) {
    throw BackendError(fmt::format("{}: setting up the leaders' ring: {}", peers.label, e.what()));
  }
  Hello hello{};
  std::memcpy(hello.token, value.data() + second + 1, sizeof hello.token);
  hello.index = peers.index;
  std::string error;
  if (socket.send_all(&hello, sizeof hello, deadline, error) != tcp_store::Socket::Io::done)
    throw BackendError(fmt::format("{}: setting up the leaders' ring: introducing this leader to {} failed: {}",
                                   peers.label, peers.name(next), error.empty() ? "timed out" : error));
  return os::UniqueFd(socket.release());
}

// Accepts connections until the previous leader's (its hello names this leader's token and the
// previous index); anything else is closed.
os::UniqueFd accept_prev(int listener, const std::string& token, const RingPeers& peers, Clock::time_point deadline,
                         Duration timeout) {
  const int prev = peers.prev();
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      throw TimeoutError(fmt::format("{}: setting up the leaders' ring: {} did not connect within {:.3g} s",
                                     peers.label, peers.name(prev), std::chrono::duration<double>(timeout).count()));
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;  // EINTR: go round
    tcp_store::Socket socket(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!socket.valid()) continue;
    // A stray or slow connection must not hold the ring's set-up for long.
    const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    Hello hello{};
    std::string error;
    if (socket.recv_exact(&hello, sizeof hello, hello_deadline, error) != tcp_store::Socket::Io::done) continue;
    if (std::string(hello.token, sizeof hello.token) != token || hello.index != prev) continue;
    return os::UniqueFd(socket.release());
  }
}

}  // namespace

RingSockets connect_ring(Store& store, const std::string& host, const RingPeers& peers, Duration timeout) {
  RingSockets ring;
  if (peers.count() < 2) return ring;
  const auto deadline = tcp_store::deadline_after(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  std::uint16_t port = 0;
  const os::UniqueFd listener = listen_on(host, port, peers.label);
  const std::string token = tcp_store::random_token();
  store.set(ring_key(peers.index), to_bytes(fmt::format("{}\n{}\n{}", host, port, token)));
  ring.to_next = connect_next(store, peers, deadline, timeout);
  ring.from_prev = accept_prev(listener.get(), token, peers, deadline, timeout);
  for (const os::UniqueFd* fd : {&ring.to_next, &ring.from_prev}) {
    set_nodelay(fd->get());
    os::set_nonblocking(fd->get(), "a leaders' ring connection");
  }
  return ring;
}

}  // namespace fastrun::hier
