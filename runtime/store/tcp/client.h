#pragma once
// The tcp:// store client: one connection, at most one request in flight (like c10d). Not
// thread-safe: one object per thread, clone() opens a new connection for another thread.
//
// Timeouts: the connection is opened (with retry + backoff) when the object is built, within
// the store timeout. Every request/reply exchange is bounded by the store timeout; blocking
// get/wait by their own timeout, enforced here: on expiry the client sends cancel_wait, reads
// up to the server's `canceled`, asks which keys are still missing and raises TimeoutError
// listing them. If the connection breaks, the call raises StoreError and the next call
// reconnects.
#include <cstdint>
#include <memory>
#include <string>

#include "fastrun/runtime/store/store.h"
#include "fastrun/runtime/store/tcp/socket.h"
#include "fastrun/runtime/store/tcp/wire.h"

namespace fastrun::tcp_store {

struct ClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;
  Duration timeout = Store::kDefaultTimeout;  // connecting + default for blocking calls
  tcp_wire::Limits limits;
};

class Client final : public Store {
 public:
  // Connects (retrying until options.timeout) and authenticates. Throws StoreError on a
  // refused token or when no connection could be made in time.
  explicit Client(ClientOptions options);
  ~Client() override = default;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  // One request, answered when the last participant arrives (wire.h, Op::arrive); at the
  // timeout the arrive is withdrawn and the arrival record read once to name the missing.
  [[nodiscard]] std::vector<int> arrive(const std::string& key, int rank, int participants,
                                        Duration timeout) override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override { return address_; }

  using Store::get;
  using Store::wait;

 private:
  void connect();
  void ensure_connected();
  // Sends one request frame and reads its reply within the store timeout.
  tcp_wire::Reply call(const tcp_wire::Request& request);
  void send_frame(const tcp_wire::Bytes& frame, tcp_wire::Op op);
  // Reads one reply; false when `deadline` passed first (the connection stays usable).
  bool read_reply(tcp_wire::Reply& reply, Clock::time_point deadline, tcp_wire::Op op);
  [[noreturn]] void fail(tcp_wire::Op op, const std::string& why);
  [[noreturn]] void unexpected(tcp_wire::Op op, const tcp_wire::Reply& reply);
  // Withdraws a parked wait or arrive after its deadline; true when `ready` crossed the cancel.
  bool withdraw();
  std::vector<bool> present(const std::vector<std::string>& keys);
  void check_key(const std::string& key, tcp_wire::Op op) const;
  void check_keys(const std::vector<std::string>& keys, tcp_wire::Op op) const;
  void check_value(const Bytes& value, tcp_wire::Op op) const;

  ClientOptions options_;
  std::string address_;
  Socket socket_;
};

}  // namespace fastrun::tcp_store
