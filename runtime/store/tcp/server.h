#pragma once
// The tcp:// store server (docs/stores-tcp.md): a Boost.Asio acceptor and one connection object
// per client, all driven by ONE internal thread. Every piece of server state (the key table, the
// waiter lists, the connections) is touched only by that thread, so there are no locks; the
// owner thread only constructs, reads the atomic counters and destroys.
//
// Lifetime: the constructor binds and listens before it returns (so port() is already
// reachable when it is published) and starts the thread; the destructor stops the thread,
// joins it and closes every socket. It never throws.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fastrun/runtime/store/tcp/wire.h"

namespace fastrun::tcp_store {

struct ServerOptions {
  std::string host = "127.0.0.1";  // address to listen on ("0.0.0.0" for every interface)
  std::uint16_t port = 0;          // 0 = pick a free port (read it back with port())
  std::string token;               // secret every client presents in its HELLO; must not be empty
  tcp_wire::Limits limits;
  // A client that connects but does not authenticate within this time is dropped.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(30);
};

struct ServerStats {
  std::uint64_t connections = 0;        // open now
  std::uint64_t peak_connections = 0;   // most open at once
  std::uint64_t accepted = 0;           // ever accepted
  std::uint64_t dropped = 0;            // dropped for garbage, truncation, resets, bad tokens
  std::uint64_t auth_failures = 0;      // of which: wrong or missing token
};

class Server {
 public:
  // Throws StoreError when it cannot listen (address in use, unknown host, ...).
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  const std::string& host() const;
  // Safe from any thread (atomics).
  ServerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (a server with 1,024 clients needs more than
// the usual soft 1,024 descriptors). Returns the soft limit now in force.
std::uint64_t raise_fd_limit();

}  // namespace fastrun::tcp_store
