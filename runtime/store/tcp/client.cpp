#include "fastrun/runtime/store/tcp/client.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::tcp_store {

using tcp_wire::Op;
using tcp_wire::Reply;
using tcp_wire::Request;
using tcp_wire::Status;

namespace {

std::string format_address(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("tcp://[{}]:{}", host, port);
  return fmt::format("tcp://{}:{}", host, port);
}

Request key_request(Op op, const std::string& key) {
  Request r;
  r.op = op;
  r.key = key;
  return r;
}

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

Client::Client(ClientOptions options)
    : options_(std::move(options)), address_(format_address(options_.host, options_.port)) {
  set_timeout(options_.timeout);
  connect();
}

void Client::connect() {
  // The store's current timeout bounds (re)connecting: set_timeout() applies to reconnects too.
  socket_ = connect_with_retry(options_.host, options_.port, deadline_after(timeout()), address_);
  Request hello;
  hello.op = Op::hello;
  hello.magic = tcp_wire::kMagic;
  hello.version = tcp_wire::kVersion;
  hello.token = options_.token;
  send_frame(tcp_wire::encode_request(hello), Op::hello);
  Reply reply;
  if (!read_reply(reply, deadline_after(timeout()), Op::hello))
    fail(Op::hello, fmt::format("no answer to the handshake within {:.3g} s", seconds(timeout())));
  if (reply.status == Status::auth_failed) {
    socket_.reset();
    throw StoreError(fmt::format("{}: authentication failed: the server rejected this client's token{}; every "
                                 "rank must present the job's secret (FASTRUN_STORE_TOKEN, set by the launcher)",
                                 address_, options_.token.empty() ? " (none was given)" : ""));
  }
  if (reply.status != Status::ok) unexpected(Op::hello, reply);
}

void Client::ensure_connected() {
  if (!socket_.valid()) connect();
}

void Client::fail(Op op, const std::string& why) {
  socket_.reset();  // the stream may be out of step: the next call reconnects
  throw StoreError(fmt::format("{}: {} failed: {}", address_, tcp_wire::op_name(op), why));
}

void Client::unexpected(Op op, const Reply& reply) {
  fail(op, fmt::format("unexpected reply status {} from the server", static_cast<int>(reply.status)));
}

void Client::send_frame(const tcp_wire::Bytes& frame, Op op) {
  std::string error;
  switch (socket_.send_all(frame.data(), frame.size(), deadline_after(timeout()), error)) {
    case Socket::Io::done: return;
    case Socket::Io::timeout:
      fail(op, fmt::format("could not send {} bytes within {:.3g} s", frame.size(), seconds(timeout())));
    case Socket::Io::closed: fail(op, fmt::format("connection lost while sending: {}", error));
  }
}

bool Client::read_reply(Reply& reply, Clock::time_point deadline, Op op) {
  if (!socket_.wait_readable(deadline)) return false;
  // A reply has started: the rest of it must follow within the store timeout.
  const auto rest = deadline_after(timeout());
  std::string error;
  std::uint8_t header[tcp_wire::kHeaderBytes];
  auto io = socket_.recv_exact(header, sizeof header, rest, error);
  if (io == Socket::Io::closed) fail(op, fmt::format("connection lost: {}", error));
  if (io == Socket::Io::timeout) fail(op, "truncated reply header");
  const std::size_t size = static_cast<std::size_t>(header[0]) | static_cast<std::size_t>(header[1]) << 8 |
                           static_cast<std::size_t>(header[2]) << 16 | static_cast<std::size_t>(header[3]) << 24;
  if (size > options_.limits.max_frame())
    fail(op, fmt::format("reply of {} bytes exceeds the limit of {} bytes", size, options_.limits.max_frame()));
  tcp_wire::Bytes body(size);
  io = socket_.recv_exact(body.data(), size, rest, error);
  if (io == Socket::Io::closed) fail(op, fmt::format("connection lost: {}", error));
  if (io == Socket::Io::timeout) fail(op, fmt::format("reply of {} bytes not complete within {:.3g} s", size,
                                                      seconds(timeout())));
  auto decoded = tcp_wire::decode_reply(body.data(), body.size(), options_.limits);
  if (auto* bad = std::get_if<tcp_wire::DecodeError>(&decoded)) fail(op, bad->message);
  reply = std::move(std::get<Reply>(decoded));
  return true;
}

Reply Client::call(const Request& request) {
  ensure_connected();
  send_frame(tcp_wire::encode_request(request), request.op);
  Reply reply;
  if (!read_reply(reply, deadline_after(timeout()), request.op))
    fail(request.op, fmt::format("no reply within {:.3g} s (store timeout)", seconds(timeout())));
  if (reply.status == Status::error)
    throw StoreError(fmt::format("{}: {} failed: {}", address_, tcp_wire::op_name(request.op), reply.message));
  return reply;
}

void Client::check_key(const std::string& key, Op op) const {
  if (key.size() > options_.limits.max_key)
    throw StoreError(fmt::format("{}: {}: a key of {} bytes exceeds the limit of {} bytes", address_,
                                 tcp_wire::op_name(op), key.size(), options_.limits.max_key));
}

void Client::check_value(const Bytes& value, Op op) const {
  if (value.size() > options_.limits.max_value)
    throw StoreError(fmt::format("{}: {}: a value of {} bytes exceeds the limit of {} bytes", address_,
                                 tcp_wire::op_name(op), value.size(), options_.limits.max_value));
}

void Client::set(const std::string& key, const Bytes& value) {
  check_key(key, Op::set);
  check_value(value, Op::set);
  Request r = key_request(Op::set, key);
  r.value = value;
  const Reply reply = call(r);
  if (reply.status != Status::ok) unexpected(Op::set, reply);
}

Bytes Client::get(const std::string& key, Duration timeout) {
  check_key(key, Op::get);
  const auto deadline = deadline_after(timeout);
  for (;;) {
    Reply reply = call(key_request(Op::get, key));
    if (reply.status == Status::value) return std::move(reply.value);
    if (reply.status != Status::not_found) unexpected(Op::get, reply);
    // Absent: park a wait on the server, then read it (a delete in between loops again).
    const Duration left = deadline - Clock::now();
    try {
      if (deadline == Clock::time_point::max()) wait({key}, Duration::max());
      else if (left.count() <= 0) throw_wait_timeout(*this, {key}, 1, timeout);
      else wait({key}, left);
    } catch (const TimeoutError&) {
      throw_wait_timeout(*this, {key}, 1, timeout);  // report the caller's timeout, not the rest
    }
  }
}

std::int64_t Client::add(const std::string& key, std::int64_t delta) {
  check_key(key, Op::add);
  Request r = key_request(Op::add, key);
  r.delta = delta;
  const Reply reply = call(r);
  if (reply.status != Status::integer) unexpected(Op::add, reply);
  return reply.integer;
}

Bytes Client::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key(key, Op::compare_set);
  check_value(expected, Op::compare_set);
  check_value(desired, Op::compare_set);
  Request r = key_request(Op::compare_set, key);
  r.value = expected;
  r.desired = desired;
  Reply reply = call(r);
  if (reply.status != Status::value) unexpected(Op::compare_set, reply);
  return std::move(reply.value);
}

void Client::check_keys(const std::vector<std::string>& keys, Op op) const {
  for (const auto& k : keys) check_key(k, op);
  if (keys.size() > options_.limits.max_keys)
    throw StoreError(fmt::format("{}: {} on {} keys exceeds the limit of {} per call", address_, tcp_wire::op_name(op),
                                 keys.size(), options_.limits.max_keys));
}

void Client::wait(const std::vector<std::string>& keys, Duration timeout) {
  if (keys.empty()) return;
  check_keys(keys, Op::wait);
  ensure_connected();
  Request r;
  r.op = Op::wait;
  r.keys = keys;
  send_frame(tcp_wire::encode_request(r), Op::wait);
  Reply reply;
  if (read_reply(reply, deadline_after(timeout), Op::wait)) {
    if (reply.status == Status::ready) return;
    unexpected(Op::wait, reply);
  }
  if (withdraw()) return;
  const auto flags = present(keys);
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (!flags[i]) missing.push_back(keys[i]);
  if (missing.empty()) return;  // they arrived just after the deadline: nothing is missing
  throw_wait_timeout(*this, missing, keys.size(), timeout);
}

bool Client::withdraw() {
  // `ready` may cross our cancel on the wire; `canceled` always comes last.
  Request cancel;
  cancel.op = Op::cancel_wait;
  send_frame(tcp_wire::encode_request(cancel), Op::cancel_wait);
  bool ready = false;
  Reply reply;
  for (;;) {
    if (!read_reply(reply, deadline_after(timeout()), Op::cancel_wait))
      fail(Op::cancel_wait, fmt::format("no answer within {:.3g} s", seconds(timeout())));
    if (reply.status == Status::ready) ready = true;
    else if (reply.status == Status::canceled) return ready;
    else unexpected(Op::cancel_wait, reply);
  }
}

std::vector<int> Client::arrive(const std::string& key, int rank, int participants, Duration timeout) {
  if (participants < 1 || static_cast<std::uint32_t>(participants) > tcp_wire::kMaxParticipants || rank < 0 ||
      rank >= participants)
    throw ConfigError(fmt::format("{}: arrive on '{}': rank {} of {} participants is out of range; accepted: 1 to {} "
                                  "participants, rank 0 to participants-1",
                                  address_, key, rank, participants, tcp_wire::kMaxParticipants));
  check_key(key, Op::arrive);
  ensure_connected();
  Request r = key_request(Op::arrive, key);
  r.rank = static_cast<std::uint32_t>(rank);
  r.participants = static_cast<std::uint32_t>(participants);
  send_frame(tcp_wire::encode_request(r), Op::arrive);
  Reply reply;
  if (read_reply(reply, deadline_after(timeout), Op::arrive)) {
    if (reply.status == Status::ready) return {};
    // The server refused the arrival (a reused key, another count): nothing was parked.
    if (reply.status == Status::error)
      throw StoreError(fmt::format("{}: arrive failed: {}", address_, reply.message));
    unexpected(Op::arrive, reply);
  }
  if (withdraw()) return {};
  // Our own arrival is in the record, so it exists; the ones that came after the deadline
  // count as arrived (as a wait's keys do).
  Reply record = call(key_request(Op::get, key));
  if (record.status != Status::value) unexpected(Op::get, record);
  auto missing = tcp_wire::arrival_missing(record.value, r.participants);
  if (!missing)
    fail(Op::arrive, fmt::format("the value under '{}' ({} bytes) is not an arrival record for {} participants",
                                 key, record.value.size(), participants));
  return std::move(*missing);
}

std::vector<bool> Client::present(const std::vector<std::string>& keys) {
  check_keys(keys, Op::check);
  Request r;
  r.op = Op::check;
  r.keys = keys;
  Reply reply = call(r);
  if (reply.status != Status::flags || reply.flags.size() != keys.size()) unexpected(Op::check, reply);
  return std::move(reply.flags);
}

bool Client::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  for (bool f : present(keys))
    if (!f) return false;
  return true;
}

bool Client::delete_key(const std::string& key) {
  check_key(key, Op::delete_key);
  const Reply reply = call(key_request(Op::delete_key, key));
  if (reply.status != Status::integer) unexpected(Op::delete_key, reply);
  return reply.integer != 0;
}

std::int64_t Client::num_keys() {
  Request r;
  r.op = Op::num_keys;
  const Reply reply = call(r);
  if (reply.status != Status::integer) unexpected(Op::num_keys, reply);
  return reply.integer;
}

std::unique_ptr<Store> Client::clone() {
  ClientOptions o = options_;
  o.timeout = timeout();
  return std::make_unique<Client>(std::move(o));
}

}  // namespace fastrun::tcp_store
