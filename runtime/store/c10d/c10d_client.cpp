#include "fastrun/runtime/store/c10d/c10d_client.h"

#include <algorithm>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::c10d_store {

using c10d_wire::Command;
using c10d_wire::Request;
using tcp_store::deadline_after;
using tcp_store::Socket;

namespace {

std::string prefixed(const std::string& key) { return c10d_wire::kKeyPrefix + key; }

Request keys_request(Command c, const std::vector<std::string>& keys) {
  Request r(c);
  r.u64(keys.size());
  for (const auto& k : keys) r.string(prefixed(k));
  return r;
}

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

// What to suspect when the server hangs up on a well-formed request.
constexpr const char* kVersionHint =
    "(a torch 2.x store speaks a newer protocol than the torch 1.x one fastrun's c10d client speaks; "
    "see docs/torchrun.md)";

}  // namespace

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      address_(StoreAddress{StoreAddress::Kind::c10d, options_.host, options_.port}.to_string()) {
  set_timeout(options_.timeout);
  connect();
}

void Client::connect() {
  socket_ = tcp_store::connect_with_retry(options_.host, options_.port, deadline_after(timeout()), address_);
  // There is no handshake in the 1.x protocol: a CHECK of no keys must answer READY at once. A
  // server of another version may instead wait for bytes that never come (its one thread stuck
  // on us, for torch's own users too): give up after kProbeTimeout at most and hang up.
  send(Request(Command::check).u64(0));
  std::string error;
  std::uint8_t answer = 0xff;
  const Duration probe = std::min<Duration>(timeout(), kProbeTimeout);
  if (socket_.recv_exact(&answer, 1, deadline_after(probe), error) != Socket::Io::done ||
      answer != c10d_wire::kReady) {
    socket_.reset();
    throw StoreError(fmt::format("{}: the server does not answer as a c10d TCPStore of torch 1.x (no READY to a "
                                 "CHECK of no keys within {:.3g} s) {}",
                                 address_, seconds(probe), kVersionHint));
  }
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
    case Socket::Io::closed: fail(request.command(), fmt::format("connection lost while sending: {}", error));
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
    case Socket::Io::closed:
      fail(command, fmt::format("the server closed the connection ({}) {}", error, kVersionHint));
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
  // A length beyond any sane value means the stream is out of step (another protocol).
  if (size > (std::uint64_t{1} << 40)) fail(command, fmt::format("reply announces {} bytes {}", size, kVersionHint));
  Bytes value(static_cast<std::size_t>(size));
  if (size > 0) receive(value.data(), value.size(), command);
  return value;
}

void Client::set(const std::string& key, const Bytes& value) {
  call(Request(Command::set).string(prefixed(key)).bytes(value));  // no reply
}

Bytes Client::get(const std::string& key, Duration timeout) {
  // The server drops the connection on a GET of a missing key: wait first, as c10d does.
  wait({key}, timeout);
  call(Request(Command::get).string(prefixed(key)));
  return receive_blob(Command::get);
}

std::int64_t Client::add(const std::string& key, std::int64_t delta) {
  call(Request(Command::add).string(prefixed(key)).i64(delta));
  return receive_i64(Command::add);
}

Bytes Client::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  call(Request(Command::compare_set).string(prefixed(key)).bytes(expected).bytes(desired));
  return receive_blob(Command::compare_set);
}

bool Client::check(const std::vector<std::string>& keys) {
  call(keys_request(Command::check, keys));
  const std::uint8_t answer = receive_byte(Command::check);
  if (answer != c10d_wire::kReady && answer != c10d_wire::kNotReady)
    fail(Command::check, fmt::format("unexpected answer {} {}", answer, kVersionHint));
  return answer == c10d_wire::kReady;
}

void Client::wait(const std::vector<std::string>& keys, Duration timeout) {
  if (keys.empty()) return;
  const auto deadline = deadline_after(timeout);
  call(keys_request(Command::wait, keys));
  for (;;) {
    // set and add wake a WAIT; compare_set does not (1.x server): look every kRecheck on a side
    // connection whether the keys are there after all.
    const auto slice_end = std::min(deadline, Clock::now() + kRecheck);
    if (socket_.wait_readable(slice_end)) {
      if (receive_byte(Command::wait) != c10d_wire::kStopWaiting)
        fail(Command::wait, fmt::format("unexpected answer {}", kVersionHint));
      return;
    }
    const bool expired = Clock::now() >= deadline;
    if (!side_) {
      ClientOptions o = options_;
      o.timeout = this->timeout();
      side_ = std::make_unique<Client>(std::move(o));
    }
    std::vector<std::string> missing;
    for (const auto& k : keys)
      if (!side_->check({k})) missing.push_back(k);
    if (!missing.empty() && !expired) continue;
    // Done waiting with the WAIT still pending: 1.x cannot cancel it, so hang up (the server
    // forgets a closed socket's waits); the next call reconnects.
    socket_.reset();
    if (missing.empty()) return;
    throw_wait_timeout(*this, missing, keys.size(), timeout);
  }
}

bool Client::delete_key(const std::string& key) {
  call(Request(Command::delete_key).string(prefixed(key)));
  return receive_i64(Command::delete_key) == 1;
}

std::int64_t Client::num_keys() {
  call(Request(Command::num_keys));
  return receive_i64(Command::num_keys);
}

std::unique_ptr<Store> Client::clone() {
  ClientOptions o = options_;
  o.timeout = timeout();
  return std::make_unique<Client>(std::move(o));
}

}  // namespace fastrun::c10d_store
