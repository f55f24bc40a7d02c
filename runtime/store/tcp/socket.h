#pragma once
// The client side's socket: a move-only owner of one connected, non-blocking TCP descriptor
// with deadline-bounded I/O (poll), and the connect-with-retry every rank uses to reach the
// store host (ranks may start before the host listens). POSIX only, no Asio: the client is a
// plain blocking call sequence and poll() gives it exact timeouts.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::tcp_store {

using Clock = std::chrono::steady_clock;

// now + timeout, saturating (Duration::max() and other huge timeouts mean "no deadline").
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}

  bool valid() const { return bool(fd_); }
  int fd() const { return fd_.get(); }
  void reset() { fd_.reset(); }
  // Gives up ownership: returns the descriptor and leaves this empty.
  int release() { return fd_.release(); }

  // Waits until bytes (or EOF) can be read; false when `deadline` passed first.
  bool wait_readable(Clock::time_point deadline) const;

  // Outcome of a deadline-bounded transfer.
  enum class Io { done, timeout, closed };
  // Writes all `size` bytes. `error` gets the errno text when the peer is gone (Io::closed).
  Io send_all(const void* data, std::size_t size, Clock::time_point deadline, std::string& error);
  // Reads exactly `size` bytes. Io::closed on EOF or error (errno text in `error`, "end of
  // stream" on EOF).
  Io recv_exact(void* data, std::size_t size, Clock::time_point deadline, std::string& error);

 private:
  os::UniqueFd fd_;
};

// Connects to host:port, retrying refused/unreachable attempts with exponential backoff
// (10 ms doubling to 1 s, +-50 % jitter) until `deadline`. Throws StoreError naming
// `address`, the last errno text and the time spent when the deadline passes, and ConfigError
// when the host does not resolve. The socket has TCP_NODELAY set.
Socket connect_with_retry(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                          const std::string& address);

}  // namespace fastrun::tcp_store
