#pragma once
// A client of PyTorch's c10d TCPStore (torch 1.x and torch 2.x protocols, c10d_protocol.h):
// lets a fastrun rank use the store torchrun's agent serves on MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True), or any torch.distributed.TCPStore, of torch 1.13 or 2.x
// (libuv or legacy server). Plain POSIX sockets, no LibTorch. Address: c10d://HOST:PORT.
//
// Like fastrun's tcp:// client: one connection, one request in flight, not thread-safe (clone()
// opens another connection for another thread). The connection is opened with retry + backoff
// within the store timeout. The first one finds the server's dialect with torch 2.x's VALIDATE +
// PING (c10d_protocol.h): a 2.x server echoes the nonce (one round trip); a 1.x server closes
// the connection, and the client reconnects and checks 1.x with a CHECK of no keys. Each
// answer is awaited within the store timeout (the hello stalls no server, and a 2.x server that
// has just accepted hundreds of clients takes seconds to answer them all): a server that answers
// neither fails with a message that says so. Later connections (reconnects, clone(), the side
// connection) reuse the dialect.
//
// Every reply is awaited within the store timeout; get/wait within their own timeout, enforced
// here. The servers wake a WAIT on set and add but not on compare_set, so a wait longer than
// kRecheck also checks the keys every kRecheck on a second connection (opened then, kept for
// later waits). When the keys are found that way, or on expiry, the pending WAIT is abandoned:
// torch 2.x cancels it with CANCEL_WAIT; 1.x cannot, so the client drops the connection (the
// server forgets a closed socket's waits) and the next call reconnects. A timeout raises
// TimeoutError naming the missing keys. A broken connection raises StoreError and the next call
// reconnects. Against torch 2.x's libuv server a key over 8 KiB or a value over 8 MiB fails
// with StoreError (that server closes the connection; set() of such a value waits for one
// round trip to find out, since SET has no reply).
//
// Keys are sent with c10d's "/" prefix, so Python's TCPStore sees the same keys. The server
// holds every user of the store (torch's own keys too): callers put their keys under a prefix
// of their own (join does: PrefixStore).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/store/c10d/c10d_protocol.h"
#include "fastrun/runtime/store/store.h"
#include "fastrun/runtime/store/tcp/socket.h"

namespace fastrun::c10d_store {

struct ClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  Duration timeout = Store::kDefaultTimeout;  // connecting + every reply + default for blocking calls
};

class Client final : public Store {
 public:
  // Connects (retrying until options.timeout). StoreError when no c10d server answered in time.
  explicit Client(ClientOptions options);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override { return address_; }

  // Batched forms, not (yet) in the Store interface: with torch 2.x, multi_get is a WAIT and one
  // MULTI_GET (two round trips for any number of keys, where get() per key takes two each) and
  // multi_set one MULTI_SET; with 1.x they are a WAIT then a GET per key, and a SET per key.
  // multi_get returns the values in the order of `keys`; TimeoutError names the missing ones.
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys, Duration timeout);
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values);

  // The protocol the server speaks, found when the first connection was opened.
  c10d_wire::Dialect dialect() const { return dialect_; }

  using Store::get;
  using Store::wait;

 private:
  using Clock = tcp_store::Clock;
  // For clone() and the side connection: the dialect is known, no probe.
  Client(ClientOptions options, c10d_wire::Dialect dialect);
  // Opens the connection and sends the dialect's opening (torch2: VALIDATE).
  void connect();
  // Opens the first connection and finds the dialect (see above).
  c10d_wire::Dialect probe();
  c10d_wire::Request request(c10d_wire::Command c) const { return c10d_wire::Request(dialect_, c); }
  c10d_wire::Request keys_request(c10d_wire::Command c, const std::vector<std::string>& keys) const;
  // Gives up a WAIT still pending on the connection (see above). Never throws: on any trouble
  // it drops the connection.
  void abandon_wait();
  // What to suspect when the server hangs up on a request, for messages.
  const char* hang_up_hint() const;
  void send(const c10d_wire::Request& request);
  // Reads exactly `size` reply bytes within the store timeout.
  void receive(void* data, std::size_t size, c10d_wire::Command command);
  std::int64_t receive_i64(c10d_wire::Command command);
  std::uint8_t receive_byte(c10d_wire::Command command);
  Bytes receive_blob(c10d_wire::Command command);
  // Sends `request` on a live connection (reconnecting first when the last call broke it).
  void call(const c10d_wire::Request& request);
  [[noreturn]] void fail(c10d_wire::Command command, const std::string& why);

  static constexpr std::chrono::milliseconds kRecheck{100};

  ClientOptions options_;
  std::string address_;
  c10d_wire::Dialect dialect_ = c10d_wire::Dialect::torch2;
  tcp_store::Socket socket_;
  std::unique_ptr<Client> side_;  // the waits' second connection (compare_set wakes no WAIT)
};

}  // namespace fastrun::c10d_store
