#include "fastrun/runtime/store/c10d/c10d_client.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::c10d_store {

using c10d_wire::Command;
using c10d_wire::Dialect;
using c10d_wire::Request;
using tcp_store::deadline_after;
using tcp_store::Socket;

namespace {

std::string prefixed(const std::string& key) { return c10d_wire::kKeyPrefix + key; }

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

constexpr const char* kDialects = "fastrun's c10d client speaks torch 1.x's protocol and torch 2.x's (VALIDATE + PING); "
                                  "see docs/torchrun.md";

}  // namespace

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      address_(StoreAddress{StoreAddress::Kind::c10d, options_.host, options_.port}.to_string()) {
  set_timeout(options_.timeout);
  dialect_ = probe();
}

Client::Client(ClientOptions options, Dialect dialect)
    : options_(std::move(options)),
      address_(StoreAddress{StoreAddress::Kind::c10d, options_.host, options_.port}.to_string()),
      dialect_(dialect) {
  set_timeout(options_.timeout);
  connect();
}

Request Client::keys_request(Command c, const std::vector<std::string>& keys) const {
  Request r = request(c);
  r.u64(keys.size());
  for (const auto& k : keys) r.string(prefixed(k));
  return r;
}

void Client::connect() {
  socket_ = tcp_store::connect_with_retry(options_.host, options_.port, deadline_after(timeout()), address_);
  if (dialect_ == Dialect::torch1) return;  // 1.x has no opening
  // A 2.x server takes nothing else first (the legacy one hangs up, the libuv one ignores it).
  const auto validate = c10d_wire::torch2_validate();
  std::string error;
  if (socket_.send_all(validate.data(), validate.size(), deadline_after(timeout()), error) != Socket::Io::done) {
    socket_.reset();
    throw StoreError(fmt::format("{}: could not send VALIDATE within {:.3g} s: {}", address_, seconds(timeout()),
                                 error.empty() ? "timed out" : error));
  }
}

Dialect Client::probe() {
  // Each answer is awaited within the store timeout, like every reply: the hello stalls no
  // server (c10d_protocol.h), and a busy 2.x server may take seconds to answer.
  const Duration probe = timeout();
  std::string error;

  // 1. The hello, VALIDATE + PING + 2 GETNUMKEYS: a 2.x server echoes the nonce. A 1.x server
  //    reads an impossible SET and closes the connection at once (c10d_protocol.h says why).
  socket_ = tcp_store::connect_with_retry(options_.host, options_.port, deadline_after(timeout()), address_);
  const auto hello = c10d_wire::torch2_hello();
  struct {
    std::uint32_t echo = 0;
    std::int64_t num_keys[2] = {-1, -1};
  } answer2;
  Socket::Io io = socket_.send_all(hello.data(), hello.size(), deadline_after(probe), error);
  if (io == Socket::Io::done) io = socket_.recv_exact(&answer2.echo, sizeof answer2.echo, deadline_after(probe), error);
  if (io == Socket::Io::done && answer2.echo == c10d_wire::kHelloNonce) {
    if (socket_.recv_exact(answer2.num_keys, sizeof answer2.num_keys, deadline_after(probe), error) ==
            Socket::Io::done &&
        answer2.num_keys[0] >= 0 && answer2.num_keys[1] >= 0)
      return Dialect::torch2;
    socket_.reset();
    throw StoreError(fmt::format("{}: the server echoed torch 2.x's PING but did not answer GETNUMKEYS ({}) ({})",
                                 address_, error.empty() ? "wrong answer or timeout" : error, kDialects));
  }
  const std::uint32_t echo = answer2.echo;
  socket_.reset();
  if (io == Socket::Io::done)
    throw StoreError(fmt::format("{}: the server answered torch 2.x's PING with {:#010x}, not its nonce {:#010x}: not "
                                 "a c10d TCPStore ({})",
                                 address_, echo, c10d_wire::kHelloNonce, kDialects));
  if (io == Socket::Io::timeout)
    throw StoreError(fmt::format("{}: the server does not answer as a c10d TCPStore (no reply to torch 2.x's "
                                 "VALIDATE + PING within {:.3g} s, the store timeout; {})",
                                 address_, seconds(probe), kDialects));

  // 2. It hung up: a torch 1.x server, which must answer a CHECK of no keys with READY.
  socket_ = tcp_store::connect_with_retry(options_.host, options_.port, deadline_after(timeout()), address_);
  const Request check = Request(Dialect::torch1, Command::check).u64(0);
  std::uint8_t answer = 0xff;
  io = socket_.send_all(check.data().data(), check.data().size(), deadline_after(probe), error);
  if (io == Socket::Io::done) io = socket_.recv_exact(&answer, 1, deadline_after(probe), error);
  if (io == Socket::Io::done && answer == c10d_wire::kReady) return Dialect::torch1;
  socket_.reset();
  throw StoreError(fmt::format("{}: the server does not answer as a c10d TCPStore: it closed the connection on torch "
                               "2.x's VALIDATE + PING, then {} torch 1.x's CHECK of no keys within {:.3g} s ({})",
                               address_,
                               io == Socket::Io::done     ? fmt::format("answered {} to", answer)
                               : io == Socket::Io::closed ? std::string("closed it on")
                                                          : std::string("did not answer"),
                               seconds(probe), kDialects));
}

const char* Client::hang_up_hint() const {
  return dialect_ == Dialect::torch1
             ? "(a torch 1.x server closes the connection on a request it cannot parse)"
             : "(a torch 2.x server closes the connection on a request it cannot parse; its libuv server also on a "
               "key over 8 KiB or a value over 8 MiB, which TCPStore(..., use_libuv=False) takes)";
}

void Client::fail(Command command, const std::string& why) {
  socket_.reset();  // the stream may be out of step: the next call reconnects
  throw StoreError(fmt::format("{}: {} failed: {}", address_, c10d_wire::command_name(command), why));
}

void Client::send(const Request& request) {
  std::string error;
  const auto& bytes = request.data();
  switch (socket_.send_all(bytes.data(), bytes.size(), deadline_after(timeout()), error)) {
    case Socket::Io::done: return;
    case Socket::Io::timeout:
      fail(request.command(), fmt::format("could not send {} bytes within {:.3g} s", bytes.size(), seconds(timeout())));
    case Socket::Io::closed:
      fail(request.command(), fmt::format("connection lost while sending: {} {}", error, hang_up_hint()));
  }
}

void Client::call(const Request& request) {
  if (!socket_.valid()) connect();
  send(request);
}

void Client::receive(void* data, std::size_t size, Command command) {
  std::string error;
  switch (socket_.recv_exact(data, size, deadline_after(timeout()), error)) {
    case Socket::Io::done: return;
    case Socket::Io::timeout: fail(command, fmt::format("no reply within {:.3g} s (store timeout)", seconds(timeout())));
    case Socket::Io::closed: fail(command, fmt::format("the server closed the connection ({}) {}", error, hang_up_hint()));
  }
}

std::int64_t Client::receive_i64(Command command) {
  std::int64_t v = 0;
  receive(&v, sizeof v, command);
  return v;
}

std::uint8_t Client::receive_byte(Command command) {
  std::uint8_t b = 0;
  receive(&b, 1, command);
  return b;
}

Bytes Client::receive_blob(Command command) {
  std::uint64_t size = 0;
  receive(&size, sizeof size, command);
  // A length beyond any sane value means the stream is out of step.
  if (size > (std::uint64_t{1} << 40))
    fail(command, fmt::format("reply announces {} bytes (the stream is out of step with the server)", size));
  Bytes value(static_cast<std::size_t>(size));
  if (size > 0) receive(value.data(), value.size(), command);
  return value;
}

void Client::set(const std::string& key, const Bytes& value) {
  call(request(Command::set).string(prefixed(key)).bytes(value));  // no reply
  // SET has no reply, so a libuv server's refusal of a big key or value (it hangs up) would
  // only show at the next call: ask for one round trip now, so the error is this set's.
  if (dialect_ == Dialect::torch2 &&
      (value.size() > c10d_wire::kLibuvMaxValue || prefixed(key).size() > c10d_wire::kLibuvMaxKey)) {
    send(request(Command::num_keys));
    receive_i64(Command::set);
  }
}

Bytes Client::get(const std::string& key, Duration timeout) {
  // The server drops the connection on a GET of a missing key: wait first, as c10d does.
  wait({key}, timeout);
  call(request(Command::get).string(prefixed(key)));
  return receive_blob(Command::get);
}

std::int64_t Client::add(const std::string& key, std::int64_t delta) {
  call(request(Command::add).string(prefixed(key)).i64(delta));
  return receive_i64(Command::add);
}

Bytes Client::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  call(request(Command::compare_set).string(prefixed(key)).bytes(expected).bytes(desired));
  return receive_blob(Command::compare_set);
}

bool Client::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  call(keys_request(Command::check, keys));
  const std::uint8_t answer = receive_byte(Command::check);
  if (answer != c10d_wire::kReady && answer != c10d_wire::kNotReady)
    fail(Command::check, fmt::format("unexpected answer {} (the stream is out of step with the server)", answer));
  return answer == c10d_wire::kReady;
}

void Client::abandon_wait() {
  if (dialect_ == Dialect::torch1) {
    socket_.reset();  // 1.x cannot cancel a WAIT; the server forgets a closed socket's waits
    return;
  }
  // CANCEL_WAIT is answered by WAIT_CANCELED; a STOP_WAITING sent before the server saw it may
  // come first. Anything else, or no answer within the store timeout: drop the connection.
  const Request cancel = request(Command::cancel_wait);
  std::string error;
  const auto deadline = deadline_after(timeout());
  if (socket_.send_all(cancel.data().data(), cancel.data().size(), deadline, error) == Socket::Io::done) {
    for (int replies = 0; replies < 2; ++replies) {
      std::uint8_t b = 0xff;
      if (socket_.recv_exact(&b, 1, deadline, error) != Socket::Io::done) break;
      if (b == c10d_wire::kWaitCanceled) return;
      if (b != c10d_wire::kStopWaiting) break;
    }
  }
  socket_.reset();
}

void Client::wait(const std::vector<std::string>& keys, Duration timeout) {
  if (keys.empty()) return;
  const auto deadline = deadline_after(timeout);
  call(keys_request(Command::wait, keys));
  for (;;) {
    // set and add wake a WAIT; compare_set does not: look every kRecheck on a side connection
    // whether the keys are there after all.
    const auto slice_end = std::min(deadline, Clock::now() + kRecheck);
    if (socket_.wait_readable(slice_end)) {
      if (receive_byte(Command::wait) != c10d_wire::kStopWaiting)
        fail(Command::wait, "unexpected answer (the stream is out of step with the server)");
      return;
    }
    const bool expired = Clock::now() >= deadline;
    if (!side_) {
      ClientOptions o = options_;
      o.timeout = this->timeout();
      side_.reset(new Client(std::move(o), dialect_));
    }
    const bool found = side_->check(keys);
    if (!found && !expired) continue;
    abandon_wait();
    if (found) return;
    std::vector<std::string> missing;  // asked per key only now, to name them
    for (const auto& k : keys)
      if (!side_->check({k})) missing.push_back(k);
    if (missing.empty()) return;  // they came meanwhile
    throw_wait_timeout(*this, missing, keys.size(), timeout);
  }
}

std::vector<Bytes> Client::multi_get(const std::vector<std::string>& keys, Duration timeout) {
  // A missing key makes the server hang up on GET and MULTI_GET alike: wait for all first.
  wait(keys, timeout);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  if (keys.empty()) return values;
  if (dialect_ == Dialect::torch1) {
    for (const auto& k : keys) {
      call(request(Command::get).string(prefixed(k)));
      values.push_back(receive_blob(Command::get));
    }
    return values;
  }
  call(keys_request(Command::multi_get, keys));
  for (std::size_t i = 0; i < keys.size(); ++i) values.push_back(receive_blob(Command::multi_get));
  return values;
}

void Client::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    throw std::invalid_argument(fmt::format("{}: multi_set of {} keys with {} values", address_, keys.size(),
                                            values.size()));
  if (dialect_ == Dialect::torch1) {
    for (std::size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);  // no replies: no round trips
    return;
  }
  if (keys.empty()) return;
  Request r = request(Command::multi_set);
  r.u64(keys.size());
  bool big = false;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    r.string(prefixed(keys[i])).bytes(values[i]);
    big = big || values[i].size() > c10d_wire::kLibuvMaxValue || prefixed(keys[i]).size() > c10d_wire::kLibuvMaxKey;
  }
  call(r);
  if (big) {  // as in set(): a refusal shows as a hang-up, so find out now
    send(request(Command::num_keys));
    receive_i64(Command::multi_set);
  }
}

bool Client::delete_key(const std::string& key) {
  call(request(Command::delete_key).string(prefixed(key)));
  return receive_i64(Command::delete_key) == 1;
}

std::int64_t Client::num_keys() {
  call(request(Command::num_keys));
  return receive_i64(Command::num_keys);
}

std::unique_ptr<Store> Client::clone() {
  ClientOptions o = options_;
  o.timeout = timeout();
  return std::unique_ptr<Store>(new Client(std::move(o), dialect_));
}

}  // namespace fastrun::c10d_store
